#!/usr/bin/env bash
# Integration tests of the sfvit command on real Fashion-MNIST data (a small subset):
# config errors, training, resume equality, fine-tuning with a new head, the NaN stop with
# the checkpoint intact, an ablation grid, eval, info, viz, data check and the op profile of
# sfvit bench (SFVIT_PROFILE=1: the timed steps only).
# Usage: test_cli.sh SFVIT_BINARY SOURCE_ROOT
set -uo pipefail
SFVIT=$(realpath "$1")
ROOT=$(realpath "$2")
W=$(mktemp -d /tmp/sfvit-cli-XXXXXX)
[ -n "${SFVIT_KEEP_TEST_DIR:-}" ] || trap 'rm -rf "$W"' EXIT; echo "work dir: $W"
cd "$W"
source "$ROOT/tests/lib.sh"


fmnist_subset "$SFVIT" "$ROOT" 2048 512
check "2048 train PNGs" test "$(find fm/train -name '*.png' | wc -l)" -eq 2048
check "data check" "$SFVIT" data check fm
BASE=$ROOT/configs/fmnist_tiny.yaml
COMMON=(data.root=fm train.out=runs train.threads=1 data.workers=2 train.log_every=1)

# ---- config errors name the key and the place ----
printf 'model:\n  img_size: 28\n  embed_dimm: 64\n' > badkey.yaml
out=$("$SFVIT" train badkey.yaml 2>&1); rc=$?
check "unknown key rejected" test $rc -ne 0
check "unknown key named with file:line" grep -q "badkey.yaml:3.*embed_dimm" <<< "$out"
out=$("$SFVIT" train "$BASE" optim.lr=abc 2>&1); rc=$?
check "wrong type rejected" test $rc -ne 0
check "wrong type names the key" grep -q "optim.lr" <<< "$out"
out=$("$SFVIT" train "$BASE" train.batch_size=0 2>&1); rc=$?
check "out of range rejected" test $rc -ne 0
check "out of range names the key" grep -q "train.batch_size" <<< "$out"
out=$("$SFVIT" train "$BASE" model.attn=softmaxx 2>&1); rc=$?
check "bad enum rejected" test $rc -ne 0
check "bad enum lists choices" grep -q "sima" <<< "$out"

# ---- an uninterrupted run of 2 epochs (16 steps each) ----
out=$("$SFVIT" train "$BASE" "${COMMON[@]}" train.name=full train.epochs=2 2>&1); rc=$?
echo "$out" | tail -3
check "train exits 0" test $rc -eq 0
check "prints final val top-1" grep -q "final val top-1" <<< "$out"
for f in config.yaml log.jsonl metrics.csv last.safetensors best.safetensors; do
  check "run folder has $f" test -s runs/full/$f
done
top1=$(grep -o 'final val top-1 [0-9.]*' <<< "$out" | awk '{print $4}')
check "tiny model learns (top-1 $top1 > 30, chance is 10)" awk -v t="$top1" 'BEGIN{exit !(t > 30)}'

# ---- resume: stop after 11 steps, resume, same losses step for step ----
"$SFVIT" train "$BASE" "${COMMON[@]}" train.name=part train.epochs=2 train.max_steps=11 > part1.log 2>&1
check "partial run stops with a checkpoint" grep -q "stopped after train.max_steps" part1.log
"$SFVIT" train --resume runs/part train.max_steps=0 > part2.log 2>&1
check "resumed run completes" grep -q "final val top-1" part2.log
losses() { grep '"batch"' "$1" | sed 's/.*"step":\([0-9]*\).*"loss":\([0-9.e+-]*\).*/\1 \2/'; }
losses runs/full/log.jsonl > full.txt
losses runs/part/log.jsonl > part.txt
check "resume: same number of steps" test "$(wc -l < full.txt)" -eq "$(wc -l < part.txt)"
check "resume: losses equal step for step" cmp -s full.txt part.txt
check "resume: final weights and moments bit-identical" test "$(tensor_bytes runs/full/last.safetensors)" = "$(tensor_bytes runs/part/last.safetensors)"

# ---- a resume on another thread count says its steps need not repeat the bits; at the same one, nothing ----
check "resume at the same threads: no note" bash -c '! grep -q "need not match" part2.log'
"$SFVIT" train "$BASE" "${COMMON[@]}" train.name=other train.epochs=2 train.max_steps=3 > other1.log 2>&1
"$SFVIT" train --resume runs/other train.max_steps=5 train.threads=2 > other2.log 2>&1; rc=$?
check "resume of a 1-thread run on 2 threads trains on" test $rc -eq 0
check "resume on 2 threads: names the thread counts" grep -q "threads: 1 then, 2 now" other2.log
check "resume on 2 threads: says the bits need not match" grep -q "need not match an uninterrupted run's bit for bit" other2.log
check "resume on 2 threads: how to repeat them" grep -q "train.threads=1 (or SFVIT_THREADS=1) repeats them" other2.log
SFVIT_GEMM=auto "$SFVIT" train "$BASE" "${COMMON[@]}" train.name=kern train.epochs=2 train.max_steps=3 > kern1.log 2>&1
SFVIT_GEMM=openblas "$SFVIT" train --resume runs/kern train.max_steps=4 > kern2.log 2>&1; rc=$?
check "resume with other kernels (SFVIT_GEMM=openblas) trains on" test $rc -eq 0
check "resume with other kernels: names both kernel lines" grep -q "kernels then: fp32 products: .*SFVIT_GEMM=auto.*; now: fp32 products: .*SFVIT_GEMM=openblas" kern2.log

