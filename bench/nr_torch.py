"""nr_torch.py — SOFT's Newton–Raphson inverse for the PyTorch benchmarks (ops_torch.py,
block_torch.py, torch_bench.py), as the SOFT master code runs it and as sfvit does:
P = A + 0.01 I, alpha = 0.9 * 2 / (max row sum of A)^2 per matrix, Y_0 = alpha P,
Y <- 2 Y - Y (P Y) for `iters` iterations; backward -Y^T G Y^T (Y taken as the exact inverse),
not autograd through the iterations.
"""
import torch


class NRInverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, iters):
        M = a.shape[-1]
        p = a + 0.01 * torch.eye(M, dtype=a.dtype)
        alpha = 0.9 * 2.0 / a.sum(-1).max(-1).values ** 2
        v = alpha[..., None, None] * p
        for _ in range(iters):
            v = 2 * v - v @ (p @ v)
        ctx.save_for_backward(v)
        return v

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        yt = y.transpose(-1, -2)
        return -(yt @ g @ yt), None


def nr_master(a, iters=20):
    return NRInverse.apply(a, iters)
