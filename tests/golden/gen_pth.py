#!/usr/bin/python3
"""gen_pth.py — real torch.save files for tests/test_pth.c, tests/test_pth_golden.sh and the
fuzz seed corpus (tests/fuzz/corpus/pth/).

Model checkpoints: the PyTorch reference models of models.py are built, given the weights of
a golden case (tests/golden/models/<case>/weights.safetensors, so the expected logits and
gradients of that case apply unchanged), and saved with torch.save in the layouts people
have:
  vit_mixed_msa_sima.deit_train.pth      DeiT main.py training checkpoint: {"model", "optimizer",
                                         "lr_scheduler", "epoch", "args" (argparse.Namespace),
                                         "scaler"}
  vit_sima_l1_avgpool_gray.legacy.pth    a plain state_dict, float64, legacy (pre-1.6) format
  xcit_xca_nolpi_p16.timm.pth            timm's XCiT names: pos_embed.token_projection,
                                         cls_attn_blocks.{j}.attn.{q,k,v}
  xcit_sima_l2_nolpi.official_ddp.pth    official XCiT/SimA names saved from a DistributedDataParallel
                                         model ("module." prefix), under "model" next to "model_ema"
  soft.official.pth                      official SOFT names, {"model": state_dict, "epoch"}
  cvt_msa.official.pth                   official CvT names as the released CvT-13/21 files hold them:
                                         a plain float32 state_dict, BatchNorm num_batches_tracked
                                         included
  xcit_xca_lpi.no_counters.pth, soft.no_counters.pth   plain state_dicts without BatchNorm's
                                         num_batches_tracked entries
Reader fixtures (expected values in views.safetensors, written with the same numbers):
  views.pth       transposed, offset, strided and storage-sharing tensors, a Parameter, every dtype
  views.legacy.pth  the same in the legacy format
  torchscript.pt, complex.pth, bigendian.pth   files that must be refused by name

Deterministic except for torchscript.pt and the legacy files (their storage keys are the
objects' memory addresses, as torch.save writes them): those change on every run while
holding the same values.
Usage: /usr/bin/python3 tests/golden/gen_pth.py   (Debian python3-torch; writes tests/golden/pth/
and tests/fuzz/corpus/pth/).
"""
import argparse
import collections
import json
import os
import shutil
import struct
import sys
import zipfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import models  # noqa: E402  (the reference models and their golden cases)

OUT = os.path.join(HERE, "pth")
CORPUS = os.path.join(HERE, "..", "fuzz", "corpus", "pth")


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        a, b = e["data_offsets"]
        dt = {"F32": torch.float32, "I64": torch.int64}[e["dtype"]]
        out[name] = torch.frombuffer(bytearray(data[a:b]), dtype=dt).reshape(e["shape"]).clone()
    return out


def golden_model(case):
    """The reference model of a golden case with its committed weights (float64 inside)."""
    c = next(c for c in models.CASES if c["name"] == case)
    m = c["build"]()
    w = read_safetensors(os.path.join(HERE, "models", case, "weights.safetensors"))
    m.load_state_dict({k: v.to(torch.float64) if v.is_floating_point() else v for k, v in w.items()})
    return m


def f32_state_dict(m):
    """model.state_dict() (an OrderedDict with _metadata) with float32 values."""
    sd = m.state_dict()
    for k in sd:
        if sd[k].is_floating_point():
            sd[k] = sd[k].float()
    return sd


def timm_xcit(sd):
    """timm's XCiT names: pos_embeder. -> pos_embed., class-attention qkv split into q, k, v."""
    out = collections.OrderedDict()
    for k, v in sd.items():
        if k.startswith("pos_embeder."):
            out["pos_embed." + k[len("pos_embeder."):]] = v
        elif k.startswith("cls_attn_blocks.") and ".attn.qkv." in k:
            for j, part in enumerate(v.reshape(3, -1, *v.shape[1:]).unbind(0)):
                out[k.replace(".attn.qkv.", ".attn." + "qkv"[j] + ".")] = part.clone()
        else:
            out[k] = v
    return out


def save(obj, name, legacy=False):
    path = os.path.join(OUT, name)
    torch.save(obj, path, _use_new_zipfile_serialization=not legacy)
    return os.path.getsize(path)


