#!/usr/bin/env bash
# train.tensorboard: event files in the run folder, decoded independently (tfevents_read.py:
# TFRecord framing with masked CRC-32C, Event/Summary fields), every scalar equal to
# log.jsonl's; a resumed run adds a file whose steps continue; a corrupted byte is caught.
# Usage: test_tensorboard.sh SFVIT_BINARY SOURCE_ROOT
set -uo pipefail
SFVIT=$(realpath "$1")
ROOT=$(realpath "$2")
W=$(mktemp -d /tmp/sfvit-tb-XXXXXX)
[ -n "${SFVIT_KEEP_TEST_DIR:-}" ] || trap 'rm -rf "$W"' EXIT; echo "work dir: $W"
cd "$W"
source "$ROOT/tests/lib.sh"
PY=/usr/bin/python3
READ="$PY $ROOT/tests/tfevents_read.py"

fmnist_subset "$SFVIT" "$ROOT" 256 128
COMMON=(data.root=fm train.out=runs train.threads=1 data.workers=1 train.batch_size=32 train.log_every=2)
"$SFVIT" train "$ROOT/configs/fmnist_tiny.yaml" "${COMMON[@]}" train.name=off > off.log 2>&1
check "off by default: no event file" test -z "$(ls runs/off | grep tfevents)"
"$SFVIT" train "$ROOT/configs/fmnist_tiny.yaml" "${COMMON[@]}" train.name=tb train.tensorboard=true \
  train.epochs=2 > tb.log 2>&1
check "train with train.tensorboard=true" grep -q "final val top-1" tb.log
check "one event file" test "$(ls runs/tb | grep -c '^events.out.tfevents\.')" -eq 1
"$SFVIT" train --resume runs/tb train.epochs=3 > resume.log 2>&1
check "resumed run" grep -q "final val top-1" resume.log
check "resume adds a second event file" test "$(ls runs/tb | grep -c '^events.out.tfevents\.')" -eq 2
$READ runs/tb/events.out.tfevents.* > scalars.jsonl; rc=$?
check "framing and CRCs decode" test $rc -eq 0
check "scalars decoded ($(wc -l < scalars.jsonl))" test "$(wc -l < scalars.jsonl)" -gt 20
check "values equal log.jsonl's (loss, lr, img/s, stall per log step; val loss/top-1/top-5, train loss per epoch)" \
  $PY - scalars.jsonl runs/tb/log.jsonl <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
log = [json.loads(l) for l in open(sys.argv[2])]
by = {(e["tag"], e["step"]): e["value"] for e in ev}
def close(a, b, rel=1e-5):
    return abs(a - b) <= rel * max(1.0, abs(b)) + 1e-6
n = 0
steps = [l for l in log if "batch" in l]
for l in steps:
    # log.jsonl prints loss %.6f, lr %.6e, img/s %.2f, stall %.3f: compared to that precision
    for tag, key, tol in (("train/loss", "loss", 1e-6), ("train/lr", "lr", 1e-6 * l["lr"]),
                          ("train/img_per_s", "img_per_s", 0.006), ("train/stall_s", "stall_s", 6e-4)):
        v = by[(tag, l["step"])]
        assert abs(v - l[key]) <= tol + 1e-7 * abs(v), (tag, l["step"], v, l[key])
        n += 1
epochs = [l for l in log if "top1" in l]
assert len(epochs) == 3, epochs
ep_steps = sorted({e["step"] for e in ev if e["tag"] == "val/top1"})
for l, s in zip(epochs, ep_steps):
    for tag, key in (("val/top1", "top1"), ("val/top5", "top5"), ("val/loss", "val_loss"), ("train/epoch_loss", "train_loss")):
        assert close(by[(tag, s)], l[key], 1e-4), (tag, s, by[(tag, s)], l[key])
        n += 1
print("%d values equal" % n)
PY
check "steps continue across the resume (second file starts after the first ends)" $PY - scalars.jsonl <<'PY'
import json, sys
spans = {}
for l in open(sys.argv[1]):
    e = json.loads(l)
    lo, hi = spans.get(e["file"], (e["step"], e["step"]))
    spans[e["file"]] = (min(lo, e["step"]), max(hi, e["step"]))
a, b = sorted(spans.values())
assert a[1] < b[0], (a, b)
print(a, b)
PY

# ---- a flipped byte is caught by the CRC ----
f=$(ls runs/tb/events.out.tfevents.* | head -1)
cp "$f" corrupt
printf '\xff' | dd of=corrupt bs=1 seek=40 conv=notrunc 2>/dev/null
out=$($READ corrupt 2>&1 >/dev/null); rc=$?
check "a flipped byte fails the CRC check" test $rc -ne 0 -a -n "$(grep -i crc <<< "$out")"

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
