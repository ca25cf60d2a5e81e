#!/usr/bin/python3
"""gen.py — writes the golden files for tests/test_golden_ops.c with PyTorch.

For every op in include/sfvit/ops.h, one small safetensors file per case in
tests/golden/ops/<case>.safetensors holding:
  - the op's inputs, named after the op's arguments in ops.h ("x", "w", "q", ...);
  - "out": the op's output;
  - "g_out": a fixed upstream gradient dL/d(out);
  - "grad.<input>": dL/d(input) by torch.autograd with L = sum(out * g_out), for every input
    that takes a gradient;
  - extra reference tensors some ops need ("running_mean.after", ...);
  - "__metadata__": "op" (the C function without the sf_ prefix), the op's integer and float
    arguments as strings, the comparison tolerances "rtol" / "atol" (|got - want| <=
    atol + rtol * |want| per element), and for the Newton-Raphson ops the convergence
    "residual" sf_nr_last_residual must report.

Precision: inputs are drawn in float32 (so the C test sees exactly the values used here);
the computation, including autograd, runs in float64 on those values; the results are
rounded to float32 when stored. The reference is therefore the exact answer for the stored
inputs up to one float32 rounding, and every difference the test sees is sfvit's own error.

Dropout and drop path are random: their golden cases run in eval mode (identity); their
training-mode masks are covered by the gradient checks, which replay the RNG.

Deterministic: fixed seeds, fixed case list, fixed file layout (re-running rewrites the
same bytes). Usage: /usr/bin/python3 tests/golden/gen.py [outdir]  (Debian python3-torch).

Dimension legend: B batch, N tokens, C channels, H heads, D head dim, M landmarks, K classes.
"""
import json
import os
import struct
import sys

import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
HERE = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "ops")

# Default comparison tolerances; cases with long reductions or iterative ops loosen them.
RTOL = 1e-4
ATOL = 1e-5


# ---- safetensors writer (format: u64 LE header length, JSON header, raw LE data) ----
def write_safetensors(path, tensors, metadata):
    header = {"__metadata__": {k: str(v) for k, v in metadata.items()}}
    blobs, offset = [], 0
    for name, t in tensors.items():
        a = t.detach().to(torch.float32).contiguous().numpy()
        raw = a.astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)  # data starts 8-byte aligned, as the reference writer does
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


# ---- helpers ----
GEN = torch.Generator().manual_seed(20240611)


def randn(*shape, std=1.0):
    """float32 draw, returned as float64 holding exactly the float32 values."""
    return (torch.randn(*shape, generator=GEN, dtype=torch.float32) * std).double()


def rand(*shape, lo=0.0, hi=1.0):
    return (torch.rand(*shape, generator=GEN, dtype=torch.float32) * (hi - lo) + lo).double()


def as_f32(t):
    """Round a float64 tensor to float32 values (kept as float64) so the stored input is exact."""
    return t.to(torch.float32).double()


CASES = []


def case(name, op, inputs, fn, meta=None, no_grad=(), extra=None, rtol=RTOL, atol=ATOL):
    """inputs: ordered {name: float64 tensor}; fn(**leaves) -> output tensor.
    no_grad: names of inputs that take no gradient. extra(**leaves, out=...) -> dict of
    additional reference tensors (computed after the forward)."""
    CASES.append((name, op, inputs, fn, meta or {}, set(no_grad), extra, rtol, atol))


def run_case(name, op, inputs, fn, meta, no_grad, extra, rtol, atol):
    leaves = {}
    for k, v in inputs.items():
        v = as_f32(v).clone()
        if k not in no_grad:
            v.requires_grad_(True)
        leaves[k] = v
    stored_inputs = {k: v.detach().clone() for k, v in leaves.items()}
    out = fn(**leaves)
    g_out = randn(*out.shape)
    grads = {}
    need = [k for k in leaves if k not in no_grad]
    if need:
        L = (out * g_out).sum()
        gs = torch.autograd.grad(L, [leaves[k] for k in need], allow_unused=True)
        for k, gk in zip(need, gs):
            grads["grad." + k] = gk if gk is not None else torch.zeros_like(leaves[k])
    tensors = dict(stored_inputs)
    tensors["out"] = out
    tensors["g_out"] = g_out
    tensors.update(grads)
    if extra:
        tensors.update(extra(out=out.detach(), **{k: v.detach() for k, v in leaves.items()}))
    md = {"op": op, "case": name, "rtol": repr(rtol), "atol": repr(atol)}
    md.update(meta)
    path = os.path.join(OUT_DIR, name + ".safetensors")
    write_safetensors(path, tensors, md)
    return os.path.getsize(path)


