#!/usr/bin/python3
"""The README's main job in PyTorch: the same model and recipe as configs/fmnist_sima.yaml
(XCiT -> SimA, width 96, 4 blocks, 3 heads, P = 8 on 32x32, batch 32, AdamW 2e-3, 3 epochs),
or with --model vit the DeiT-layout SimA ViT of fmnist_vit_sima.yaml, on the same Fashion-MNIST
files, for a side-by-side accuracy and time.

Usage: /usr/bin/python3 bench/fmnist_torch.py [--model xcit|vit] [--epochs 3] [--threads 2]
Reads the IDX files of Debian's dataset-fashion-mnist directly (decoding is not what is
compared; images are resized 28 -> 32 bilinearly for the XCiT model, as sfvit's loader does).
The XCiT model is the independent reference of tests/golden/models.py. Prints one line per
epoch and 'final val top-1 X%'.
"""
import argparse
import gzip
import math
import time

import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden"))
import models as golden  # noqa: E402  (sets float64 as the default dtype: reset below)

torch.set_default_dtype(torch.float32)

FM = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic = int.from_bytes(data[0:4], "big")
    n = int.from_bytes(data[4:8], "big")
    if magic == 0x803:
        return np.frombuffer(data, np.uint8, offset=16).reshape(n, 28, 28)
    return np.frombuffer(data, np.uint8, offset=8).astype(np.int64)


class Attention(nn.Module):
    def __init__(self, dim, heads, kind):
        super().__init__()
        self.heads, self.kind = heads, kind
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        if self.kind == "msa":
            a = (q @ k.transpose(-2, -1)) * (C // self.heads) ** -0.5
            o = a.softmax(-1) @ v
        else:  # SimA: l1-normalize each channel over tokens, order by the official rule
            q = F.normalize(q, p=1.0, dim=-2)
            k = F.normalize(k, p=1.0, dim=-2)
            D = C // self.heads
            o = (q @ k.transpose(-2, -1)) @ v if N < D else q @ (k.transpose(-2, -1) @ v)
        return self.proj(o.transpose(1, 2).reshape(B, N, C))


class Block(nn.Module):
    def __init__(self, dim, heads, mlp_ratio, kind):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, heads, kind)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        hidden = int(dim * mlp_ratio)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class ViT(nn.Module):
    def __init__(self, img=28, patch=4, chans=1, classes=10, dim=128, depth=4, heads=4, mlp_ratio=2, kind="sima"):
        super().__init__()
        n = (img // patch) ** 2
        self.patch_embed = nn.Conv2d(chans, dim, patch, patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, n + 1, dim))
        self.blocks = nn.ModuleList([Block(dim, heads, mlp_ratio, kind) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, classes)
        nn.init.trunc_normal_(self.cls_token, std=0.02)
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], 1) + self.pos_embed
        for b in self.blocks:
            x = b(x)
        return self.head(self.norm(x)[:, 0])


def fourier_float32(self, B, Hp, Wp):
    """golden.PositionalEncodingFourier.forward in float32 (the reference builds float64)."""
    ys = torch.arange(1, Hp + 1, dtype=torch.float32) / (Hp + 1e-6) * 2 * math.pi
    xs = torch.arange(1, Wp + 1, dtype=torch.float32) / (Wp + 1e-6) * 2 * math.pi
    k = torch.arange(self.hidden, dtype=torch.float32)
    omega = self.temperature ** (2 * torch.div(k, 2, rounding_mode="floor") / self.hidden)

    def enc(p):
        a = p[:, None] / omega
        return torch.where(k.long() % 2 == 0, torch.sin(a), torch.cos(a))

    py = enc(ys)[:, None, :].expand(Hp, Wp, self.hidden)
    px = enc(xs)[None, :, :].expand(Hp, Wp, self.hidden)
    feat = torch.cat([py, px], dim=-1).permute(2, 0, 1)[None].expand(B, -1, -1, -1)
    return self.token_projection(feat.contiguous())


golden.PositionalEncodingFourier.forward = fourier_float32


