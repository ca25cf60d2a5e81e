#!/usr/bin/env bash
# The memory check before a run (train/memory.c): a batch too large for what the process may
# use (SFVIT_MEMORY_MIB here, so the test is the same on every machine) stops before the run
# folder is written, naming train.batch_size or train.eval_batch_size; its hint's split trains;
# the lr follows the images per update; the estimate matches the activation arena sfvit bench
# measures; and the probe steps leave no trace (the same weights bit for bit as without them).
# Usage: test_memory.sh SFVIT_BINARY SOURCE_ROOT
set -uo pipefail
SFVIT=$(realpath "$1")
ROOT=$(realpath "$2")
W=$(mktemp -d /tmp/sfvit-memory-XXXXXX)
[ -n "${SFVIT_KEEP_TEST_DIR:-}" ] || trap 'rm -rf "$W"' EXIT; echo "work dir: $W"
cd "$W"
source "$ROOT/tests/lib.sh"

fmnist_subset "$SFVIT" "$ROOT" 512 2048
CFG=$ROOT/configs/fmnist_sima.yaml  # XCiT with BatchNorm in its patch embedding and LPI
COMMON=(data.root=fm train.out=runs train.threads=1 data.workers=1 train.eval_batch_size=64 train.log_every=1)

# The "memory:" line's peak in MiB, from a run stopped by a 1 MiB allowance right after it.
peak_mib() {
  SFVIT_MEMORY_MIB=1 "$SFVIT" train "$CFG" "${COMMON[@]}" train.name=probe "$@" 2>&1 |
    sed -n 's/^memory: about \([0-9.]*\) \(MiB\|GiB\) at the peak.*/\1 \2/p' |
    awk '{ print ($2 == "GiB") ? $1 * 1024 : $1 }'
}

# ---- the line, from the machine's MemAvailable, on a run that trains ----
"$SFVIT" train "$CFG" "${COMMON[@]}" train.name=plain train.max_steps=2 > plain.log 2>&1; rc=$?
check "a run that fits trains (status $rc)" test $rc -eq 0
check "it says what it will need and what is available" grep -qE "^memory: about [0-9.]+ MiB at the peak .* available \(MemAvailable\)" plain.log

# ---- a training batch that does not fit ----
p32=$(peak_mib train.batch_size=32); p64=$(peak_mib train.batch_size=64)
check "peaks read (batch 32: $p32 MiB, 64: $p64 MiB)" test -n "$p32" -a -n "$p64"
check "the peak grows with the batch" awk -v a="$p32" -v b="$p64" 'BEGIN { exit !(b > a) }'
# room for 24 images (the middle of 16..31, so a few MiB of resident-set noise between runs
# cannot move the answer): batch 64 does not fit, 16 does (64 / 4), 32 does not
allow=$(awk -v a="$p32" -v b="$p64" 'BEGIN { per = (b - a) / 32; printf "%d", a - 32 * per + 24 * per }')
out=$(SFVIT_MEMORY_MIB=$allow "$SFVIT" train "$CFG" "${COMMON[@]}" train.name=big train.batch_size=64 2>&1); rc=$?
check "batch 64 in $allow MiB: status 1 (got $rc)" test $rc -eq 1
check "the error names train.batch_size and the allowance" \
  grep -qE "error: train.batch_size=64: training on 64 images per step needs about .* and this process may use $allow MiB \(SFVIT_MEMORY_MIB\)" <<< "$out"
check "the hint splits the batch so the update keeps 64 images" \
  grep -q "HINT: train.batch_size=16 optim.accum_steps=4 keeps 64 images per update, in micro-batches of 16" <<< "$out"
check "the hint says BatchNorm then sees micro-batches" grep -q "BatchNorm statistics are then per micro-batch" <<< "$out"
check "no run folder written" test ! -e runs/big
SFVIT_MEMORY_MIB=$allow "$SFVIT" train "$CFG" "${COMMON[@]}" train.name=split train.batch_size=16 optim.accum_steps=4 \
  train.max_steps=2 > split.log 2>&1; rc=$?
check "the hint's split trains in the same allowance (status $rc)" test $rc -eq 0
check "it updates on 64 images" grep -q "^update: 64 images (train.batch_size 16 x optim.accum_steps 4)" split.log

# ---- the lr scales with the images per update, accumulated ones included ----
lr_of() { SFVIT_MEMORY_MIB=1 "$SFVIT" train "$CFG" "${COMMON[@]}" train.name=lr optim.scale_lr=true \
  optim.scale_lr_base=32 optim.lr=0.001 "$@" 2>&1 | sed -n 's/^update: .* lr \([0-9.e+-]*\) .*/\1/p'; }