# ---- matmul.c ----
case("linear", "linear", {"x": randn(2, 5, 12), "w": randn(7, 12, std=0.3), "b": randn(7)},
     lambda x, w, b: F.linear(x, w, b))
case("linear_nobias", "linear", {"x": randn(6, 9), "w": randn(4, 9, std=0.3)},
     lambda x, w: F.linear(x, w))
for ta in (0, 1):
    for tb in (0, 1):
        M, K, N = 5, 7, 6
        a = randn(2, 3, K, M) if ta else randn(2, 3, M, K)
        b = randn(2, 3, N, K) if tb else randn(2, 3, K, N)

        def mm(a, b, ta=ta, tb=tb):
            return (a.transpose(-1, -2) if ta else a) @ (b.transpose(-1, -2) if tb else b)

        case(f"matmul_t{ta}{tb}", "matmul", {"a": a, "b": b}, mm, {"trans_a": ta, "trans_b": tb})
case("matmul_2d", "matmul", {"a": randn(4, 9), "b": randn(9, 3)}, lambda a, b: a @ b,
     {"trans_a": 0, "trans_b": 0})

# ---- elementwise.c ----
case("add", "add", {"a": randn(2, 5, 8), "b": randn(2, 5, 8)}, lambda a, b: a + b)
case("add_broadcast_bias", "add_broadcast", {"x": randn(2, 5, 8), "y": randn(8)}, lambda x, y: x + y)
case("add_broadcast_pos", "add_broadcast", {"x": randn(3, 5, 8), "y": randn(1, 5, 8)},
     lambda x, y: x + y)
case("mul_broadcast", "mul_broadcast", {"x": randn(2, 5, 8), "y": randn(8)}, lambda x, y: x * y)
case("scale", "scale", {"x": randn(3, 4, 5)}, lambda x: x * as_f32(torch.tensor(0.37)).item(),
     {"s": repr(float(torch.tensor(0.37, dtype=torch.float32)))})
case("gelu", "gelu", {"x": randn(4, 33, std=2.0)}, lambda x: F.gelu(x))
case("gelu_tanh", "gelu_tanh", {"x": randn(4, 33, std=2.0)}, lambda x: F.gelu(x, approximate="tanh"))
case("relu", "relu", {"x": randn(4, 33)}, lambda x: F.relu(x))
case("elu1", "elu1", {"x": randn(4, 33, std=2.0)}, lambda x: F.elu(x) + 1.0)
# Eval mode: identity. The training-mode masks are sfvit's own RNG (gradient checks cover them).
case("dropout_eval", "dropout", {"x": randn(3, 10)}, lambda x: x * 1.0, {"p": "0.3", "training": 0})
case("drop_path_eval", "drop_path", {"x": randn(3, 4, 5)}, lambda x: x * 1.0,
     {"p": "0.2", "training": 0})

# ---- shape.c ----
case("reshape", "reshape", {"x": randn(2, 3, 4)}, lambda x: x.reshape(6, 4), {"shape": "6,4"})
case("permute_0213", "permute", {"x": randn(2, 3, 4, 5)}, lambda x: x.permute(0, 2, 1, 3).contiguous(),
     {"perm": "0,2,1,3"})
case("permute_3102", "permute", {"x": randn(2, 3, 4, 5)}, lambda x: x.permute(3, 1, 0, 2).contiguous(),
     {"perm": "3,1,0,2"})
case("permute_3d", "permute", {"x": randn(3, 4, 5)}, lambda x: x.permute(2, 0, 1).contiguous(),
     {"perm": "2,0,1"})