# ---- eval ----
out=$("$SFVIT" eval runs/full/best.safetensors --data fm 2>&1); rc=$?
check "eval exits 0" test $rc -eq 0
check "eval prints top-1 and top-5" grep -q "top-1 .*top-5" <<< "$out"
# a checkpoint in an ablation's variant folder: a path holding '=' is not a key=value override
mkdir -p "grid/attn_norm=l1/seed0" && cp runs/full/best.safetensors "grid/attn_norm=l1/seed0/"
out2=$("$SFVIT" eval "grid/attn_norm=l1/seed0/best.safetensors" --data fm 2>&1); rc=$?
check "eval of grid/attn_norm=l1/seed0/best.safetensors: the same top-1" \
  test $rc -eq 0 -a "$(grep -o "top-1 [0-9.]*%" <<< "$out2")" = "$(grep -o "top-1 [0-9.]*%" <<< "$out")"
out2=$(cd grid && "$SFVIT" eval "attn_norm=l1/seed0/best.safetensors" --data ../fm 2>&1); rc=$?
check "eval of attn_norm=l1/seed0/best.safetensors (relative, '=' before '/')" test $rc -eq 0
out2=$("$SFVIT" eval runs/full/best.safetensors --data fm model.no_such_key=1 2>&1); rc=$?
check "a key=value that names no file is still an override (unknown key refused)" test $rc -ne 0

# ---- fine-tune on 5 classes: head re-initialized ----
mkdir -p fm5/train fm5/val
for c in $(ls fm/train | head -5); do cp -r fm/train/$c fm5/train/; cp -r fm/val/$c fm5/val/; done
out=$("$SFVIT" train "$BASE" "${COMMON[@]}" data.root=fm5 model.num_classes=5 train.name=ft \
      model.init_from=runs/full/best.safetensors 2>&1); rc=$?
check "fine-tune exits 0" test $rc -eq 0
check "fine-tune reports the new head" grep -q "head.weight re-initialized" <<< "$out"
check "fine-tune loaded the rest" grep -q "tensors loaded" <<< "$out"

# ---- NaN stop: divergence keeps the last good checkpoint ----
cp runs/full/last.safetensors good.safetensors
# An absurd recipe that overflows for real: decoupled decay with lr*wd = 50 multiplies every
# weight by -49 per step, so within a few steps a weight is Inf and the loss NaN.
"$SFVIT" train --resume runs/full train.epochs=3 model.attn_norm=none optim.lr=10 optim.weight_decay=5 \
  sched.warmup_epochs=0 sched.min_lr=10 > nan.log 2>&1; rc=$?
check "divergence exits 3" test $rc -eq 3
check "divergence message names the step" grep -qE "(NaN|Inf).* at step [0-9]+" nan.log
check "divergence hint names the kept checkpoint" grep -q "last good checkpoint is kept: runs/full/last.safetensors" nan.log
check "last checkpoint untouched" cmp -s good.safetensors runs/full/last.safetensors
check "last checkpoint still loads" "$SFVIT" eval runs/full/last.safetensors --data fm

# ---- ablation grid of 3 variants ----
out=$("$SFVIT" ablate "$BASE" "${COMMON[@]}" train.name=abl model.attn_norm=l1,l2,none train.max_train_fraction=0.5 2>&1); rc=$?
check "ablate exits 0" test $rc -eq 0
check "ablation.md written" test -s runs/abl/ablation.md
check "ablation.csv has 3 variants" test "$(tail -n +2 runs/abl/ablation.csv | wc -l)" -eq 3
check "ablation rows carry a status" test "$(tail -n +2 runs/abl/ablation.csv | grep -cE ',"(ok|diverged at step [0-9]+)"$')" -eq 3

# ---- info, viz ----
for m in deit_tiny deit_small xcit_small_12_p16 soft_tiny; do
  check "info $m" "$SFVIT" info $m
done
img=$(find fm/val -name '*.png' | head -1)
check "viz writes a PNG" "$SFVIT" viz runs/full/best.safetensors "$img" -o heat.png
check "viz PNG header" test "$(head -c 8 heat.png | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a
check "viz PNG decodes" "$SFVIT" data check-image heat.png

# ---- bench's op profile counts the timed steps, not the warm-up ----
out=$(SFVIT_PROFILE=1 "$SFVIT" bench "$BASE" train.threads=1 --steps 3 --warmup 2 --no-infer 2>&1)
check "profile: one cross_entropy call per timed step (3)" \
  test "$(awk '$1 == "cross_entropy" { print $2 }' <<< "$out")" = 3

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
