#!/usr/bin/env bash
# The trainer's edges on a small real data set: config mistakes found before the run folder
# is written, warnings after the settings table, train.max_steps ending at an epoch boundary,
# --resume without the stored max_steps and
# refusing when nothing is left to train, the EMA of the weights (its own checkpoint,
# evaluated, resumed bit-identically), repeated augmentation, and a SOFT model whose NaN
# reaches the NaN stop (status 3) instead of an assertion.
# Usage: test_train_edges.sh SFVIT_BINARY SOURCE_ROOT
set -uo pipefail
SFVIT=$(realpath "$1")
ROOT=$(realpath "$2")
W=$(mktemp -d /tmp/sfvit-edges-XXXXXX)
[ -n "${SFVIT_KEEP_TEST_DIR:-}" ] || trap 'rm -rf "$W"' EXIT; echo "work dir: $W"
cd "$W"
source "$ROOT/tests/lib.sh"

fmnist_subset "$SFVIT" "$ROOT" 1024 256
BASE=$ROOT/configs/fmnist_tiny.yaml
COMMON=(data.root=fm train.out=runs train.threads=1 data.workers=2 train.log_every=4)

# ---- config mistakes: an error, a non-zero status, and no run folder ----
for bad in "aug.randaugment=rand-m9-zz" "data.root=nowhere" "model.num_classes=7" "train.max_train_fraction=0.001"; do
  out=$("$SFVIT" train "$BASE" "${COMMON[@]}" train.name=bad "$bad" 2>&1); rc=$?
  check "$bad: refused (status $rc)" test $rc -ne 0
  check "$bad: one error line" grep -q "sfvit: error:" <<< "$out"
  check "$bad: no run folder written" test ! -e runs/bad
done

# ---- warnings come after the settings table, not inside it ----
cp -r fm fmbad
printf 'not a png' > fmbad/train/$(ls fmbad/train | head -1)/zz_bad.png
"$SFVIT" train "$BASE" "${COMMON[@]}" data.root=fmbad train.name=warn > warn.log 2>&1
check "bad image warned about" grep -q "warning: skipping bad image" warn.log
last_rule=$(grep -n '^+---' warn.log | tail -1 | cut -d: -f1)
first_warn=$(grep -n 'warning:' warn.log | head -1 | cut -d: -f1)
check "warning after the table (line $first_warn > $last_rule)" test "$first_warn" -gt "$last_rule"

# ---- train.max_steps at an epoch's last step: no step of the next epoch ----
# 1024 images, batch 128: 8 steps per epoch.
"$SFVIT" train "$BASE" "${COMMON[@]}" train.name=edge8 train.epochs=2 train.max_steps=8 > e8.log 2>&1
check "max_steps at the epoch boundary: stopped" grep -q "stopped after train.max_steps=8" e8.log
check "max_steps at the epoch boundary: 8 steps in the checkpoint" \
  grep -aqF '"global_step":"8"' <(head -c 65536 runs/edge8/last.safetensors)

# ---- resume: the stored max_steps is not re-applied; nothing to do is an error ----
"$SFVIT" train "$BASE" "${COMMON[@]}" train.name=res train.epochs=2 train.max_steps=3 > r1.log 2>&1
check "partial run stops after 3 steps" grep -q "stopped after train.max_steps=3" r1.log
"$SFVIT" train --resume runs/res > r2.log 2>&1; rc=$?
check "resume runs to the end (status $rc)" test $rc -eq 0
check "resume did not stop at the stored max_steps" grep -q "final val top-1" r2.log
check "resume trained epoch 2" grep -q "^epoch 2/2" r2.log
md5=$(md5sum runs/res/config.yaml runs/res/last.safetensors)
out=$("$SFVIT" train --resume runs/res 2>&1); rc=$?
check "resume of a finished run: status 1" test $rc -eq 1
check "resume of a finished run: says why" grep -q "completed 2 epochs and train.epochs is 2: nothing left to train" <<< "$out"
check "resume of a finished run: hint names train.epochs" grep -q "train.epochs=3" <<< "$out"
out=$("$SFVIT" train --resume runs/res train.epochs=1 2>&1); rc=$?
check "resume with train.epochs below the checkpoint's: status 1" test $rc -eq 1
check "nothing rewritten by a refused resume" test "$md5" = "$(md5sum runs/res/config.yaml runs/res/last.safetensors)"
out=$("$SFVIT" train --resume runs/nothing 2>&1); rc=$?
check "resume of a folder that is no run: status 1 and a message" test $rc -eq 1 -a -n "$(grep 'is not a run folder' <<< "$out")"
mkdir -p runs/fresh && cp runs/res/config.yaml runs/fresh/
out=$("$SFVIT" train --resume runs/fresh 2>&1); rc=$?
check "resume of a run without a checkpoint: status 1 and a message" test $rc -eq 1 -a -n "$(grep 'no checkpoint to resume from' <<< "$out")"

