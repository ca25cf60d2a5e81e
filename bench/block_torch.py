#!/usr/bin/python3
"""block_torch.py — PyTorch side of bench/block.c (the SimA paper's Table 3): one attention
block (qkv, heads, attention core, merge, proj), batch 1, forward under torch.no_grad(), the
same kinds and shapes; output "kind<TAB>shape<TAB>ms" (median) and '#' comments.

Usage: /usr/bin/python3 bench/block_torch.py [reps]   (threads: SFVIT_THREADS, default 2)
Dimension legend: N tokens, C channels, H heads, D head dim, M landmarks.
"""
import os
import sys
import time

import torch
import torch.nn.functional as F

from nr_torch import nr_master  # SOFT master-code iteration

REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 41
torch.set_num_threads(int(os.environ.get("SFVIT_THREADS", "2")))
torch.manual_seed(11)


def l1n(t):
    return F.normalize(t, p=1.0, dim=-2, eps=1e-12)


def gauss(q, l):
    d2 = (q * q).sum(-1, keepdim=True) + (l * l).sum(-1).unsqueeze(-2) - 2.0 * (q @ l.transpose(-1, -2))
    return torch.exp(-0.5 * d2)


def core(kind, q, k, v, temp):
    N, D = q.shape[-2], q.shape[-1]
    if kind == "softmax":
        return torch.softmax((q @ k.transpose(-1, -2)) * D ** -0.5, dim=-1) @ v
    if kind == "elu_linear":
        return (F.elu(q) + 1.0) @ ((F.elu(k) + 1.0).transpose(-1, -2) @ v)
    if kind in ("sima", "sima_qk"):
        q, k = l1n(q), l1n(k)
        if kind == "sima_qk" or N < D:
            return (q @ k.transpose(-1, -2)) @ v
        return q @ (k.transpose(-1, -2) @ v)
    if kind == "xca":
        qn, kn = F.normalize(q, dim=-2), F.normalize(k, dim=-2)
        a = (qn.transpose(-1, -2) @ kn) * temp.reshape(1, -1, 1, 1)
        return v @ torch.softmax(a, dim=-1).transpose(-1, -2)
    # soft: K = Q, landmarks by 2-D average pooling of Q to 4 x 4, NR_20 of S(L, L)
    H, s = q.shape[1], int(round(N ** 0.5))
    qs = q / D ** 0.25
    img = qs[0].transpose(-1, -2).reshape(H, D, s, s)
    lm = F.avg_pool2d(img, s // 4).reshape(H, D, 16).transpose(-1, -2)[None]
    k1 = gauss(qs, lm)
    z = nr_master(gauss(lm, lm))
    return (k1 @ z) @ (k1.transpose(-1, -2) @ v)


def block(kind, x, w, H):
    B, N, C = x.shape
    qkv = F.linear(x, w["wqkv"], w["bqkv"]).reshape(B, N, 3, H, C // H).permute(2, 0, 3, 1, 4)
    o = core(kind, qkv[0], qkv[1], qkv[2], w["temp"])
    return F.linear(o.transpose(1, 2).reshape(B, N, C), w["wproj"], w["bproj"])


def main():
    print(f"# torch {torch.__version__} threads {torch.get_num_threads()}, "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}")
    for D, N, H in ((64, 256, 8), (256, 64, 8)):
        C = H * D
        w = {"wqkv": torch.randn(3 * C, C) / C ** 0.5, "bqkv": 0.02 * torch.randn(3 * C),
             "wproj": torch.randn(C, C) / C ** 0.5, "bproj": 0.02 * torch.randn(C),
             "temp": 1.0 + 0.1 * torch.randn(H)}
        x = torch.randn(1, N, C)
        for kind in ("softmax", "elu_linear", "sima", "sima_qk", "xca", "soft"):
            times = []
            with torch.no_grad():
                for r in range(-5, REPS):
                    t0 = time.perf_counter()
                    block(kind, x, w, H)
                    if r >= 0:
                        times.append((time.perf_counter() - t0) * 1e3)
            times.sort()
            print(f"{kind}\tD={D} N={N} H={H}\t{times[len(times) // 2]:.4f}", flush=True)


if __name__ == "__main__":
    main()
