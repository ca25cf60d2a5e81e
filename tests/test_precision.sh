#!/usr/bin/env bash
# train.precision from the command line, on real Fashion-MNIST data (a small subset):
# - what the machine can do is said: `sfvit info` and the start of a run print the precision
#   and the kernels; precision bf16 without native bf16 (AVX512_BF16 or AMX_BF16 through
#   oneDNN) stops before training with a message naming those instructions and leaves no run
#   folder; with train.precision_fallback=fp32 it warns and trains in fp32. Where the CPU has
#   native bf16 the same run must train in bf16 instead, its products on the kernels measured
#   faster (train.bf16_products=auto), recorded in the run's config and kept on resume; on
#   either kernels it resumes bit-exactly at equal threads.
# - bad values are refused naming the key;
# - bf16 training with the linear weights packed from fp32 (the default) gives the losses and
#   final weights of SFVIT_PACK_WEIGHTS=0 (bf16 copies) bit for bit, where native; any other
#   value of the variable is refused by name; so is any SFVIT_BF16_SMALL_MACS that is not a
#   count, and the start line says which products are too small for oneDNN's kernels.
# - bf16_emulated training resumes bit-exactly at equal threads (losses step for step, final
#   weights and moments), and differs from fp32 (the rounding is in effect);
# - checkpoints interchange: an fp32 run resumed in bf16_emulated and a bf16_emulated run
#   resumed in fp32 both finish; eval and bench take the key; ablate takes it as an axis.
# - fp32 products: auto uses oneDNN where OpenBLAS has only pre-AVX2 kernels for the CPU.
# Usage: test_precision.sh SFVIT_BINARY SOURCE_ROOT
set -uo pipefail
SFVIT=$(realpath "$1")
ROOT=$(realpath "$2")
W=$(mktemp -d /tmp/sfvit-precision-XXXXXX)
[ -n "${SFVIT_KEEP_TEST_DIR:-}" ] || trap 'rm -rf "$W"' EXIT; echo "work dir: $W"
cd "$W"
source "$ROOT/tests/lib.sh"

fmnist_subset "$SFVIT" "$ROOT" 1024 256
BASE=$ROOT/configs/fmnist_tiny.yaml
COMMON=(data.root=fm train.out=runs train.threads=1 data.workers=2 train.log_every=1)

# "bf16 fp32" GFLOP/s from a bf16 run's start line; a log's losses, one "step loss" a line.
rates_of() { sed -n 's/^products measured on one core ([0-9 x]*): bf16 \([0-9]*\) GFLOP\/s, fp32 \([0-9]*\) GFLOP\/s$/\1 \2/p' <<< "$1"; }
losses() { grep '"batch"' "$1" | sed 's/.*"step":\([0-9]*\).*"loss":\([0-9.e+-]*\).*/\1 \2/'; }

# ---- what the machine can do ----
info=$("$SFVIT" info "$BASE" 2>&1)
check "info prints the kernels" grep -q "kernels: fp32 products: .*SFVIT_GEMM=" <<< "$info"
out=$("$SFVIT" info "$BASE" train.precision=bf16 train.bf16_products=fp32 2>&1)
check "info in bf16 names train.bf16_products" grep -q "^bf16 products: train.bf16_products=fp32$" <<< "$out"
out=$(SFVIT_GEMM=bogus "$SFVIT" info vit 2>&1); rc=$?
check "an unknown SFVIT_GEMM stops the command (exit 2)" test $rc -eq 2
check "the message names SFVIT_GEMM and its values" grep -q "SFVIT_GEMM=bogus: expected auto, openblas or onednn" <<< "$out"
native=0
grep -q "bf16 matmul: .*(native)" <<< "$info" && native=1
echo "native bf16 here: $native ($(grep -o 'oneDNN [0-9].*' <<< "$info"))"

