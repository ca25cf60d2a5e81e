#!/usr/bin/env bash
# `sfvit predict` on real Fashion-MNIST PNGs and a JPEG with a tiny trained checkpoint: the
# class names stored at training, top-1 over the val split equal to `sfvit eval`'s (same eval
# transform), --json, a checkpoint without class names, an image that does not decode.
# Usage: test_predict.sh SFVIT_BINARY SOURCE_ROOT
set -uo pipefail
SFVIT=$(realpath "$1")
ROOT=$(realpath "$2")
W=$(mktemp -d /tmp/sfvit-predict-XXXXXX)
[ -n "${SFVIT_KEEP_TEST_DIR:-}" ] || trap 'rm -rf "$W"' EXIT; echo "work dir: $W"
cd "$W"
source "$ROOT/tests/lib.sh"
PY=/usr/bin/python3

fmnist_subset "$SFVIT" "$ROOT" 512 128
"$SFVIT" train "$ROOT/configs/fmnist_tiny.yaml" data.root=fm train.out=runs train.threads=1 data.workers=1 \
  train.epochs=3 train.batch_size=32 train.name=tiny > train.log 2>&1
check "tiny model trains" grep -q "final val top-1" train.log
CK=runs/tiny/best.safetensors

# ---- names from the checkpoint, top-K sorted ----
img=$(ls fm/val/08_Bag/*.png | head -1)
out=$("$SFVIT" predict $CK "$img" --topk 3 2>&1); rc=$?
echo "$out"
check "predict exits 0" test $rc -eq 0
check "prints 3 ranked classes with names" test "$(grep -cE '^ +[123]\. [0-9]{2}_' <<< "$out")" -eq 3
probs=$(grep -oE '[0-9.]+%' <<< "$out" | tr -d % | tr '\n' ' ')
check "probabilities decrease ($probs)" awk -v p="$probs" 'BEGIN{n=split(p,a," "); for(i=2;i<=n;i++) if (a[i]>a[i-1]) exit 1}'

# ---- top-1 of predict over the val folder equals eval's top-1 (same transform, same model) ----
"$SFVIT" predict $CK fm/val --json --topk 10 > val.jsonl; rc=$?
check "predict on a folder exits 0" test $rc -eq 0
check "one JSON line per val image" test "$(wc -l < val.jsonl)" -eq 128
acc=$($PY - val.jsonl <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ok = sum(r["top"][0]["name"] == r["image"].split("/")[-2] for r in rows)
assert all(abs(sum(t["prob"] for t in r["top"]) - 1) < 1e-3 for r in rows), "10 probabilities must sum to 1"
print("%.2f" % (100.0 * ok / len(rows)))
PY
)
ev=$("$SFVIT" eval $CK --data fm 2>&1 | grep -o 'top-1 [0-9.]*' | awk '{print $2}')
check "predict top-1 $acc% = eval top-1 $ev%" test "$acc" = "$ev"

# ---- the C API example (examples/classify.c, built next to sfvit) gives the same top-1 ----
CLASSIFY=$(dirname "$SFVIT")/examples/classify
out=$("$CLASSIFY" $CK "$img" 2>&1); rc=$?
echo "$out"
first=$("$SFVIT" predict $CK "$img" --topk 1 | awk '/^ +1\./{print $2}')
check "examples/classify exits 0" test $rc -eq 0
check "examples/classify top-1 = predict's ($first)" grep -q "^1\. $first " <<< "$out"

# ---- JPEG inputs (RGB and progressive; decoded by content, converted to the model's 1 channel) ----
out=$("$SFVIT" predict $CK "$ROOT/tests/fuzz/corpus/image/rgb.jpg" "$ROOT/tests/fuzz/corpus/image/progressive.jpg" --topk 1 2>&1); rc=$?
check "JPEGs are classified" test $rc -eq 0
check "two JPEG results" test "$(grep -c '^ *1\. ' <<< "$out")" -eq 2

# ---- a checkpoint written before class names were stored ----
drop_meta() { # IN OUT KEY: a copy of a checkpoint without one metadata key
  $PY - "$@" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
del h["__metadata__"][sys.argv[3]]
hb = json.dumps(h).encode()
open(sys.argv[2], "wb").write(struct.pack("<Q", len(hb)) + hb + b[8 + n:])
PY
}
drop_meta $CK old.safetensors class_names
out=$("$SFVIT" predict old.safetensors "$img" --topk 2 2>&1); rc=$?
echo "$out"
check "old checkpoint: exits 0" test $rc -eq 0
check "old checkpoint: says why there are no names" grep -q "stores no class names" <<< "$out"
check "old checkpoint: prints class ids" grep -qE '^ +1\. class [0-9]' <<< "$out"

# ---- a checkpoint without a config has no eval transform: named, with the way out ----
drop_meta $CK noconfig.safetensors config
out=$("$SFVIT" predict noconfig.safetensors "$img" 2>&1); rc=$?
check "no config: exit 1" test $rc -eq 1
check "no config: names the checkpoint and hints --config" grep -q "noconfig.safetensors.*no config" <<< "$out"
out=$("$SFVIT" predict noconfig.safetensors "$img" --config runs/tiny/config.yaml --topk 1 2>&1); rc=$?
check "no config: --config FILE.yaml gives the transform" test $rc -eq 0

# ---- bad input ----
echo "not an image" > broken.png
out=$("$SFVIT" predict $CK broken.png "$img" 2>&1); rc=$?
check "undecodable image: exit 1" test $rc -eq 1
check "undecodable image: named" grep -q "broken.png" <<< "$out"
check "undecodable image: the good one still classified" grep -q "$img" <<< "$out"
out=$("$SFVIT" predict $CK missing.png 2>&1); rc=$?
check "missing file named" grep -q "missing.png" <<< "$out"
out=$("$SFVIT" predict $CK "$img" --topk 0 2>&1); rc=$?
check "--topk 0 rejected" test $rc -eq 2

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