def model_files():
    sizes = {}
    # DeiT training checkpoint (deit main.py saves exactly these keys).
    m = golden_model("vit_mixed_msa_sima")
    sd = f32_state_dict(m)
    opt = torch.optim.AdamW([p for p in m.parameters()][:2], lr=1e-3)
    for p in opt.param_groups[0]["params"]:
        opt.state[p] = {"step": torch.tensor(5.0), "exp_avg": torch.zeros_like(p).float(),
                        "exp_avg_sq": torch.ones_like(p).float()}
    ckpt = {"model": sd, "optimizer": opt.state_dict(),
            "lr_scheduler": {"base_lrs": [1e-3], "last_epoch": 7},
            "epoch": 7, "scaler": {"scale": 65536.0, "growth_factor": 2.0},
            "args": argparse.Namespace(model="deit_small_patch16_224", lr=5e-4, smoothing=0.1, drop_path=0.1)}
    sizes["vit_mixed_msa_sima.deit_train.pth"] = save(ckpt, "vit_mixed_msa_sima.deit_train.pth")
    # A plain float64 state_dict in the legacy format.
    m = golden_model("vit_sima_l1_avgpool_gray")
    sizes["vit_sima_l1_avgpool_gray.legacy.pth"] = save(m.state_dict(), "vit_sima_l1_avgpool_gray.legacy.pth",
                                                        legacy=True)
    # timm XCiT names.
    m = golden_model("xcit_xca_nolpi_p16")
    sizes["xcit_xca_nolpi_p16.timm.pth"] = save(timm_xcit(f32_state_dict(m)), "xcit_xca_nolpi_p16.timm.pth")
    # Official SimA-XCiT names from a DDP-wrapped model, next to a (truncated) EMA copy, so
    # picking the wrong one fails the load.
    m = golden_model("xcit_sima_l2_nolpi")
    sd = collections.OrderedDict(("module." + k, v) for k, v in f32_state_dict(m).items())
    ema = collections.OrderedDict((k, torch.zeros_like(v)) for k, v in list(sd.items())[:3])
    sizes["xcit_sima_l2_nolpi.official_ddp.pth"] = save({"model": sd, "model_ema": ema, "epoch": 3},
                                                        "xcit_sima_l2_nolpi.official_ddp.pth")
    # Official SOFT.
    m = golden_model("soft")
    sizes["soft.official.pth"] = save({"model": f32_state_dict(m), "epoch": 299}, "soft.official.pth")
    sizes.update(no_counter_files())
    sizes.update(cvt_files())
    return sizes


def cvt_files():
    m = golden_model("cvt_msa")
    return {"cvt_msa.official.pth": save(f32_state_dict(m), "cvt_msa.official.pth")}


def no_counter_files():
    """State dicts without BatchNorm's num_batches_tracked, as some converters write them."""
    sizes = {}
    for case in ["xcit_xca_lpi", "soft"]:
        sd = collections.OrderedDict((k, v) for k, v in f32_state_dict(golden_model(case)).items()
                                     if not k.endswith(".num_batches_tracked"))
        sizes[case + ".no_counters.pth"] = save(sd, case + ".no_counters.pth")
    return sizes


