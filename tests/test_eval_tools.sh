#!/usr/bin/env bash
# The evaluation tools of a reproduction study, on real Fashion-MNIST IDX files and tiny trained
# models: `data import-idx --range` (counts, names from the whole file, a train/val cut that
# covers the file without overlap), `eval --save-preds/--json` (rows against the printed
# numbers, labels against folders, the order shared by two models), eval overrides
# (model.nr_iters changes a SOFT model's outputs, model.img_size for SOFT and ViT), and
# `viz --score` (foreground fractions of synthetic images known exactly, AUC and Spearman
# recomputed from the per-image rows, bounds, skip counts; a CvT, whose keys lie on a coarser
# grid than its queries). Bad options name the option.
# Usage: test_eval_tools.sh SFVIT_BINARY SOURCE_ROOT
set -uo pipefail
SFVIT=$(realpath "$1")
ROOT=$(realpath "$2")
W=$(mktemp -d /tmp/sfvit-evaltools-XXXXXX)
[ -n "${SFVIT_KEEP_TEST_DIR:-}" ] || trap 'rm -rf "$W"' EXIT; echo "work dir: $W"
cd "$W"
source "$ROOT/tests/lib.sh"
PY=/usr/bin/python3
FM=/usr/share/datasets/fashion-mnist
NAMES=$ROOT/configs/fmnist_classes.txt
export SFVIT_THREADS=1
if [ ! -f $FM/train-images-idx3-ubyte.gz ]; then
  echo "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)"; echo "0 passed, 1 failed"; exit 1
fi

# ---- import-idx --range ----
# A 3000-record cut of the training file, split 0:2500 / 2500: (the held-out recipe in small)
idx_head $FM/train-images-idx3-ubyte.gz img3k.gz 3000 784 '\x03'
idx_head $FM/train-labels-idx1-ubyte.gz lab3k.gz 3000 1 '\x01'
check "import-idx --range 0:2500" "$SFVIT" data import-idx img3k.gz lab3k.gz cut/train --classes "$NAMES" --range 0:2500
check "import-idx --range 2500:" "$SFVIT" data import-idx img3k.gz lab3k.gz cut/val --classes "$NAMES" --range 2500:
check "train has 2500 images" test "$(find cut/train -name '*.png' | wc -l)" -eq 2500
check "val has 500 images" test "$(find cut/val -name '*.png' | wc -l)" -eq 500
check "both splits have the 10 class folders" test "$(ls cut/train | tr '\n' ' ')" = "$(ls cut/val | tr '\n' ' ')"
check "train and val share no file name" test -z "$(comm -12 <(find cut/train -name '*.png' -printf '%f\n' | sort) \
  <(find cut/val -name '*.png' -printf '%f\n' | sort))"
check "train + val names are exactly 0000..2999" test "$(find cut -name '*.png' -printf '%f\n' | sort | md5sum)" = \
  "$(seq -f '%04g.png' 0 2999 | sort | md5sum)"
# the whole 60,000-record file: the last 10 and first 10 records, named by their index in it
check "import-idx --range 59990: of the whole file" "$SFVIT" data import-idx $FM/train-images-idx3-ubyte.gz \
  $FM/train-labels-idx1-ubyte.gz whole/tail --classes "$NAMES" --range 59990:
check "import-idx --range 0:10 of the whole file" "$SFVIT" data import-idx $FM/train-images-idx3-ubyte.gz \
  $FM/train-labels-idx1-ubyte.gz whole/head --classes "$NAMES" --range 0:10
check "tail: 59990..59999, 5-digit names" test "$(find whole/tail -name '*.png' -printf '%f\n' | sort | tr '\n' ' ')" = \
  "$(seq -f '%05g.png' 59990 59999 | tr '\n' ' ')"
check "head: 00000..00009" test "$(find whole/head -name '*.png' -printf '%f\n' | sort | tr '\n' ' ')" = \
  "$(seq -f '%05g.png' 0 9 | tr '\n' ' ')"