def heads_split(x, parts, part, H):
    B, N, C = x.shape
    D = C // (parts * H)
    return x.reshape(B, N, parts, H, D).permute(2, 0, 3, 1, 4)[part].contiguous()


case("heads_split_qkv_k", "heads_split", {"x": randn(2, 5, 3 * 2 * 4)},
     lambda x: heads_split(x, 3, 1, 2), {"parts": 3, "part": 1, "H": 2})
case("heads_split_kv_v", "heads_split", {"x": randn(2, 4, 2 * 3 * 2)},
     lambda x: heads_split(x, 2, 1, 3), {"parts": 2, "part": 1, "H": 3})
case("heads_split_q", "heads_split", {"x": randn(1, 6, 3 * 4)},
     lambda x: heads_split(x, 1, 0, 3), {"parts": 1, "part": 0, "H": 3})
case("heads_merge", "heads_merge", {"x": randn(2, 3, 5, 4)},
     lambda x: x.permute(0, 2, 1, 3).reshape(2, 5, 12))
case("slice_tokens", "slice_tokens", {"x": randn(2, 7, 8)}, lambda x: x[:, 1:6].contiguous(),
     {"start": 1, "len": 5})
case("slice_tokens_cls", "slice_tokens", {"x": randn(3, 7, 4)}, lambda x: x[:, 0:1].contiguous(),
     {"start": 0, "len": 1})
case("concat_tokens_cls", "concat_tokens", {"a": randn(1, 1, 8), "b": randn(3, 6, 8)},
     lambda a, b: torch.cat([a.expand(3, -1, -1), b], dim=1))
case("concat_tokens", "concat_tokens", {"a": randn(2, 2, 8), "b": randn(2, 3, 8)},
     lambda a, b: torch.cat([a, b], dim=1))
case("mean_tokens", "mean_tokens", {"x": randn(2, 7, 8)}, lambda x: x.mean(dim=1))

# ---- softmax.c ----
case("softmax", "softmax", {"x": randn(2, 3, 9, std=3.0)}, lambda x: torch.softmax(x, dim=-1))
case("softmax_large", "softmax", {"x": randn(4, 17, std=3.0) + 80.0}, lambda x: torch.softmax(x, dim=-1))

# ---- norm.c ----
case("layernorm", "layernorm", {"x": randn(2, 5, 16, std=2.0) + 0.5, "w": randn(16), "b": randn(16)},
     lambda x, w, b: F.layer_norm(x, (16,), w, b, 1e-6), {"eps": "1e-06"})
case("layernorm_eps5", "layernorm", {"x": randn(7, 12), "w": randn(12), "b": randn(12)},
     lambda x, w, b: F.layer_norm(x, (12,), w, b, 1e-5), {"eps": "1e-05"})


def bn_case(name, training):
    C = 4
    inputs = {"x": randn(3, C, 5, 5, std=1.5) + 0.3, "w": randn(C), "b": randn(C),
              "running_mean": randn(C, std=0.2), "running_var": rand(C, lo=0.5, hi=1.5),
              "num_batches": torch.tensor([3.0])}
    state = {}

    def fn(x, w, b, running_mean, running_var, num_batches):
        rm, rv = running_mean.clone(), running_var.clone()
        y = F.batch_norm(x, rm, rv, w, b, training=training, momentum=0.1, eps=1e-5)
        state["rm"], state["rv"] = rm, rv
        state["nb"] = num_batches + (1.0 if training else 0.0)
        return y

    def extra(out, **kw):
        return {"running_mean.after": state["rm"], "running_var.after": state["rv"],
                "num_batches.after": state["nb"]}

    case(name, "batchnorm2d", inputs, fn, {"eps": "1e-05", "momentum": "0.1", "training": int(training)},
         no_grad=("running_mean", "running_var", "num_batches"), extra=extra)


bn_case("batchnorm2d_train", True)
bn_case("batchnorm2d_eval", False)

# ---- attention.c ----
def l1n(x, eps):
    return F.normalize(x, p=1.0, dim=-2, eps=eps)


