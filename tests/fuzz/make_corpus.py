#!/usr/bin/python3
"""Regenerates the seed corpora in tests/fuzz/corpus/ (small, valid inputs of every kind the
targets parse). Run from anywhere with the Python that has Pillow and numpy:
    /usr/bin/python3 tests/fuzz/make_corpus.py
The committed files are its output; re-running it rewrites them."""
import gzip, io, json, os, shutil, struct, zlib
import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
C = os.path.join(HERE, "corpus")
rng = np.random.default_rng(0)

def put(target, name, data):
    with open(os.path.join(C, target, name), "wb") as f:
        f.write(data)

# ---- config: the real configs, plus an override line and lists ----
for n in sorted(os.listdir(os.path.join(ROOT, "train", "configs"))):
    if n.endswith(".yaml"):
        shutil.copy(os.path.join(ROOT, "train", "configs", n), os.path.join(C, "config", n))
put("config", "override.yaml", b"#= optim.lr=1e-3\nbase: fmnist_tiny.yaml\ntrain:\n  batch_size: 64\n")
put("config", "lists.yaml", b"model:\n  img_size: 32\n  num_classes: 10\naug:\n  mean: [0.5, 0.5, 0.5]\n"
    b"  std: 0.25, 0.25, 0.25\n  randaugment: rand-m9-mstd0.5-inc1\noptim.lr: 5e-4\n")
put("config", "empty.yaml", b"")

# ---- images: PNG in every colour type and depth the loader meets, and JPEGs ----
def png(im, **kw):
    b = io.BytesIO(); im.save(b, "PNG", **kw); return b.getvalue()
def jpg(im, **kw):
    b = io.BytesIO(); im.save(b, "JPEG", **kw); return b.getvalue()
rgb = Image.fromarray(rng.integers(0, 256, (7, 9, 3), dtype=np.uint8), "RGB")
gray = rgb.convert("L")
put("image", "gray8.png", png(gray))
put("image", "rgb8.png", png(rgb))
put("image", "rgba8.png", png(rgb.convert("RGBA")))
put("image", "gray_alpha.png", png(gray.convert("LA")))
put("image", "palette.png", png(rgb.convert("P")))
put("image", "palette_trns.png", png(rgb.convert("P"), transparency=3))
put("image", "gray1.png", png(gray.convert("1")))
put("image", "gray16.png", png(Image.fromarray((rng.integers(0, 65536, (5, 6))).astype(np.uint16))))
put("image", "rgb.jpg", jpg(rgb, quality=90))
put("image", "gray.jpg", jpg(gray, quality=90))
put("image", "progressive.jpg", jpg(rgb.resize((17, 13)), quality=75, progressive=True))
put("image", "subsampled.jpg", jpg(rgb.resize((16, 16)), quality=50, subsampling=2))
put("image", "cmyk.jpg", jpg(rgb.convert("CMYK"), quality=90))
# 16-bit RGB and an Adam7-interlaced PNG written by hand (Pillow writes neither).
def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
def raw_png(w, h, depth, ctype, rows, interlace=0):
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, interlace))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
w, h = 4, 3
rows16 = b"".join(b"\x00" + rng.integers(0, 256, w * 6, dtype=np.uint8).tobytes() for _ in range(h))
put("image", "rgb16.png", raw_png(w, h, 16, 2, rows16))
# Adam7 for a 3x3 gray image: passes 1 (1 px), 4 (1 px), 5 (2 px... ) — simplest: every pass row
# filter 0; pass sizes for 3x3: p1 1x1, p2 none, p3 none? (x starts 4), p4 1x1 (x=2,y=0),
# p5 2x1 (y=2), p6 1x2 (x=1,y=0,2), p7 3x1 (y=1).
passes = [(1, 1), (1, 1), (2, 1), (1, 2), (3, 1)]
ilace = b"".join((b"\x00" + bytes(rng.integers(0, 256, pw, dtype=np.uint8))) * ph for pw, ph in passes)
put("image", "interlaced.png", raw_png(3, 3, 8, 0, ilace, interlace=1))

# ---- safetensors: checkpoint-shaped files and every dtype ----
def st(tensors, meta=None, crc=True):
    hdr, blobs, pos = {}, [], 0
    crcs = {}
    for name, dt, shape, raw in tensors:
        hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [pos, pos + len(raw)]}
        pos += len(raw); blobs.append(raw); crcs[name] = "%08x" % (zlib.crc32(raw) & 0xffffffff)
    m = dict(meta or {})
    if crc: m["crc32"] = json.dumps(crcs, separators=(",", ":"))
    if m: hdr["__metadata__"] = m
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * ((-len(h)) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)
f32 = lambda *s: rng.standard_normal(s).astype("<f4").tobytes()
ck = [("w", "F32", [2, 3], f32(2, 3)), ("b", "F32", [3], f32(3)), ("head.weight", "F32", [2, 3], f32(2, 3)),
      ("bn.num_batches_tracked", "I64", [], struct.pack("<q", 7))]
opt = [(p + n, "F32", s, f32(*s)) for n, _, s, _ in ck[:3] for p in ("optim.exp_avg.", "optim.exp_avg_sq.")]
meta = {"format": "sfvit-1", "epoch": "1", "step_in_epoch": "0", "global_step": "16", "best_top1": "41.5",
        "rng_drop": "0" * 64, "config": "model:\n  img_size: 28\n"}
put("safetensors", "checkpoint.safetensors", st(ck + opt, meta))
put("safetensors", "weights_only.safetensors", st(ck, {"format": "sfvit-1"}))
put("safetensors", "no_crc.safetensors", st(ck, None, crc=False))
put("safetensors", "dtypes.safetensors", st([
    ("f64", "F64", [2], np.array([1.5, -2], "<f8").tobytes()), ("f16", "F16", [3], np.array([1, -0.5, 65504], "<f2").tobytes()),
    ("bf16", "BF16", [2], b"\x80\x3f\x00\xc0"), ("i32", "I32", [2], np.array([3, -4], "<i4").tobytes()),
    ("i16", "I16", [1], b"\x05\x00"), ("i8", "I8", [2], b"\xff\x01"), ("u8", "U8", [2, 1], b"\x07\x08"),
    ("bool", "BOOL", [1], b"\x01"), ("empty", "F32", [0, 4], b""), ("scalar", "F32", [], f32(1))]))
put("safetensors", "empty.safetensors", st([], None, crc=False))

# ---- idx: flags, labels length, labels file, images file (see fuzz_idx.c) ----
FM = "/usr/share/datasets/fashion-mnist"
with gzip.open(os.path.join(FM, "t10k-images-idx3-ubyte.gz")) as f: imgs = f.read(16 + 4 * 784)[16:]
with gzip.open(os.path.join(FM, "t10k-labels-idx1-ubyte.gz")) as f: labs = f.read(8 + 4)[8:]
def idx_in(flags, lab, img): return bytes([flags]) + struct.pack("<H", len(lab)) + lab + img
lab_file = struct.pack(">II", 0x801, 4) + labs
img_file = struct.pack(">IIII", 0x803, 4, 28, 28) + imgs
put("idx", "fmnist4_gz_names", idx_in(1, gzip.compress(lab_file, 9), gzip.compress(img_file, 9)))
put("idx", "fmnist4_plain", idx_in(0, lab_file, img_file))
small = struct.pack(">IIII", 0x803, 3, 2, 2) + bytes(range(12))
put("idx", "tiny_plain", idx_in(0, struct.pack(">II", 0x801, 3) + b"\x00\x01\x02", small))