lr_a=$(lr_of train.batch_size=64); lr_b=$(lr_of train.batch_size=16 optim.accum_steps=4)
check "lr of 64 images per update: 2x optim.lr (got $lr_a)" test "$lr_a" = "2.000e-03"
check "the same with 16 x 4 accumulated (got $lr_b)" test "$lr_b" = "$lr_a"

# ---- an evaluation batch that does not fit ----
e64=$(peak_mib train.batch_size=16); e2k=$(peak_mib train.batch_size=16 train.eval_batch_size=2048)
allow=$(awk -v a="$e64" -v b="$e2k" 'BEGIN { printf "%d", (a + b) / 2 }')
out=$(SFVIT_MEMORY_MIB=$allow "$SFVIT" train "$CFG" "${COMMON[@]}" train.name=evalbig train.batch_size=16 \
  train.eval_batch_size=2048 2>&1); rc=$?
check "evaluation batch 2048 in $allow MiB: status 1 (got $rc)" test $rc -eq 1
check "the error names train.eval_batch_size" grep -q "error: train.eval_batch_size=2048: an evaluation batch of 2048 images needs" <<< "$out"
fits=$(sed -n 's/.*HINT: train.eval_batch_size=\([0-9]*\) fits.*/\1/p' <<< "$out")
check "the hint's evaluation batch ($fits) lies between 64 and 2048" test -n "$fits" && test "$fits" -gt 64 -a "$fits" -lt 2048
SFVIT_MEMORY_MIB=$allow "$SFVIT" train "$CFG" "${COMMON[@]}" train.name=evalfit train.batch_size=16 \
  train.eval_batch_size="$fits" train.max_steps=1 > evalfit.log 2>&1; rc=$?
check "the hint's evaluation batch passes the check (status $rc)" test $rc -eq 0

# ---- bad values of SFVIT_MEMORY_MIB ----
out=$(SFVIT_MEMORY_MIB=lots "$SFVIT" train "$CFG" "${COMMON[@]}" train.name=bad 2>&1); rc=$?
check "SFVIT_MEMORY_MIB=lots: status 1 and the variable named" test $rc -eq 1 -a -n "$(grep "SFVIT_MEMORY_MIB='lots'" <<< "$out")"
check "SFVIT_MEMORY_MIB=lots: no run folder" test ! -e runs/bad

# ---- the estimate against the arena sfvit bench measures (within 5 %) ----
for m in fmnist_sima fmnist_vit_sima fmnist_soft fmnist_cvt_sima fmnist_msa; do
  line=$("$SFVIT" bench "$ROOT/configs/$m.yaml" train.batch_size=24 train.threads=1 --steps 1 --warmup 0 --no-infer |
    grep "activation arena peak")
  got=$(sed -n 's/.*arena peak \([0-9.]*\) MiB (estimated before the first step: \([0-9.]*\) MiB).*/\1 \2/p' <<< "$line")
  check "$m: estimate within 5% of the measured arena ($got)" \
    awk -v g="$got" 'BEGIN { split(g, v, " "); exit !(v[1] > 0 && v[2] > 0.95 * v[1] && v[2] < 1.05 * v[1]) }'
done
out=$(SFVIT_MEMORY_MIB=40 "$SFVIT" bench "$CFG" train.batch_size=4096 --steps 1 2>&1); rc=$?
check "bench with a batch that does not fit: status 1" test $rc -eq 1
check "bench names train.batch_size" grep -q "error: train.batch_size=4096: a training step on 4096 images needs" <<< "$out"

# ---- the probe steps leave no trace: the same weights with and without them ----
for extra in "" "train.precision=bf16_emulated"; do
  for mem in off ""; do
    SFVIT_MEMORY_MIB=$mem "$SFVIT" train "$CFG" "${COMMON[@]}" train.name="trace$mem${extra:+_bf16}" \
      model.drop_path_rate=0.1 train.batch_size=32 train.max_steps=3 $extra > "trace$mem.log" 2>&1 ||
      bad "trace run ${mem:-probe} $extra"
  done
  check "SFVIT_MEMORY_MIB=off skips the probe" grep -q "^memory: not checked (SFVIT_MEMORY_MIB=off)" traceoff.log
  check "probe or not, the same weights, BatchNorm statistics and moments ${extra:-fp32}" \
    test "$(tensor_bytes "runs/traceoff${extra:+_bf16}/last.safetensors")" = "$(tensor_bytes "runs/trace${extra:+_bf16}/last.safetensors")"
done

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