def views():
    """Tensors whose storage layout is not the plain one, and every dtype torch.save writes."""
    g = torch.Generator().manual_seed(7)
    base = torch.randn(6, 5, generator=g)
    big = torch.arange(40, dtype=torch.float32)
    t = collections.OrderedDict()
    t["transposed"] = base.t()                         # strides (1, 5)
    t["offset"] = big[7:19].view(3, 4)                 # storage offset 7
    t["strided"] = big[1::3]                           # stride 3
    t["shared_a"] = big[:10]                           # shares big's storage with the two above
    t["column"] = base[:, 2]                           # offset 2, stride 5
    t["scalar"] = torch.tensor(2.5)                    # 0-dim
    t["empty"] = torch.zeros(0, 3)
    t["param"] = torch.nn.Parameter(torch.linspace(-1, 1, 4))
    t["f64"] = torch.randn(2, 3, generator=g, dtype=torch.float64)
    t["f16"] = torch.randn(3, generator=g).half()
    t["bf16"] = torch.randn(3, generator=g).bfloat16()
    t["i64"] = torch.tensor([-3, 0, 1 << 40])
    t["i32"] = torch.tensor([-7, 9], dtype=torch.int32)
    t["i16"] = torch.tensor([-2, 300], dtype=torch.int16)
    t["i8"] = torch.tensor([-128, 127], dtype=torch.int8)
    t["u8"] = torch.tensor([0, 255], dtype=torch.uint8)
    t["bool"] = torch.tensor([True, False, True])
    nested = {"weights": t, "meta": {"lr": 0.1, "name": "views", "steps": [1, 2, 3], "none": None},
              "big": 1 << 70, "tuple": (1.5, "x"), "args": argparse.Namespace(a=1)}
    save(nested, "views.pth")
    save(nested, "views.legacy.pth", legacy=True)
    expected = collections.OrderedDict()
    for k, v in t.items():
        v = v.detach().contiguous()
        expected["weights." + k] = v
    dts = {torch.float32: "F32", torch.float64: "F64", torch.float16: "F16", torch.bfloat16: "BF16",
           torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
           torch.bool: "BOOL"}
    header, blobs, off = {}, [], 0
    for k, v in expected.items():
        raw = v.view(torch.uint8).numpy().tobytes() if v.dtype == torch.bfloat16 else v.numpy().tobytes()
        header[k] = {"dtype": dts[v.dtype], "shape": list(v.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(os.path.join(OUT, "views.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def tiny_seeds():
    """Small fuzz seeds in both XCiT layouts: timm's q/k/v + pos_embed (zip), DDP-prefixed (legacy)."""
    g = torch.Generator().manual_seed(3)
    qkv = torch.randn(6, 2, generator=g, dtype=torch.float32)
    sd = collections.OrderedDict()
    for j, p in enumerate("qkv"):
        sd[f"cls_attn_blocks.0.attn.{p}.weight"] = qkv[2 * j:2 * j + 2].clone()
        sd[f"cls_attn_blocks.0.attn.{p}.bias"] = torch.zeros(2)
    sd["pos_embed.token_projection.weight"] = torch.ones(2, 1)
    sd["bn.num_batches_tracked"] = torch.tensor(3)
    torch.save(sd, os.path.join(CORPUS, "timm_xcit_tiny.pth"))
    ddp = collections.OrderedDict(("module.cls_attn_blocks.0.attn.qkv.weight", qkv) for _ in range(1))
    ddp["module.pos_embeder.token_projection.weight"] = torch.ones(2, 1)
    torch.save({"model": ddp, "epoch": 1}, os.path.join(CORPUS, "ddp_tiny.legacy.pth"),
               _use_new_zipfile_serialization=False)


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    sizes = model_files()
    views()
    os.makedirs(CORPUS, exist_ok=True)
    for name in ["views.pth", "views.legacy.pth", "vit_mixed_msa_sima.deit_train.pth"]:
        shutil.copy(os.path.join(OUT, name), os.path.join(CORPUS, name))
    tiny_seeds()
    # Files that must be refused by name: a TorchScript archive, a complex tensor.
    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 3)), os.path.join(OUT, "torchscript.pt"))
    torch.save({"z": torch.zeros(2, dtype=torch.complex64)}, os.path.join(OUT, "complex.pth"))
    # views.pth as PyTorch >= 2.1 would write it on a big-endian machine (a byteorder entry).
    with zipfile.ZipFile(os.path.join(OUT, "views.pth")) as zi, \
            zipfile.ZipFile(os.path.join(OUT, "bigendian.pth"), "w", compression=zipfile.ZIP_STORED) as zo:
        for info in zi.infolist():
            zo.writestr(info, zi.read(info))
        zo.writestr(zipfile.ZipInfo("views/byteorder", date_time=(1980, 1, 1, 0, 0, 0)), b"big")
    for k, v in sizes.items():
        print(f"{k:40s} {v / 1024:7.1f} KiB")
    total = sum(os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT))
    print(f"total {total / 1024:.1f} KiB in {OUT}")


if __name__ == "__main__":
    main()