# every file sits in the folder of its record's label, and its pixels are that record's
check "files hold their records' labels and pixels" $PY - $FM whole <<'PY'
import gzip, os, sys, zlib
fm, root = sys.argv[1], sys.argv[2]
labels = gzip.open(fm + "/train-labels-idx1-ubyte.gz").read()[8:]
images = gzip.open(fm + "/train-images-idx3-ubyte.gz").read()[16:]
def png_gray(path):  # 8-bit gray, filter bytes per row
    data, pos, idat = open(path, "rb").read(), 8, b""
    while pos < len(data):
        n = int.from_bytes(data[pos:pos + 4], "big"); kind = data[pos + 4:pos + 8]
        if kind == b"IHDR": w, h = int.from_bytes(data[pos + 8:pos + 12], "big"), int.from_bytes(data[pos + 12:pos + 16], "big")
        if kind == b"IDAT": idat += data[pos + 8:pos + 8 + n]
        pos += 12 + n
    raw, out, prev = zlib.decompress(idat), bytearray(), bytearray(w)
    for y in range(h):
        f, row = raw[y * (w + 1)], bytearray(raw[y * (w + 1) + 1:(y + 1) * (w + 1)])
        for x in range(w):
            a = row[x - 1] if x else 0; b = prev[x]; c = prev[x - 1] if x else 0
            p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            pred = [0, a, b, (a + b) // 2, a if pa <= pb and pa <= pc else (b if pb <= pc else c)][f]
            row[x] = (row[x] + pred) & 255
        out += row; prev = row
    return bytes(out)
classes = sorted(os.listdir(root + "/tail"))
n = 0
for split in ("tail", "head"):
    for k, c in enumerate(classes):
        for f in os.listdir(f"{root}/{split}/{c}"):
            i = int(f[:-4]); n += 1
            assert labels[i] == k, (split, f, labels[i], k)
            assert png_gray(f"{root}/{split}/{c}/{f}") == images[i * 784:(i + 1) * 784], f
assert n == 20, n
PY
out=$("$SFVIT" data import-idx img3k.gz lab3k.gz bad1 --range 2500:3001 2>&1); rc=$?
check "a range past the end is rejected" test $rc -eq 1
check "... naming --range and the record count" grep -q -- "--range 2500:3001 is outside the 3000 records" <<< "$out"
check "... and leaves no folder" test ! -e bad1 -a ! -e bad1.partial
for r in 5:3 5:5 abc :10 -1:4 1:2:3 3:x; do
  out=$("$SFVIT" data import-idx img3k.gz lab3k.gz bad2 --range "$r" 2>&1); rc=$?
  check "--range '$r' rejected with status 2, naming --range" test $rc -eq 2 -a -n "$(grep -- "--range '$r'" <<< "$out")"
done
out=$("$SFVIT" data check cut --range 0:5 2>&1); rc=$?
check "--range outside import-idx rejected, named" test $rc -eq 2 -a -n "$(grep -- '--range is an option of import-idx' <<< "$out")"

# ---- tiny models: a SOFT (64x64, width 32) and a SimA ViT (28x28, 4x4 tokens) ----
fmnist_subset "$SFVIT" "$ROOT" 512 200
COMMON=(data.root=fm train.out=runs train.threads=1 data.workers=1 train.batch_size=32)
"$SFVIT" train "$ROOT/configs/fmnist_soft.yaml" "${COMMON[@]}" train.name=soft train.epochs=1 \
  'model.embed_dims=[32,32,32,32]' 'model.num_heads=[2,2,2,2]' > soft.log 2>&1
check "tiny SOFT trains" grep -q "final val top-1" soft.log
"$SFVIT" train "$ROOT/configs/fmnist_tiny.yaml" "${COMMON[@]}" train.name=vit train.epochs=2 > vit.log 2>&1
check "tiny SimA ViT trains" grep -q "final val top-1" vit.log
SOFT=runs/soft/best.safetensors
VIT=runs/vit/best.safetensors

# ---- eval --save-preds / --json ----
out=$("$SFVIT" eval $SOFT --data fm --save-preds soft.csv --json soft.json 2>&1); rc=$?
echo "$out" | tail -3
check "eval --save-preds --json exits 0" test $rc -eq 0
line=$(grep -E ' images  loss ' <<< "$out")
check "preds and printed numbers agree; labels match folders; rows in dataset order" $PY - soft.csv soft.json fm/val "$line" $SOFT <<'PY'
import csv, json, os, re, sys
preds, summary, split, line, ckpt = sys.argv[1:]
rows = list(csv.DictReader(open(preds)))
m = re.search(r": (\d+) images  loss ([0-9.]+)  top-1 ([0-9.]+)%  top-5 ([0-9.]+)%", line)
images, loss, top1, top5 = int(m[1]), float(m[2]), float(m[3]), float(m[4])
assert list(rows[0].keys()) == ["index", "path", "label", "pred", "prob", "correct", "top5"], rows[0].keys()
assert len(rows) == images == 200, (len(rows), images)
classes = sorted(os.listdir(split))
order = [f"{c}/{f}" for c in classes for f in sorted(os.listdir(f"{split}/{c}"))]
assert [r["path"] for r in rows] == order, "rows are not in the dataset's order"
assert [int(r["index"]) for r in rows] == list(range(images))
for r in rows:
    assert int(r["label"]) == classes.index(r["path"].split("/")[0]), r
    top = [int(t) for t in r["top5"].split()]
    assert len(top) == 5 and len(set(top)) == 5 and top[0] == int(r["pred"]), r
    assert int(r["correct"]) == (int(r["pred"]) == int(r["label"])), r
    assert 0.1 - 1e-6 <= float(r["prob"]) <= 1, r   # the best of 10 classes has at least 1/10
f1 = 100.0 * sum(int(r["correct"]) for r in rows) / len(rows)
f5 = 100.0 * sum(int(r["label"]) in map(int, r["top5"].split()) for r in rows) / len(rows)
assert "%.2f" % f1 == "%.2f" % top1, (f1, top1)
assert "%.2f" % f5 == "%.2f" % top5, (f5, top5)
j = json.load(open(summary))
assert set(j) == {"top1", "top5", "images", "loss", "checkpoint", "split"}, j.keys()
assert "%.2f" % j["top1"] == "%.2f" % top1 and "%.2f" % j["top5"] == "%.2f" % top5, j
assert j["images"] == images and "%.4f" % j["loss"] == "%.4f" % loss and j["split"] == "val" and j["checkpoint"] == ckpt, j
print(f"rows {len(rows)}, top-1 {f1:.2f} = printed {top1:.2f}, top-5 {f5:.2f}, loss {loss}")
PY
check "no temporary file left next to the outputs" test -z "$(ls | grep '\.tmp\.')"
"$SFVIT" eval $VIT --data fm --save-preds vit.csv > /dev/null 2>&1
check "two models' rows line up (index and path)" test "$(cut -d, -f1-3 soft.csv | md5sum)" = "$(cut -d, -f1-3 vit.csv | md5sum)"
"$SFVIT" eval $SOFT --data fm --split train --save-preds train.csv > train_eval.log 2>&1
check "--split train: one row per training image" test "$(($(wc -l < train.csv) - 1))" -eq 512

# ---- overrides: SOFT's Newton-Raphson iterations and the test resolution ----
"$SFVIT" eval $SOFT --data fm --save-preds nr20.csv model.nr_iters=20 > nr20.log 2>&1
"$SFVIT" eval $SOFT --data fm --save-preds nr1.csv model.nr_iters=1 > nr1.log 2>&1
check "model.nr_iters=20 (the trained value) = no override" cmp -s soft.csv nr20.csv
check "model.nr_iters=1 changes the outputs (probabilities)" $PY - nr20.csv nr1.csv <<'PY'
import csv, sys
a, b = (list(csv.DictReader(open(p))) for p in sys.argv[1:])
diff = max(abs(float(x["prob"]) - float(y["prob"])) for x, y in zip(a, b))
print("largest probability change", diff)
assert diff > 1e-4, diff
PY
grep -h "top-1" nr20.log nr1.log
out=$("$SFVIT" eval $SOFT --data fm model.img_size=96 2>&1); rc=$?
check "SOFT at model.img_size=96 evaluates" test $rc -eq 0 -a -n "$(grep 'evaluated at 96x96' <<< "$out")"
out=$("$SFVIT" eval $SOFT --data fm model.img_size=48 2>&1); rc=$?
check "SOFT at 48 rejected naming model.img_size" test $rc -eq 1 -a -n "$(grep 'model.img_size 48' <<< "$out")"
out=$("$SFVIT" eval $VIT --data fm model.img_size=56 2>&1); rc=$?
check "ViT at model.img_size=56: pos_embed resized" test $rc -eq 0 -a -n "$(grep 'pos_embed resized from a 4x4 to a 8x8' <<< "$out")"
out=$("$SFVIT" eval $VIT --data fm model.img_size=30 2>&1); rc=$?
check "ViT at 30 rejected naming model.img_size" test $rc -eq 1 -a -n "$(grep 'model.img_size 30 must be a multiple' <<< "$out")"

# ---- eval: bad options ----
out=$("$SFVIT" eval $SOFT --data fm --save-preds 2>&1); rc=$?
check "--save-preds without a file: status 2, named" test $rc -eq 2 -a -n "$(grep -- "'--save-preds'" <<< "$out")"
out=$("$SFVIT" eval $SOFT --data fm --json /nonexistent/dir/r.json 2>&1); rc=$?
check "--json into a missing folder fails naming the file" test $rc -eq 1 -a -n "$(grep '/nonexistent/dir/r.json' <<< "$out")"
out=$("$SFVIT" eval $SOFT --data fm --split nosuch 2>&1); rc=$?
check "--split of a missing folder fails naming it" test $rc -eq 1 -a -n "$(grep 'nosuch' <<< "$out")"

# ---- viz --score: synthetic images whose foreground is known ----
# 28x28 gray: the top 14 rows white (tokens of rows 0-1 all foreground, rows 2-3 none on the
# ViT's 4x4 grid of 7x7 patches), all black (skipped: all background), all white (skipped:
# all foreground), a 1-pixel dot (skipped: no token reaches half foreground).
mkdir -p synth/val/0_a synth/val/1_b
$PY - synth/val <<'PY'
import struct, sys, zlib
def png(path, rows):
    raw = b"".join(b"\x00" + bytes(r) for r in rows)
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    open(path, "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 28, 28, 8, 0, 0, 0, 0))
                           + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
d = sys.argv[1]
png(d + "/0_a/half.png", [[255] * 28 if y < 14 else [0] * 28 for y in range(28)])
png(d + "/0_a/black.png", [[0] * 28 for y in range(28)])
png(d + "/1_b/white.png", [[200] * 28 for y in range(28)])
png(d + "/1_b/dot.png", [[255 if (x, y) == (3, 3) else 0 for x in range(28)] for y in range(28)])
PY
out=$("$SFVIT" viz $VIT --score synth --json synth.json --per-image synth.csv 2>&1); rc=$?
echo "$out"
check "viz --score on the synthetic split exits 0" test $rc -eq 0
check "summary line with AUC and Spearman" grep -qE "1 images scored, 3 skipped \(1 all foreground, 2 all background, 0 unreadable\)  AUC q-hat [0-9.]+ k-hat [0-9.]+  Spearman" <<< "$out"
check "synthetic fractions, skips and scores" $PY - synth.csv synth.json <<'PY'
import csv, json, math, sys
rows = {r["path"]: r for r in csv.DictReader(open(sys.argv[1]))}
j = json.load(open(sys.argv[2]))
half = [float(v) for v in rows["0_a/half.png"]["fg_fraction"].split()]
assert half == [1.0] * 8 + [0.0] * 8, half
assert [float(v) for v in rows["0_a/black.png"]["fg_fraction"].split()] == [0.0] * 16
assert [float(v) for v in rows["1_b/white.png"]["fg_fraction"].split()] == [1.0] * 16
dot = [float(v) for v in rows["1_b/dot.png"]["fg_fraction"].split()]
assert abs(dot[0] - 1 / 49) < 1e-5 and dot[1:] == [0.0] * 15, dot
for p in ("0_a/black.png", "1_b/white.png", "1_b/dot.png"):
    assert math.isnan(float(rows[p]["auc_q"])), p
assert j["scored"] == 1 and j["skipped_all_foreground"] == 1 and j["skipped_all_background"] == 2 and j["images"] == 4, j
# with 8 foreground and 8 background tokens the AUC is the share of (fg, bg) pairs ordered right
q = [float(v) for v in rows["0_a/half.png"]["q_norm"].split()]
auc = sum((a > b) + 0.5 * (a == b) for a in q[:8] for b in q[8:]) / 64
assert abs(auc - float(rows["0_a/half.png"]["auc_q"])) < 1e-5 and abs(auc - j["auc_q"]) < 1e-5, (auc, j)
PY

# ---- viz --score on real images: recomputed from the rows, bounds, the untrained baseline ----
out=$("$SFVIT" viz $VIT --score fm --json vit_score.json --per-image vit_score.csv 2>&1); rc=$?
echo "$out" | head -1
check "viz --score on fm/val exits 0" test $rc -eq 0
out0=$("$SFVIT" viz $VIT --score fm --random-init --json vit_init.json 2>&1); rc=$?
echo "$out0" | head -1
check "--random-init scores the untrained model" test $rc -eq 0 -a -n "$(grep '(random init)' <<< "$out0")"
check "per-image AUC and Spearman recomputed; averages, bounds and counts" $PY - vit_score.csv vit_score.json vit_init.json <<'PY'
import csv, json, math, sys
rows = list(csv.DictReader(open(sys.argv[1])))
j, j0 = json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
def ranks(v):
    order = sorted(range(len(v)), key=lambda i: v[i]); r = [0.0] * len(v); a = 0
    while a < len(v):
        b = a
        while b + 1 < len(v) and v[order[b + 1]] == v[order[a]]: b += 1
        for k in range(a, b + 1): r[order[k]] = (a + b) / 2 + 1
        a = b + 1
    return r
def pearson(a, b):
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    sab = sum((x - ma) * (y - mb) for x, y in zip(a, b)); saa = sum((x - ma) ** 2 for x in a); sbb = sum((y - mb) ** 2 for y in b)
    return sab / math.sqrt(saa * sbb) if saa > 0 and sbb > 0 else 0.0
scored, sums, skipped_fg, skipped_bg = 0, {"auc_q": 0, "auc_k": 0, "spearman_q": 0, "spearman_k": 0}, 0, 0
for r in rows:
    frac = [float(v) for v in r["fg_fraction"].split()]
    fg = [f >= 0.5 for f in frac]
    assert int(r["fg_tokens"]) == sum(fg) and int(r["tokens"]) == len(frac) == 16
    if all(fg): skipped_fg += 1; continue
    if not any(fg): skipped_bg += 1; continue
    scored += 1
    for key in "qk":
        norm = [float(v) for v in r[key + "_norm"].split()]
        pos = [n for n, f in zip(norm, fg) if f]; neg = [n for n, f in zip(norm, fg) if not f]
        auc = sum((a > b) + 0.5 * (a == b) for a in pos for b in neg) / (len(pos) * len(neg))
        rho = pearson(ranks(norm), ranks(frac))
        assert abs(auc - float(r["auc_" + key])) < 2e-5 and abs(rho - float(r["spearman_" + key])) < 2e-5, (r["path"], auc, rho)
        assert 0 <= auc <= 1 and -1 <= rho <= 1
        sums["auc_" + key] += auc; sums["spearman_" + key] += rho
assert len(rows) == j["images"] == 200 and scored == j["scored"] > 150, (len(rows), scored, j)
assert skipped_fg == j["skipped_all_foreground"] and skipped_bg == j["skipped_all_background"], j
for k, v in sums.items():
    assert abs(v / scored - j[k]) < 1e-4, (k, v / scored, j[k])
for jj in (j, j0):
    assert all(0 <= jj[k] <= 1 for k in ("auc_q", "auc_k")) and all(-1 <= jj[k] <= 1 for k in ("spearman_q", "spearman_k"))
assert j0["random_init"] is True and j["random_init"] is False and j0["scored"] == j["scored"]
print("trained AUC q %.3f k %.3f, random init AUC q %.3f k %.3f" % (j["auc_q"], j["auc_k"], j0["auc_q"], j0["auc_k"]))
PY

# ---- XCiT conv patch embedding: 28 -> 32 resize, 8x8 stride cells ----
"$SFVIT" train "$ROOT/configs/fmnist_sima.yaml" "${COMMON[@]}" train.name=xcit train.max_steps=2 > xcit.log 2>&1
check "tiny XCiT-SimA trains 2 steps" test -f runs/xcit/last.safetensors
"$SFVIT" viz runs/xcit/last.safetensors --score synth --per-image xcit.csv > xcit_score.log 2>&1
check "XCiT: the top half (rows 0-13 of 28) covers resized rows 0-16 of 32" $PY - xcit.csv <<'PY'
import csv, sys
half = [float(v) for v in next(r for r in csv.DictReader(open(sys.argv[1])) if r["path"] == "0_a/half.png")["fg_fraction"].split()]
assert half == [1.0] * 8 + [0.125] * 4 + [0.0] * 4, half
PY

# ---- CvT: keys on the stride-2 grid of the queries ----
# At 56 pixels the last stage's grid is 4x4 (56 -> 14 -> 7 -> 4) and its keys' 2x2.
"$SFVIT" train "$ROOT/configs/fmnist_cvt_sima.yaml" "${COMMON[@]}" train.name=cvt train.max_steps=2 model.img_size=56 \
  > cvt.log 2>&1
check "tiny CvT-SimA trains 2 steps" test -f runs/cvt/last.safetensors
out=$("$SFVIT" viz runs/cvt/last.safetensors synth/val/0_a/half.png -o cvt_heat.png 2>&1); rc=$?
echo "$out"
check "CvT heat map: query grid 4x4, keys 2x2" test $rc -eq 0 -a -n "$(grep 'grid 4x4, keys 2x2' <<< "$out")"
check "CvT heat map: three 224-pixel panels" $PY - cvt_heat.png <<'PY'
import struct, sys
d = open(sys.argv[1], "rb").read()
assert d[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", d[16:24]) == (672, 224), struct.unpack(">II", d[16:24])
PY
out=$("$SFVIT" viz runs/cvt/last.safetensors --score synth --json cvt.json --per-image cvt.csv 2>&1); rc=$?
echo "$out" | head -1
check "CvT --score exits 0 and names the key grid" test $rc -eq 0 -a -n "$(grep 'grid 4x4, keys 2x2 on it' <<< "$out")"
check "CvT: each query cell scored with the key whose 2x2 cell holds it" $PY - cvt.csv cvt.json <<'PY'
import csv, json, sys
rows = {r["path"]: r for r in csv.DictReader(open(sys.argv[1]))}
j = json.load(open(sys.argv[2]))
assert (j["grid_h"], j["grid_w"], j["k_grid_h"], j["k_grid_w"]) == (4, 4, 2, 2), j
half = rows["0_a/half.png"]
assert [float(v) for v in half["fg_fraction"].split()] == [1.0] * 8 + [0.0714286] * 4 + [0.0] * 4, half["fg_fraction"]
k = [float(v) for v in half["k_norm"].split()]
assert len(k) == 16 and all(k[i * 4 + jj] == k[(i // 2) * 8 + (jj // 2) * 2] for i in range(4) for jj in range(4)), k
assert len({k[0], k[2], k[8], k[10]}) > 1, k   # four keys, not one value
q = [float(v) for v in half["q_norm"].split()]
assert len(set(q)) > 4, q                      # the queries keep their own 16 values
assert j["scored"] == 1, j
PY

# ---- viz: bad options ----
out=$("$SFVIT" viz $VIT --json x.json 2>&1); rc=$?
check "--json without --score: status 2, named" test $rc -eq 2 -a -n "$(grep -- '--json needs --score' <<< "$out")"
out=$("$SFVIT" viz $VIT synth/val/0_a/half.png --score synth 2>&1); rc=$?
check "--score with an IMAGE: status 2, named" test $rc -eq 2 -a -n "$(grep -- '--score DIR scores a split' <<< "$out")"
out=$("$SFVIT" viz $SOFT --score fm 2>&1); rc=$?
check "--score of a model without SimA fails, named" test $rc -eq 1 -a -n "$(grep 'not a SimA model' <<< "$out")"
out=$("$SFVIT" viz $VIT --score fm --split nosuch 2>&1); rc=$?
check "--score of a missing split fails naming it" test $rc -eq 1 -a -n "$(grep 'nosuch' <<< "$out")"

echo "eval_tools: $passed passed, $failed failed"
[ $failed -eq 0 ]