out=$("$SFVIT" train "$BASE" "${COMMON[@]}" train.name=bf16 train.precision=bf16 train.max_steps=2 2>&1); rc=$?
if [ $native -eq 0 ]; then
  check "bf16 without native bf16: refused" test $rc -ne 0
  check "refusal names AVX512_BF16 and AMX_BF16" grep -q "AVX512_BF16 or AMX_BF16" <<< "$out"
  check "refusal says what the CPU lacks" grep -Eq "neither AVX512_BF16 nor AMX_BF16|built without oneDNN" <<< "$out"
  check "refusal before training: no run folder" test ! -e runs/bf16
  out=$("$SFVIT" train "$BASE" "${COMMON[@]}" train.name=fallback train.precision=bf16 \
        train.precision_fallback=fp32 train.max_steps=2 2>&1); rc=$?
  check "fallback: trains" test $rc -eq 0
  check "fallback: warns" grep -q "warning: train.precision: bf16 is not native here" <<< "$out"
  check "fallback: says fp32" grep -q "^precision: fp32" <<< "$out"
else
  check "bf16 with native bf16: trains" test $rc -eq 0
  check "bf16 with native bf16: says bf16" grep -q "^precision: bf16 " <<< "$out"
  # Both rates measured before training; train.bf16_products=auto takes fp32 kernels when they
  # are clearly faster (1.25x: between 1.2x and 1.3x as printed either is right), and the run's
  # config records the kernels taken.
  rates=$(rates_of "$out")
  check "bf16 with native bf16: the bf16 and fp32 product rates are printed" test -n "$rates"
  b=${rates% *} f=${rates#* }
  taken=$(sed -n 's/^bf16 products: .*(train.bf16_products=\([a-z0-9]*\), chosen by auto).*/\1/p' <<< "$out")
  want=either
  [ -n "$rates" ] && [ $((f * 10)) -gt $((b * 13)) ] && want=fp32
  [ -n "$rates" ] && [ $((f * 10)) -lt $((b * 12)) ] && want=onednn
  check "auto takes the faster kernels (bf16 $b, fp32 $f GFLOP/s: $want; took '$taken')" \
    test -n "$taken" -a \( "$want" = either -o "$want" = "$taken" \)
  check "the run's config records them" grep -Eq "bf16_products: \"?$taken\"?$" runs/bf16/config.yaml
  out=$("$SFVIT" train --resume runs/bf16 train.max_steps=3 2>&1)
  check "a resumed bf16 run keeps them (as given, not chosen again)" grep -q "^bf16 products: .*(train.bf16_products=$taken)" <<< "$out"
  out=$("$SFVIT" train "$BASE" "${COMMON[@]}" train.name=bf16n train.precision=bf16 train.bf16_products=onednn \
        train.max_steps=1 2>&1)
  check "train.bf16_products=onednn: oneDNN's bf16 kernels" grep -q "^bf16 products: oneDNN's bf16 kernels" <<< "$out"
  rates=$(rates_of "$out")
  slower=0; [ -n "$rates" ] && [ ${rates% *} -lt ${rates#* } ] && slower=1
  warned=0; grep -q "warning: bf16 products run slower than fp32 ones on this CPU" <<< "$out" && warned=1
  check "... with a warning exactly when bf16 is the slower ($rates)" test $slower -eq $warned
  out=$("$SFVIT" bench "$BASE" train.precision=bf16 train.bf16_products=fp32 train.batch_size=8 --steps 1 --warmup 1 \
        --no-infer 2>&1); rc=$?
  check "train.bf16_products=fp32: bench runs" test $rc -eq 0
  check "... its steps run no bf16 product on oneDNN" bash -c '! grep -q "oneDNN kernels in the timed steps: .* bf16 [0-9]* products" <<< "$1"' _ "$out"
  check "... and no probe measured the rates" bash -c '! grep -q "^products measured on one core" <<< "$1"' _ "$out"
  # Resume bit-exact at equal threads on either kernels (the losses step for step, the final
  # weights and moments), as bf16_emulated below.
  for k in onednn fp32; do
    "$SFVIT" train "$BASE" "${COMMON[@]}" train.name=nfull$k train.epochs=2 train.precision=bf16 \
      train.bf16_products=$k > nfull$k.log 2>&1
    "$SFVIT" train "$BASE" "${COMMON[@]}" train.name=npart$k train.epochs=2 train.max_steps=11 \
      train.precision=bf16 train.bf16_products=$k > npart$k.log 2>&1
    "$SFVIT" train --resume runs/npart$k train.max_steps=0 > npart$k.2.log 2>&1
    check "bf16 on $k kernels: the resumed run completes" grep -q "final val top-1" npart$k.2.log
    a=$(losses runs/nfull$k/log.jsonl)
    b=$(losses runs/npart$k/log.jsonl)
    check "bf16 on $k kernels: resume gives the losses step for step" test -n "$a" -a "$a" = "$b"
    check "bf16 on $k kernels: resume gives the final weights and moments bit for bit" \
      test "$(tensor_bytes runs/nfull$k/last.safetensors)" = "$(tensor_bytes runs/npart$k/last.safetensors)"
  done
  # Linear weights packed from fp32 for each product (the default) against products reading
  # bf16 copies (SFVIT_PACK_WEIGHTS=0): the same training, bit for bit.
  check "the start line says the linear weights are packed" \
    grep -q "^bf16 products: oneDNN's bf16 kernels (.*), linear weights packed from fp32 for products of 1024 rows or more" nfullonednn.log
  check "the start line says which products are too small for oneDNN" \
    grep -q "^bf16 products: oneDNN's bf16 kernels (.*), linear weights .*, products of fewer than 1000000 multiply-adds split over the team (65536 on one thread) on fp32 kernels" nfullonednn.log
  SFVIT_PACK_WEIGHTS=0 "$SFVIT" train "$BASE" "${COMMON[@]}" train.name=ncopies train.epochs=2 train.precision=bf16 \
    train.bf16_products=onednn > ncopies.log 2>&1
  check "SFVIT_PACK_WEIGHTS=0: the start line says the weights are read from bf16 copies" \
    grep -q "^bf16 products: oneDNN's bf16 kernels (.*), linear weights read from bf16 copies (SFVIT_PACK_WEIGHTS=0)" ncopies.log
  a=$(losses runs/nfullonednn/log.jsonl)
  b=$(losses runs/ncopies/log.jsonl)
  check "SFVIT_PACK_WEIGHTS=0: the losses of the packed run step for step" test -n "$a" -a "$a" = "$b"
  check "SFVIT_PACK_WEIGHTS=0: the final weights and moments bit for bit" \
    test "$(tensor_bytes runs/nfullonednn/last.safetensors)" = "$(tensor_bytes runs/ncopies/last.safetensors)"
fi
out=$(SFVIT_PACK_WEIGHTS=yes "$SFVIT" train "$BASE" "${COMMON[@]}" train.precision=bf16_emulated 2>&1); rc=$?
check "SFVIT_PACK_WEIGHTS=yes refused before starting (exit 2)" test $rc -eq 2
check "SFVIT_PACK_WEIGHTS=yes: the message names the variable and its values" \
  grep -q "SFVIT_PACK_WEIGHTS=yes: expected 1 .* or 0" <<< "$out"
out=$(SFVIT_BF16_SMALL_MACS=many "$SFVIT" train "$BASE" "${COMMON[@]}" train.precision=bf16_emulated 2>&1); rc=$?
check "SFVIT_BF16_SMALL_MACS=many refused before starting (exit 2)" test $rc -eq 2
check "SFVIT_BF16_SMALL_MACS=many: the message names the variable and what it takes" \
  grep -q "SFVIT_BF16_SMALL_MACS=many: expected a number of multiply-adds" <<< "$out"
out=$(SFVIT_CONV_BANDS=2 "$SFVIT" train "$BASE" "${COMMON[@]}" 2>&1); rc=$?
check "SFVIT_CONV_BANDS=2 refused before starting (exit 2)" test $rc -eq 2
check "SFVIT_CONV_BANDS=2: the message names the variable and its values" \
  grep -q "SFVIT_CONV_BANDS=2: expected 1 .* or 0" <<< "$out"
out=$("$SFVIT" train "$BASE" "${COMMON[@]}" train.precision=fp16 2>&1); rc=$?
check "unknown precision refused" test $rc -ne 0
check "unknown precision names the key and the choices" grep -q "train.precision.*bf16_emulated" <<< "$out"
out=$("$SFVIT" train "$BASE" "${COMMON[@]}" train.precision=bf16 train.bf16_products=amx 2>&1); rc=$?
check "unknown bf16_products refused" test $rc -ne 0
check "... naming the key and the choices" grep -q "train.bf16_products.*auto.*onednn.*fp32" <<< "$out"

# ---- bf16_emulated: resume bit-exact at equal threads, and not fp32 ----
out=$("$SFVIT" train "$BASE" "${COMMON[@]}" train.name=full train.epochs=2 train.precision=bf16_emulated 2>&1); rc=$?
check "bf16_emulated trains" test $rc -eq 0
check "bf16_emulated says EMULATED" grep -q "^precision: bf16_emulated (EMULATED" <<< "$out"
"$SFVIT" train "$BASE" "${COMMON[@]}" train.name=part train.epochs=2 train.max_steps=11 \
  train.precision=bf16_emulated > part1.log 2>&1
check "partial bf16_emulated run stops with a checkpoint" grep -q "stopped after train.max_steps" part1.log
"$SFVIT" train --resume runs/part train.max_steps=0 > part2.log 2>&1
check "resumed run completes" grep -q "final val top-1" part2.log
check "resumed run is bf16_emulated (from its config)" grep -q "^precision: bf16_emulated" part2.log
losses runs/full/log.jsonl > full.txt
losses runs/part/log.jsonl > part.txt
check "resume: same number of steps" test "$(wc -l < full.txt)" -eq "$(wc -l < part.txt)"
check "resume: losses equal step for step" cmp -s full.txt part.txt
check "resume: final weights and moments bit-identical" \
  test "$(tensor_bytes runs/full/last.safetensors)" = "$(tensor_bytes runs/part/last.safetensors)"
"$SFVIT" train "$BASE" "${COMMON[@]}" train.name=fp32 train.epochs=2 > fp32.log 2>&1
losses runs/fp32/log.jsonl > fp32.txt
check "bf16_emulated losses differ from fp32 (rounding in effect)" test "$(cat fp32.txt)" != "$(cat full.txt)"

# ---- evaluation converts the weights once (the EMA's when swapped in): the trainer's
# evaluation of both equals sfvit eval of the saved weights, loss to 6 digits ----
"$SFVIT" train "$BASE" "${COMMON[@]}" train.name=ema16 train.epochs=1 train.ema_decay=0.9 \
  train.precision=bf16_emulated > ema16.log 2>&1
val_of() { grep '"val_loss"' runs/ema16/log.jsonl | tail -1 | sed "s/.*\"$1\":\([0-9.e+-]*\).*/\1/"; }
eval_loss() {
  "$SFVIT" eval "runs/ema16/$1" --data fm train.precision=bf16_emulated --json "$1.json" > /dev/null 2>&1 &&
    /usr/bin/python3 -c 'import json,sys; print("%.6f" % json.load(open(sys.argv[1]))["loss"])' "$1.json"
}
logged=$(val_of val_loss) logged_ema=$(val_of ema_val_loss)
got=$(eval_loss last.safetensors) got_ema=$(eval_loss ema.safetensors)
check "bf16_emulated: the trainer's val loss $logged is sfvit eval's of last.safetensors ($got)" \
  test -n "$logged" -a "$logged" = "$got"
check "bf16_emulated: the trainer's EMA val loss $logged_ema is sfvit eval's of ema.safetensors ($got_ema)" \
  test -n "$logged_ema" -a "$logged_ema" = "$got_ema"
check "... and the two differ (the EMA's weights were the ones converted)" test "$logged" != "$logged_ema"

# ---- checkpoints interchange ----
"$SFVIT" train "$BASE" "${COMMON[@]}" train.name=f2b train.epochs=2 train.max_steps=9 > f2b1.log 2>&1
out=$("$SFVIT" train --resume runs/f2b train.max_steps=0 train.precision=bf16_emulated 2>&1); rc=$?
check "fp32 run resumed in bf16_emulated finishes" test $rc -eq 0
check "... in bf16_emulated" grep -q "^precision: bf16_emulated" <<< "$out"
out=$("$SFVIT" train --resume runs/part train.epochs=3 train.precision=fp32 2>&1); rc=$?
check "bf16_emulated run resumed in fp32 finishes" test $rc -eq 0
check "... in fp32" grep -q "^precision: fp32" <<< "$out"

# ---- eval, bench, ablate ----
e32=$("$SFVIT" eval runs/full/best.safetensors --data fm 2>&1)
e16=$("$SFVIT" eval runs/full/best.safetensors --data fm train.precision=bf16_emulated 2>&1); rc=$?
check "eval in bf16_emulated" test $rc -eq 0
t32=$(grep -o 'top-1 [0-9.]*' <<< "$e32" | head -1 | awk '{print $2}')
t16=$(grep -o 'top-1 [0-9.]*' <<< "$e16" | head -1 | awk '{print $2}')
check "eval top-1 fp32 $t32 vs bf16_emulated $t16 within 2 points" \
  awk -v a="$t32" -v b="$t16" 'BEGIN{d=a-b; if(d<0)d=-d; exit !(a!="" && b!="" && d<=2)}'
out=$("$SFVIT" bench "$BASE" train.precision=bf16_emulated train.batch_size=8 --steps 1 --warmup 1 2>&1); rc=$?
check "bench in bf16_emulated" test $rc -eq 0
check "bench prints the kernels and the bf16 ceiling" \
  bash -c 'grep -q "^kernels:" <<< "$1" && grep -q "bf16 product ceiling" <<< "$1" && grep -q "^precision bf16_emulated" <<< "$1"' _ "$out"
# --no-products: the same steps with every product kernel skipped; the same activations
# (the arena's peak is the run's own), and the work the products would add.
arena_of() { sed -n 's/^  activation arena peak \([0-9.]*\) MiB.*/\1/p' <<< "$1"; }
skip=$("$SFVIT" bench "$BASE" train.precision=bf16_emulated train.batch_size=8 --steps 1 --warmup 1 --no-products 2>&1); rc=$?
check "bench --no-products runs and says so"   bash -c 'test $2 -eq 0 && grep -q "(--no-products: every product kernel skipped)" <<< "$1" && grep -q "without its product kernels; the products ([0-9.]* GFLOP a training step) would add [0-9]* ms at the sgemm peak" <<< "$1"' _ "$skip" $rc
check "... with the activations of the run with products ($(arena_of "$skip") MiB)"   test -n "$(arena_of "$skip")" -a "$(arena_of "$skip")" = "$(arena_of "$out")"
out=$("$SFVIT" bench --token-sweep --no-products 2>&1); rc=$?
check "--no-products with --token-sweep refused" bash -c 'test $2 -eq 2 && grep -q "no-products does not apply" <<< "$1"' _ "$out" $rc
# The kernels oneDNN ran: named by bench, none of them its reference kernel (f32 products on
# every machine with oneDNN, bf16 ones where native).
if ! grep -q "oneDNN: not built in" <<< "$info"; then
  out=$(SFVIT_GEMM=onednn "$SFVIT" bench "$BASE" train.batch_size=8 --steps 1 --warmup 1 --no-infer --no-products 2>&1); rc=$?
  check "--no-products: no product ran in oneDNN's kernels in the timed steps"     bash -c 'test $2 -eq 0 && ! grep -q "oneDNN kernels in the timed steps" <<< "$1"' _ "$out" $rc
  out=$(SFVIT_GEMM=onednn "$SFVIT" bench "$BASE" train.batch_size=8 --steps 1 --warmup 1 --no-infer 2>&1); rc=$?
  check "bench with SFVIT_GEMM=onednn names the kernels of its steps" \
    bash -c 'test $2 -eq 0 && grep -q "oneDNN kernels in the timed steps: [^ ]* f32 [0-9]* products" <<< "$1"' _ "$out" $rc
  check "no f32 product on oneDNN's reference kernel" bash -c '! grep -q "SLOW\|no optimized kernel" <<< "$1"' _ "$out"
  # OpenBLAS's generic kernels on an AVX2 CPU (what an OpenBLAS too old for the CPU picks):
  # auto sends fp32 products to oneDNN and says why; SFVIT_GEMM=openblas still gets OpenBLAS.
  if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
    out=$(OPENBLAS_CORETYPE=Prescott "$SFVIT" bench "$BASE" train.batch_size=8 --steps 1 --warmup 1 --no-infer 2>&1); rc=$?
    check "OpenBLAS on Prescott kernels: auto names oneDNN and the OPENBLAS_CORETYPE to set" \
      bash -c 'test $2 -eq 0 && grep -q "fp32 products: oneDNN f32 matmul (SFVIT_GEMM=auto: OpenBLAS has only its generic Prescott kernels for this CPU; OPENBLAS_CORETYPE=[A-Za-z]* gives" <<< "$1"' _ "$out" $rc
    check "... and the steps' products ran in oneDNN" grep -q "oneDNN kernels in the timed steps: [^ ]* f32 [0-9]* products" <<< "$out"
    out=$(OPENBLAS_CORETYPE=Prescott SFVIT_GEMM=openblas "$SFVIT" info "$BASE" 2>&1)
    check "SFVIT_GEMM=openblas keeps OpenBLAS's Prescott kernels" grep -q "fp32 products: OpenBLAS sgemm, Prescott kernels (SFVIT_GEMM=openblas)" <<< "$out"
    out=$(OPENBLAS_CORETYPE=Haswell "$SFVIT" info "$BASE" 2>&1)
    check "OpenBLAS on AVX2 kernels: auto keeps it" grep -q "fp32 products: OpenBLAS sgemm, Haswell kernels (SFVIT_GEMM=auto)" <<< "$out"
  fi
  if [ $native -eq 1 ]; then
    out=$("$SFVIT" bench "$BASE" train.precision=bf16 train.bf16_products=onednn train.batch_size=8 --steps 1 --warmup 1 \
          --no-infer 2>&1); rc=$?
    check "bench in bf16 names the bf16 kernels of its steps" \
      bash -c 'test $2 -eq 0 && grep -q "oneDNN kernels in the timed steps: [^ ]* bf16 [0-9]* products" <<< "$1"' _ "$out" $rc
    check "no bf16 product on oneDNN's reference kernel" bash -c '! grep -q "SLOW\|no optimized kernel" <<< "$1"' _ "$out"
    # batch 8 x 17 tokens: 136 rows, below the 1024 rows from which a product packs its weight;
    # batch 64: 1088 rows, the linear layers' products pack (SFVIT_PACK_WEIGHTS=0: none does)
    check "bench, products of 136 rows: none packs its weight" \
      grep -q "products run, 0 of them on a weight packed from fp32" <<< "$out"
    for pw in 1 0; do
      out=$(SFVIT_PACK_WEIGHTS=$pw "$SFVIT" bench "$BASE" train.precision=bf16 train.bf16_products=onednn \
            train.batch_size=64 --steps 1 --warmup 1 --no-infer 2>&1)
      n=$(sed -n 's/.*products run, \([0-9]*\) of them on a weight packed from fp32.*/\1/p' <<< "$out")
      if [ $pw -eq 1 ]; then
        check "bench, products of 1088 rows: the linear layers pack their weights ($n packed)" test "${n:-0}" -gt 0
      else
        check "bench with SFVIT_PACK_WEIGHTS=0: no weight packed" test "$n" = 0
      fi
    done
    out=$("$SFVIT" bench "$BASE" train.precision=bf16 train.bf16_products=onednn train.batch_size=8 --steps 1 --warmup 1 \
          --no-infer --no-products 2>&1); rc=$?
    check "bf16 --no-products: no bf16 product ran in oneDNN's kernels, and the bf16 rate is named" \
      bash -c 'test $2 -eq 0 && ! grep -q "oneDNN kernels in the timed steps" <<< "$1" && grep -q "ms at the bf16 ceiling$" <<< "$1"' _ "$out" $rc
    out=$("$SFVIT" bench "$BASE" train.precision=bf16 train.bf16_products=onednn train.batch_size=64 --steps 1 --warmup 1 \
          --no-infer --no-products 2>&1); rc=$?
    check "bf16 --no-products at 1088 rows: the weights are still packed, no product runs" \
      bash -c 'test $2 -eq 0 && grep -q "(0 products run, [1-9][0-9]* of them on a weight packed from fp32)" <<< "$1" && ! grep -q "oneDNN kernels in the timed steps" <<< "$1"' _ "$out" $rc
  fi
fi
out=$("$SFVIT" ablate "$BASE" "${COMMON[@]}" train.name=grid train.max_steps=3 train.precision=fp32,bf16_emulated 2>&1); rc=$?
check "ablate with a precision axis" test $rc -eq 0
check "ablate cells ran in each precision" \
  bash -c 'grep -q "^precision: fp32" <<< "$1" && grep -q "^precision: bf16_emulated" <<< "$1"' _ "$out"

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