# ---- EMA of the weights ----
EMA=(train.ema_decay=0.9 train.epochs=2)
"$SFVIT" train "$BASE" "${COMMON[@]}" "${EMA[@]}" train.name=ema > ema.log 2>&1; rc=$?
check "EMA run exits 0" test $rc -eq 0
check "ema.safetensors written" test -s runs/ema/ema.safetensors
check "EMA evaluated every epoch" test "$(grep -c 'EMA weights: val loss' ema.log)" -eq 2
check "EMA top-1 in log.jsonl and metrics.csv" grep -q '"ema_top1"' runs/ema/log.jsonl
check "metrics.csv has EMA columns" grep -q "ema_top1" runs/ema/metrics.csv
ema_top1=$(grep 'EMA weights' ema.log | tail -1 | sed 's/.*top-1 \([0-9.]*\)%.*/\1/')
out=$("$SFVIT" eval runs/ema/ema.safetensors --data fm 2>&1)
check "sfvit eval of ema.safetensors gives the logged top-1 ($ema_top1)" grep -q "top-1 $ema_top1%" <<< "$out"
check "EMA weights differ from the last weights" test "$(tensor_bytes runs/ema/ema.safetensors)" != "$(tensor_bytes runs/ema/best.safetensors)"
"$SFVIT" train "$BASE" "${COMMON[@]}" "${EMA[@]}" train.name=ema_part train.max_steps=5 > /dev/null 2>&1
"$SFVIT" train --resume runs/ema_part > ema2.log 2>&1
check "resumed EMA loaded from ema.safetensors" grep -q "EMA weights resumed from runs/ema_part/ema.safetensors" ema2.log
check "EMA after resume bit-identical to an uninterrupted run" test "$(tensor_bytes runs/ema/ema.safetensors)" = "$(tensor_bytes runs/ema_part/ema.safetensors)"

# ---- repeated augmentation: each image 3 times, the epoch as long as without ----
out=$("$SFVIT" train "$BASE" "${COMMON[@]}" train.name=ra data.repeated_aug=3 2>&1); rc=$?
check "repeated_aug=3 run exits 0" test $rc -eq 0
check "same steps per epoch as without" test "$(grep -o '[0-9]* steps/epoch' <<< "$out")" = "$(grep -o '[0-9]* steps/epoch' warn.log)"

# ---- SOFT: a diverging run reaches the NaN stop ----
SOFT=(model.name=soft_tiny model.attn=soft model.attn_norm=none model.img_size=32 model.in_chans=1
      model.num_classes=10 model.embed_dims=16,16,16,16 model.depths=1,1,1,1 model.stage_heads=1,1,1,1
      model.nr_iters=4 train.batch_size=32 train.max_steps=30 optim.lr=10 optim.weight_decay=5
      sched.warmup_epochs=0 sched.min_lr=10)
out=$("$SFVIT" train "$BASE" "${COMMON[@]}" "${SOFT[@]}" train.name=softnan 2>&1); rc=$?
check "SOFT divergence exits 3 (status $rc)" test $rc -eq 3
check "SOFT divergence names the step" grep -qE "(NaN|Inf).* at step [0-9]+" <<< "$out"
check "no assertion" test -z "$(grep 'internal error' <<< "$out")"
check "NR residual logged" grep -q '"nr_residual"' runs/softnan/log.jsonl

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
