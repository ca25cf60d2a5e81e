#!/usr/bin/python3
"""torch_bench.py — PyTorch side of bench/compare: the same models as `sfvit bench`, random
data, timed training steps (forward, cross-entropy, backward, AdamW) and inference batches.

Models come from tests/golden/models.py (written independently of sfvit from
docs/models.md, the state_dict names are the official ones) and bench/fmnist_torch.py, run
in float32. SOFT's Newton-Raphson inverse is the master-code iteration with the explicit
-Y^T G Y^T backward (as bench/ops_torch.py and sfvit do), not the golden files' exact inverse.

Usage: /usr/bin/python3 bench/torch_bench.py MODEL [--batch 8] [--steps 5] [--warmup 2]
       [--threads 2] [--no-infer] [--bf16] [--split]
MODEL: fmnist_sima, fmnist_vit_sima, deit_small_sima, deit_small_msa, xcit_small_12_p16_sima, soft_tiny,
       cvt_13 (softmax, QuickGELU, BatchNorm in training mode as sfvit's training step).
Prints, like `sfvit bench`: train_img_per_s X, infer_img_per_s Y, and
train_peak_rss_mib Z (process peak resident set after the training steps) with
base_rss_mib W (resident set once torch and the data are loaded, before the model).

--split then runs as many pairs of training steps, one timed and one profiled
(torch.profiler, each op's self CPU time), and splits the step into its products and the
rest (bench/torch_split.py says which ops are products), the counterpart of `sfvit bench
--no-products`: train_step_ms (the timed median above), train_products_ms (the median of the
profiled steps' products) and train_rest_ms (the median over pairs of the timed step less
its profiled twin's products: the profiler's per-op cost, large for many small ops, stays
out of it), then the largest ops of the rest as `rest_op NAME MS` lines (their profiled
self times, that cost included).
"""
import argparse
import contextlib
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "golden"))
sys.path.insert(0, HERE)
import models as golden  # noqa: E402  (sets float64 as default dtype: reset below)
import fmnist_torch  # noqa: E402
import nr_torch  # noqa: E402
import torch_split  # noqa: E402

torch.set_default_dtype(torch.float32)


golden.newton_inverse = nr_torch.nr_master


# float32 Fourier features for the reference XCiT: importing fmnist_torch installs
# fmnist_torch.fourier_float32 on golden.PositionalEncodingFourier.