def xcit_sima():
    """fmnist_sima.yaml's model with sfvit's init: Linear tn(0.02)/0, LN 1/0, gammas 1, convs default."""
    model = golden.XCiT(32, 8, 1, 10, 96, 4, 3, 2.0, "sima", "l1", True, "gelu", 2)
    for name, p in model.named_parameters():
        if name == "cls_token":
            nn.init.trunc_normal_(p, std=0.02)
    for m in model.modules():
        if isinstance(m, nn.Linear):
            nn.init.trunc_normal_(m.weight, std=0.02)
            nn.init.zeros_(m.bias)
    return model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="xcit", choices=["xcit", "vit"])
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--attn", default="sima")
    ap.add_argument("--max-steps", type=int, default=0, help="stop each epoch after this many steps (timing)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    mean, std = 0.2860, 0.3530
    xtr = (torch.from_numpy(read_idx(f"{FM}/train-images-idx3-ubyte.gz").copy()).float() / 255 - mean) / std
    ytr = torch.from_numpy(read_idx(f"{FM}/train-labels-idx1-ubyte.gz").copy())
    xva = (torch.from_numpy(read_idx(f"{FM}/t10k-images-idx3-ubyte.gz").copy()).float() / 255 - mean) / std
    yva = torch.from_numpy(read_idx(f"{FM}/t10k-labels-idx1-ubyte.gz").copy())
    xtr, xva = xtr.unsqueeze(1), xva.unsqueeze(1)
    if a.model == "xcit":  # 28 -> 32 as sfvit's loader (bilinear, half-pixel centres)
        xtr = F.interpolate(xtr, size=32, mode="bilinear", align_corners=False)
        xva = F.interpolate(xva, size=32, mode="bilinear", align_corners=False)
        model = xcit_sima()
    else:
        model = ViT(dim=96, depth=6, heads=3, kind=a.attn)
    # sfvit's decay mask: no decay for biases, norms, tokens, pos-embeds, layer scales, temperatures
    def decays(n, p):
        return p.ndim > 1 and n not in ("cls_token", "pos_embed") and not n.endswith("temperature")
    decay = [p for n, p in model.named_parameters() if decays(n, p)]
    no_decay = [p for n, p in model.named_parameters() if not decays(n, p)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.999), eps=1e-8)
    steps = len(xtr) // a.batch
    warmup, warmup_lr, min_lr = 0.25, 1e-5, 1e-5
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, params "
          f"{sum(p.numel() for p in model.parameters())}, {steps} steps/epoch", flush=True)
    t_start = time.time()
    top1 = 0.0
    for epoch in range(a.epochs):
        model.train()
        t0 = time.time()
        perm = torch.randperm(len(xtr))
        window = []
        for s in range(steps):
            if a.max_steps and s >= a.max_steps:
                break
            e = epoch + s / steps
            lr = warmup_lr + e * (a.lr - warmup_lr) / warmup if e < warmup else \
                min_lr + 0.5 * (a.lr - min_lr) * (1 + math.cos(math.pi * e / a.epochs))
            for gr in opt.param_groups:
                gr["lr"] = lr
            idx = perm[s * a.batch:(s + 1) * a.batch]
            x = xtr[idx]
            loss = F.cross_entropy(model(x), ytr[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            window.append(loss.item())
            if (s + 1) % 100 == 0:
                print(f"epoch {epoch + 1}/{a.epochs} step {s + 1}/{steps} loss {sum(window) / len(window):.4f} "
                      f"lr {lr:.3e}", flush=True)
                window.clear()
        train_s = time.time() - t0
        done = a.max_steps if a.max_steps else steps
        model.eval()
        with torch.no_grad():
            correct = sum((model(xva[i:i + 500]).argmax(1) == yva[i:i + 500]).sum().item() for i in range(0, len(xva), 500))
        top1 = 100.0 * correct / len(xva)
        print(f"epoch {epoch + 1}/{a.epochs}  top-1 {top1:.2f}%  train {train_s:.0f}s "
              f"({done * a.batch / train_s:.1f} img/s)", flush=True)
    print(f"final val top-1 {top1:.2f}%  ({time.time() - t_start:.0f} s)")


if __name__ == "__main__":
    main()