x_l1 = randn(2, 3, 7, 5)
case("l1norm_tokens_eps12", "l1norm_tokens", {"x": x_l1}, lambda x: l1n(x, 1e-12), {"eps": "1e-12"})
case("l1norm_tokens_eps6", "l1norm_tokens", {"x": randn(2, 2, 9, 6)}, lambda x: l1n(x, 1e-6),
     {"eps": "1e-06"})
# An all-zero channel takes the eps branch: y = 0, dx = g / eps.
x_zero = randn(1, 2, 6, 4)
x_zero[0, 1, :, 2] = 0.0
case("l1norm_tokens_zero_channel", "l1norm_tokens", {"x": x_zero}, lambda x: l1n(x, 1e-6), {"eps": "1e-06"})
case("l2norm_tokens", "l2norm_tokens", {"x": randn(2, 3, 7, 5)},
     lambda x: F.normalize(x, p=2.0, dim=-2, eps=1e-12), {"eps": "1e-12"})
case("l2norm_tokens_zero_channel", "l2norm_tokens", {"x": x_zero},
     lambda x: F.normalize(x, p=2.0, dim=-2, eps=1e-6), {"eps": "1e-06"})


def sima(q, k, v):
    return (q @ k.transpose(-1, -2)) @ v


for order in ("qk_first", "kv_first", "auto"):
    for (N, D) in ((5, 8), (9, 4)):
        case(f"sima_{order}_N{N}_D{D}", "sima",
             {"q": randn(2, 3, N, D, std=0.5), "k": randn(2, 3, N, D, std=0.5), "v": randn(2, 3, N, D)},
             sima, {"order": order})
for order in ("qk_first", "kv_first"):
    case(f"sima_{order}_cls", "sima",
         {"q": randn(2, 2, 1, 6, std=0.5), "k": randn(2, 2, 7, 6, std=0.5), "v": randn(2, 2, 7, 6)},
         sima, {"order": order})


def msa(scale):
    return lambda q, k, v: torch.softmax(scale * (q @ k.transpose(-1, -2)), dim=-1) @ v


case("msa", "msa", {"q": randn(2, 3, 7, 8), "k": randn(2, 3, 7, 8), "v": randn(2, 3, 7, 8)},
     msa(8 ** -0.5), {"scale": repr(float(torch.tensor(8 ** -0.5, dtype=torch.float32)))})
case("msa_cls", "msa", {"q": randn(2, 2, 1, 4), "k": randn(2, 2, 9, 4), "v": randn(2, 2, 9, 4)},
     msa(0.5), {"scale": "0.5"})
case("msa_N_gt_D", "msa", {"q": randn(1, 2, 12, 4), "k": randn(1, 2, 12, 4), "v": randn(1, 2, 12, 4)},
     msa(0.5), {"scale": "0.5"})


def xca(q, k, v, temperature):
    H = q.shape[1]
    qn = F.normalize(q, dim=-2, eps=1e-12)
    kn = F.normalize(k, dim=-2, eps=1e-12)
    a = (qn.transpose(-1, -2) @ kn) * temperature.reshape(1, H, 1, 1)  # (B, H, D, D)
    p = torch.softmax(a, dim=-1)
    return v @ p.transpose(-1, -2)  # O[n, i] = sum_j P[i, j] V[n, j]


case("xca", "xca", {"q": randn(2, 3, 7, 5), "k": randn(2, 3, 7, 5), "v": randn(2, 3, 7, 5),
                    "temperature": rand(3, lo=0.5, hi=2.0)}, xca)
case("xca_temp_h11", "xca", {"q": randn(1, 2, 4, 6), "k": randn(1, 2, 4, 6), "v": randn(1, 2, 4, 6),
                             "temperature": rand(2, 1, 1, lo=0.5, hi=2.0)}, xca)

# ---- soft.c ----
def gauss(q, l, c):
    d2 = ((q.unsqueeze(-2) - l.unsqueeze(-3)) ** 2).sum(-1)  # (B, H, n, M)
    return torch.exp(-d2 / (2.0 * c))