def build(name):
    """(model, image size, channels, classes)."""
    if name == "fmnist_sima":  # configs/fmnist_sima.yaml: XCiT -> SimA on 32x32 gray
        return fmnist_torch.xcit_sima(), 32, 1, 10
    if name == "fmnist_vit_sima":  # configs/fmnist_vit_sima.yaml
        return fmnist_torch.ViT(img=28, patch=4, chans=1, classes=10, dim=96, depth=6, heads=3, mlp_ratio=2,
                                kind="sima"), 28, 1, 10
    if name in ("deit_small_sima", "deit_small_msa"):
        kind = name.rsplit("_", 1)[1]
        return golden.VisionTransformer(224, 16, 3, 1000, 384, 12, 6, 4.0, [kind] * 12, "l1", "gelu"), 224, 3, 1000
    if name == "xcit_small_12_p16_sima":
        return golden.XCiT(224, 16, 3, 1000, 384, 12, 8, 4.0, "sima", "l1", True, "gelu", 2), 224, 3, 1000
    if name == "soft_tiny":
        return golden.SOFT(224, 3, 1000, (64, 128, 320, 512), (1, 2, 3, 2), (2, 4, 10, 16), False, 20, 4.0,
                           "gelu"), 224, 3, 1000
    if name == "cvt_13":  # configs/cvt_13.yaml
        return golden.CvT(3, 1000, (64, 192, 384), (1, 2, 10), (1, 3, 6), ["msa"] * 13, "l1", 4.0,
                          "quick_gelu"), 224, 3, 1000
    raise SystemExit(f"torch_bench: unknown model {name}")


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def rss_mib(field="VmRSS"):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def profile_split(train_step, steps):
    """(products ms, rest ms, [(op, ms)] of the rest's ops, largest first), per training step.
    Each of `steps` pairs runs a timed step and then a profiled one: the pair's rest is the
    timed step less the profiled step's products, so the profiler's per-op cost stays out of
    it, and a machine whose speed drifts moves both steps of a pair alike."""
    from torch.profiler import ProfilerActivity, profile
    products, rests, ops = [], [], {}
    for _ in range(steps):
        t0 = time.perf_counter()
        train_step()
        timed_ms = (time.perf_counter() - t0) * 1e3
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            train_step()
        p, rest_ops = torch_split.split((e.key, e.input_shapes, e.self_cpu_time_total / 1e3)
                                        for e in prof.key_averages(group_by_input_shape=True))
        products.append(p)
        rests.append(timed_ms - p)
        for name, ms in rest_ops:
            ops[name] = ops.get(name, 0.0) + ms / steps
    if min(rests) < 0:
        # the two steps of a pair did not run at one speed: the machine is busy with other work
        print(f"torch_bench: warning: a profiled step's products took {-min(rests):.1f} ms longer than "
              "its whole timed twin (other work on the machine?); the split is not reliable", file=sys.stderr)
    return median(products), median(rests), sorted(ops.items(), key=lambda r: -r[1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("SFVIT_THREADS", "2")))
    ap.add_argument("--no-infer", action="store_true")
    ap.add_argument("--bf16", action="store_true",
                    help="forward and loss under torch.cpu.amp.autocast(dtype=torch.bfloat16)")
    ap.add_argument("--split", action="store_true",
                    help="also profile the training steps: products against the rest")
    a = ap.parse_args()
    # bf16 autocast: PyTorch's own mixed precision on CPU (oneDNN bf16 kernels where the CPU
    # has them); master weights and the optimizer stay fp32 as in sfvit's train.precision.
    amp = (lambda: torch.cpu.amp.autocast(dtype=torch.bfloat16)) if a.bf16 else contextlib.nullcontext
    if a.bf16:
        # PyTorch 1.13's CPU autocast hands LayerNorm a bf16 input next to its fp32 weight and
        # fails ("expected scalar type BFloat16 but found Float"); normalize in fp32 as its CUDA
        # autocast does (and as sfvit does in every precision).
        ln_forward = torch.nn.LayerNorm.forward
        torch.nn.LayerNorm.forward = lambda self, x: ln_forward(self, x.float())
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    base = rss_mib()
    model, S, Ch, K = build(a.model)
    x = torch.randn(a.batch, Ch, S, S)
    y = torch.randint(0, K, (a.batch,))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6, weight_decay=0.05)
    model.train()

    def train_step():
        opt.zero_grad(set_to_none=True)
        with amp():
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    times = []
    for s in range(-a.warmup, a.steps):
        t0 = time.perf_counter()
        train_step()
        if s >= 0:
            times.append(time.perf_counter() - t0)
    peak = rss_mib("VmHWM")
    train = median(times)
    split = profile_split(train_step, a.steps) if a.split else None
    infer = float("nan")
    if not a.no_infer:
        model.eval()
        times = []
        with torch.no_grad():
            for s in range(-a.warmup, a.steps):
                t0 = time.perf_counter()
                with amp():
                    model(x)
                if s >= 0:
                    times.append(time.perf_counter() - t0)
        infer = median(times)
    print(f"torch {torch.__version__} {a.model} batch {a.batch} threads {torch.get_num_threads()} "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}")
    print(f"train_img_per_s {a.batch / train:.2f}")
    print(f"infer_img_per_s {a.batch / infer:.2f}")
    print(f"train_peak_rss_mib {peak:.1f}")
    print(f"base_rss_mib {base:.1f}")
    if split:
        products_ms, rest_ms, rest_ops = split
        print(f"train_step_ms {train * 1e3:.1f}")
        print(f"train_products_ms {products_ms:.1f}")
        print(f"train_rest_ms {rest_ms:.1f}")
        for name, ms in rest_ops[:12]:
            print(f"rest_op {name.replace(' ', '_')} {ms:.2f}")


if __name__ == "__main__":
    main()
