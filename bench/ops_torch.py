#!/usr/bin/python3
"""ops_torch.py — PyTorch reference timings for bench/ops.c: the same attention compositions,
float32, forward + backward from a fixed upstream gradient, median of repeated runs in ms.

Output format matches bench/ops: "op<TAB>shape<TAB>ms" plus '#' comment lines.
Threads: torch.set_num_threads(SFVIT_THREADS, default 2) so both sides use the same count.
Usage: /usr/bin/python3 bench/ops_torch.py [reps] [filter]   (Debian python3-torch; filter:
run only the variants whose name contains it).

Dimension legend: B batch, N tokens, H heads, D head dim, M landmarks.
"""
import os
import sys
import time

import torch
import torch.nn.functional as F

from nr_torch import nr_master  # SOFT master-code iteration, backward -Y^T G Y^T

REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 9
FILTER = sys.argv[2] if len(sys.argv) > 2 else None
THREADS = int(os.environ.get("SFVIT_THREADS", "2"))
torch.set_num_threads(THREADS)
torch.manual_seed(7)


def msa(x):
    D = x["q"].shape[-1]
    return torch.softmax((x["q"] @ x["k"].transpose(-1, -2)) * D ** -0.5, dim=-1) @ x["v"]


def l1n(t):
    return F.normalize(t, p=1.0, dim=-2, eps=1e-12)


def sima(x, order=None):
    q, k, v = l1n(x["q"]), l1n(x["k"]), x["v"]
    N, D = q.shape[-2], q.shape[-1]
    if order is None:  # sf_sima_resolve: (Q K^T) V when N < D, else Q (K^T V)
        order = "qk" if N < D else "kv"
    return (q @ k.transpose(-1, -2)) @ v if order == "qk" else q @ (k.transpose(-1, -2) @ v)


def xca(x):
    H = x["q"].shape[1]
    qn = F.normalize(x["q"], dim=-2)
    kn = F.normalize(x["k"], dim=-2)
    a = (qn.transpose(-1, -2) @ kn) * x["temp"].reshape(1, H, 1, 1)
    return x["v"] @ torch.softmax(a, dim=-1).transpose(-1, -2)


def gauss(q, l):
    # ||q||^2 + ||l||^2 - 2 q.l, as the official SOFT kernel computes it (one GEMM)
    d2 = (q * q).sum(-1, keepdim=True) + (l * l).sum(-1).unsqueeze(-2) - 2.0 * (q @ l.transpose(-1, -2))
    return torch.exp(-0.5 * d2)


def soft(x):
    k1 = gauss(x["q"], x["l"])
    k2 = gauss(x["l"], x["l"])
    z = nr_master(k2)
    t = k1.transpose(-1, -2) @ x["v"]
    return (k1 @ z) @ t


def elu_linear(x):
    phi_q, phi_k = F.elu(x["q"]) + 1.0, F.elu(x["k"]) + 1.0
    return phi_q @ (phi_k.transpose(-1, -2) @ x["v"])


VARIANTS = [("msa", msa), ("sima", sima), ("sima_qk", lambda x: sima(x, "qk")), ("xca", xca),
            ("soft", soft), ("elu_linear", elu_linear)]
SHAPES = [(8, 6, 197, 64), (1, 8, 256, 64), (8, 8, 256, 64), (1, 8, 64, 256), (8, 8, 64, 256)]


def time_variant(fn, x, g_out):
    times = []
    for r in range(-2, REPS):
        for t in x.values():
            t.grad = None
        t0 = time.perf_counter()
        out = fn(x)
        out.backward(g_out)
        dt = time.perf_counter() - t0
        if r >= 0:
            times.append(dt * 1e3)
    times.sort()
    n = len(times)
    return times[n // 2] if n % 2 else 0.5 * (times[n // 2 - 1] + times[n // 2])


def main():
    print(f"# torch {torch.__version__} threads {torch.get_num_threads()}, "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}")
    for B, H, N, D in SHAPES:
        M = 49 if N >= 196 else 16
        qs = D ** -0.25
        x = {"q": torch.randn(B, H, N, D) * qs, "k": torch.randn(B, H, N, D) * qs,
             "v": torch.randn(B, H, N, D), "l": torch.randn(B, H, M, D) * qs,
             "temp": 1.0 + 0.1 * torch.randn(H)}
        for t in x.values():
            t.requires_grad_(True)
        g_out = torch.randn(B, H, N, D)
        label = f"B{B} H{H} N{N} D{D}"
        for name, fn in VARIANTS:
            if FILTER and FILTER not in name:
                continue
            ms = time_variant(fn, x, g_out)
            shown = f"soft(M={M})" if name == "soft" else name
            print(f"{shown}\t{label}\t{ms:.3f}", flush=True)


if __name__ == "__main__":
    main()