case("gauss_kernel_k1", "gauss_kernel", {"q": randn(2, 2, 7, 4, std=0.6), "l": randn(2, 2, 3, 4, std=0.6)},
     lambda q, l: gauss(q, l, 1.0), {"c": "1.0"})
case("gauss_kernel_k1_c2", "gauss_kernel", {"q": randn(1, 2, 5, 4), "l": randn(1, 2, 4, 4)},
     lambda q, l: gauss(q, l, 2.0), {"c": "2.0"})
# Symmetric K2 = S(L, L): the same tensor is passed as q and l; its gradient holds both uses.
case("gauss_kernel_k2", "gauss_kernel", {"q": randn(2, 2, 5, 4, std=0.6)},
     lambda q: gauss(q, q, 1.0), {"c": "1.0", "symmetric": 1})


def landmark_kernel(B, H, M, D, spread):
    """A well-conditioned Gaussian kernel matrix (B, H, M, M) of spread-out points."""
    pts = randn(B, H, M, D, std=spread)
    return as_f32(gauss(pts, pts, 1.0))


def eye_like(a):
    M = a.shape[-1]
    return torch.eye(M).expand_as(a)


A_master = landmark_kernel(2, 2, 6, 4, 0.9)
cond = torch.linalg.cond(A_master + 0.01 * eye_like(A_master)).max().item()
assert cond < 50, f"nr_pinv case must be well conditioned (cond {cond})"


def nr_master_f64(a, T):
    """The SOFT master iteration itself, float64, to assert T is enough for this case."""
    p = a + 0.01 * eye_like(a)
    alpha = 0.9 * 2.0 / a.sum(-1).max(-1).values ** 2
    v = alpha[..., None, None] * p
    for _ in range(T):
        v = 2 * v - v @ p @ v
    return v


# Reference: the exact inverse of A + 0.01 I and its autograd gradient; the NR iteration must
# have converged to it, which this script checks before writing the case.
inv_ref = torch.linalg.inv(A_master + 0.01 * eye_like(A_master))
assert (nr_master_f64(A_master, 20) - inv_ref).abs().max() < 1e-10


def residual(p, y):
    """||P Y P - P||_F / ||P||_F, worst matrix, P the matrix iterated with (A + 0.01 I for
    master, A for paper): what sf_nr_last_residual reports, so a converged call logs ~0."""
    r = torch.linalg.norm((p @ y @ p - p).flatten(-2), dim=-1) / torch.linalg.norm(p.flatten(-2), dim=-1)
    return r.max().item()


case("nr_pinv_master", "nr_pinv", {"a": A_master},
     lambda a: torch.linalg.inv(a + 0.01 * eye_like(a)),
     {"iters": 20, "init": "master",
      "residual": repr(residual(A_master + 0.01 * eye_like(A_master), nr_master_f64(A_master, 20)))}, rtol=1e-3, atol=1e-4)


def nr_paper_f64(a, T):
    n1 = a.abs().sum(-2).max(-1).values  # ||A||_1, max column abs sum
    alpha = 2.0 / n1 ** 2
    eye = eye_like(a)
    for _ in range(64):
        bad = torch.linalg.matrix_norm(eye - alpha[..., None, None] * (a @ a), ord=1) > 1
        if not bad.any():
            break
        alpha = torch.where(bad, alpha * 0.5, alpha)
    v = alpha[..., None, None] * a
    for _ in range(T):
        v = 2 * v - v @ a @ v
    return v


# Paper initialisation converges to the plain inverse A^-1 for an invertible, nearly
# diagonal A (well-separated landmarks): the reference is torch's exact inverse.
A_paper = landmark_kernel(1, 2, 5, 4, 1.2)
assert (nr_paper_f64(A_paper, 20) - torch.linalg.inv(A_paper)).abs().max() < 1e-10
case("nr_pinv_paper", "nr_pinv", {"a": A_paper}, lambda a: torch.linalg.inv(a),
     {"iters": 20, "init": "paper",
      "residual": repr(residual(A_paper, nr_paper_f64(A_paper, 20)))}, rtol=1e-3, atol=1e-4)


def symnorm(a):
    u = a.sum(-1) ** -0.5  # d = A 1, without the +0.01 I
    y = torch.linalg.inv(a + 0.01 * eye_like(a))
    return u[..., :, None] * y * u[..., None, :]


A_sym = landmark_kernel(2, 2, 6, 4, 0.9)
assert (nr_master_f64(A_sym, 20) - torch.linalg.inv(A_sym + 0.01 * eye_like(A_sym))).abs().max() < 1e-10
case("soft_symnorm", "soft_symnorm", {"a": A_sym}, symnorm,
     {"iters": 20, "init": "master",
      "residual": repr(residual(A_sym + 0.01 * eye_like(A_sym), nr_master_f64(A_sym, 20)))},
     rtol=1e-3, atol=1e-4)

# ---- conv.c ----
def conv(stride, pad, groups):
    def f(x, w, b=None):
        return F.conv2d(x, w, b, stride=stride, padding=pad, groups=groups)
    return f


case("conv2d_3x3_s2_p1", "conv2d", {"x": randn(2, 3, 9, 7), "w": randn(4, 3, 3, 3, std=0.3), "b": randn(4)},
     conv(2, 1, 1), {"stride": 2, "pad": 1, "groups": 1})
case("conv2d_16x16_s16", "conv2d", {"x": randn(2, 3, 32, 16), "w": randn(2, 3, 16, 16, std=0.05), "b": randn(2)},
     conv(16, 0, 1), {"stride": 16, "pad": 0, "groups": 1}, atol=1e-4)
case("conv2d_depthwise_3x3", "conv2d", {"x": randn(2, 4, 6, 6), "w": randn(4, 1, 3, 3, std=0.3), "b": randn(4)},
     conv(1, 1, 4), {"stride": 1, "pad": 1, "groups": 4})
# SOFT V-conv: one k x k kernel per head over V viewed as (B*D, H, Hs, Ws), groups = H.
case("conv2d_groups_heads_5x5", "conv2d", {"x": randn(3, 2, 7, 7), "w": randn(2, 1, 5, 5, std=0.2)},
     conv(1, 2, 2), {"stride": 1, "pad": 2, "groups": 2})
# SOFT landmarks: r x r, stride r, no padding, no bias.
case("conv2d_rxr_stride_r", "conv2d", {"x": randn(2, 4, 8, 8), "w": randn(4, 4, 4, 4, std=0.15)},
     conv(4, 0, 1), {"stride": 4, "pad": 0, "groups": 1})
case("conv2d_1x1", "conv2d", {"x": randn(2, 4, 5, 5), "w": randn(6, 4, 1, 1, std=0.5), "b": randn(6)},
     conv(1, 0, 1), {"stride": 1, "pad": 0, "groups": 1})
case("avgpool2d_2s2", "avgpool2d", {"x": randn(2, 3, 8, 8)}, lambda x: F.avg_pool2d(x, 2, 2),
     {"k": 2, "stride": 2})
case("avgpool2d_3s2", "avgpool2d", {"x": randn(2, 3, 9, 7)}, lambda x: F.avg_pool2d(x, 3, 2),
     {"k": 3, "stride": 2})

# ---- loss.c ----
LABELS = [1, 0, 6, 3, 6]


def ce_smooth(logits):
    K = logits.shape[1]
    t = F.one_hot(torch.tensor(LABELS), K).double() * 0.9 + 0.1 / K
    return (-(t * F.log_softmax(logits, dim=-1)).sum(-1).mean()).reshape(1)


case("cross_entropy_smooth", "cross_entropy", {"logits": randn(5, 7, std=2.0)}, ce_smooth,
     {"labels": ",".join(map(str, LABELS)), "smoothing": "0.1"})
case("cross_entropy_hard", "cross_entropy", {"logits": randn(5, 7, std=2.0)},
     lambda logits: F.cross_entropy(logits, torch.tensor(LABELS)).reshape(1),
     {"labels": ",".join(map(str, LABELS)), "smoothing": "0.0"})


def soft_targets(B, K, lam):
    """timm Mixup targets with smoothing 0.1 folded in; partner = batch reversed."""
    y = torch.tensor(LABELS[:B])
    off, on = 0.1 / K, 1 - 0.1 + 0.1 / K
    oh = torch.full((B, K), off)
    oh[torch.arange(B), y] = on
    return as_f32(lam * oh + (1 - lam) * oh.flip(0))


case("cross_entropy_soft", "cross_entropy", {"logits": randn(5, 7, std=2.0), "soft_targets": soft_targets(5, 7, 0.37)},
     lambda logits, soft_targets: (-(soft_targets * F.log_softmax(logits, dim=-1)).sum(-1).mean()).reshape(1),
     no_grad=("soft_targets",))

# ---- added last, so the draws of the cases above stay the same ----
# CvT: QuickGELU, and the key/value projection's depthwise 3x3 conv, stride 2, padding 1, no
# bias, on an odd token grid (7x7 -> 4x4).
case("quick_gelu", "quick_gelu", {"x": randn(4, 33, std=3.0)}, lambda x: x * torch.sigmoid(1.702 * x))
case("conv2d_depthwise_3x3_s2_nobias", "conv2d", {"x": randn(2, 5, 7, 7), "w": randn(5, 1, 3, 3, std=0.3)},
     lambda x, w: F.conv2d(x, w, None, 2, 1, 1, 5), {"stride": 2, "pad": 1, "groups": 5})

# SimA's q̂, k̂ straight from the fused qkv: a head split and the l1/l2 token norm in one op.
x_hsn = randn(2, 7, 3 * 2 * 4)
x_hsn[1, :, 1 * 8 + 1 * 4 + 2] = 0.0  # part 1 (k), head 1, channel 2: all zero, the eps branch
case("heads_split_norm_l1_q", "heads_split_norm", {"x": x_hsn},
     lambda x: l1n(heads_split(x, 3, 0, 2), 1e-12), {"parts": 3, "part": 0, "H": 2, "p": 1, "eps": "1e-12"})
case("heads_split_norm_l1_k_zero_channel", "heads_split_norm", {"x": x_hsn},
     lambda x: l1n(heads_split(x, 3, 1, 2), 1e-6), {"parts": 3, "part": 1, "H": 2, "p": 1, "eps": "1e-06"})
case("heads_split_norm_l2_k", "heads_split_norm", {"x": randn(2, 5, 3 * 3 * 2)},
     lambda x: F.normalize(heads_split(x, 3, 1, 3), p=2.0, dim=-2, eps=1e-12),
     {"parts": 3, "part": 1, "H": 3, "p": 2, "eps": "1e-12"})
case("heads_split_norm_l1_one_part", "heads_split_norm", {"x": randn(1, 6, 2 * 4)},
     lambda x: l1n(heads_split(x, 1, 0, 2), 1e-12), {"parts": 1, "part": 0, "H": 2, "p": 1, "eps": "1e-12"})

# The residual connection x + DropPath(y) as one op: eval mode (drop path the identity), and
# training with p = 0 (the masks are sfvit's own RNG; gradient checks cover them).
case("residual_eval", "residual", {"x": randn(3, 4, 5), "y": randn(3, 4, 5)}, lambda x, y: x + y,
     {"p": "0.2", "training": 0})
case("residual_p0_training", "residual", {"x": randn(2, 3, 6), "y": randn(2, 3, 6)}, lambda x, y: x + y,
     {"p": "0", "training": 1})


def main():
    os.makedirs(OUT_DIR, exist_ok=True)
    names = set()
    total = 0
    for c in CASES:
        assert c[0] not in names, c[0]
        names.add(c[0])
        total += run_case(*c)
    # Remove files of cases that no longer exist so the directory matches this script.
    for f in sorted(os.listdir(OUT_DIR)):
        if f.endswith(".safetensors") and f[:-len(".safetensors")] not in names:
            os.remove(os.path.join(OUT_DIR, f))
    print(f"{len(CASES)} cases, {total} bytes in {OUT_DIR}")


if __name__ == "__main__":
    main()
