#!/usr/bin/env bash
# sfvit bench --alternate KEY=VALUE: the run as configured (A) and with one setting changed
# (B), timed in pairs of steps in one process. What is checked is what does not depend on the
# machine's speed: that each setting's steps ran as a run of that setting alone would (each
# setting's activation arena peaks where a plain `sfvit bench` of that setting peaks, to the
# 0.1 MiB printed, and the two differ), that the verdict's numbers are consistent (the
# interval holds the median, and is printed only from 6 pairs on), and that a setting which
# cannot change between steps, changes nothing or does not apply to the run is refused by name.
# Usage: test_bench_alternate.sh SFVIT_BINARY SOURCE_ROOT
set -uo pipefail
SFVIT=$(realpath "$1")
ROOT=$(realpath "$2")
W=$(mktemp -d /tmp/sfvit-alternate-XXXXXX)
trap 'rm -rf "$W"' EXIT
cd "$W"
source "$ROOT/tests/lib.sh"
SIMA=$ROOT/configs/fmnist_sima.yaml
FAST=(train.batch_size=8 --warmup 1)

value() { sed -n "s/^$1 //p" <<< "$2"; }
arena_plain() { "$SFVIT" bench "$@" --steps 1 --no-infer 2>&1 | sed -n 's/^  activation arena peak \([0-9.]*\) MiB.*/\1/p'; }
# awk's test of a relation between numbers: holds "1.0 <= 1.2"
holds() { awk "BEGIN { exit !($1) }"; }

# ---- fp32 against bf16_emulated: each setting's steps are that setting's ----
out=$("$SFVIT" bench "$SIMA" "${FAST[@]}" --steps 6 --alternate train.precision=bf16_emulated 2>&1); rc=$?
check "fp32 / bf16_emulated: runs (status 0)" test $rc -eq 0
[ $rc -eq 0 ] || echo "$out" | tail -20
check "the header names both settings" \
  grep -q "A: train.precision=fp32 (as configured), B: train.precision=bf16_emulated; 6 timed" <<< "$out"
check "B's own start line" grep -q "^precision: bf16_emulated (EMULATED" <<< "$out"
a=$(value alternate_a_arena_mib "$out") b=$(value alternate_b_arena_mib "$out")
pa=$(arena_plain "$SIMA" "${FAST[@]}") pb=$(arena_plain "$SIMA" "${FAST[@]}" train.precision=bf16_emulated)
check "A's arena peak ($a MiB) is a plain fp32 run's ($pa)" test -n "$a" -a "$a" = "$pa"
check "B's arena peak ($b MiB) is a plain bf16_emulated run's ($pb)" test -n "$b" -a "$b" = "$pb"
check "B keeps less than A (bf16 activations)" holds "${b:-0} < ${a:-0}"
r=$(value alternate_ratio "$out") lo=$(value alternate_ratio_lo "$out") hi=$(value alternate_ratio_hi "$out")
check "the interval holds the median ($lo <= $r <= $hi)" holds "${lo:-1} <= ${r:-0} && ${r:-0} <= ${hi:-0} && ${lo:-0} > 0"
check "a verdict" grep -Eq "95 % interval [0-9.]+-[0-9.]+: (B is faster|B is slower|no difference shown)" <<< "$out"
check "the per-phase table" grep -Eq "^  train step +[0-9.]+ +[0-9.]+ +[0-9.]+$" <<< "$out"

# ---- SimA's product order: the model switches between steps ----
out=$("$SFVIT" bench "$SIMA" "${FAST[@]}" model.sima_order=qk_first --steps 2 --alternate model.sima_order=kv_first 2>&1); rc=$?
check "qk_first / kv_first: runs (status 0)" test $rc -eq 0
a=$(value alternate_a_arena_mib "$out") b=$(value alternate_b_arena_mib "$out")
pa=$(arena_plain "$SIMA" "${FAST[@]}" model.sima_order=qk_first) pb=$(arena_plain "$SIMA" "${FAST[@]}" model.sima_order=kv_first)
check "A's arena peak ($a MiB) is a plain qk_first run's ($pa)" test -n "$a" -a "$a" = "$pa"
check "B's arena peak ($b MiB) is a plain kv_first run's ($pb)" test -n "$b" -a "$b" = "$pb"
check "the two orders keep different activations ($a, $b MiB)" test "$pa" != "$pb"
check "2 pairs: no interval, and says why" grep -q "no 95 % interval from fewer than 6 pairs" <<< "$out"
check "2 pairs: no interval lines" bash -c '! grep -q "^alternate_ratio_lo" <<< "$1"' _ "$out"

# ---- large im2col columns in bands or whole: a SOFT model at 128², whose 32 -> 32 stem conv
# has 1.2 M floats of columns an image (bands of 14 output rows) ----
BANDS=("$ROOT/configs/fmnist_soft.yaml" model.img_size=128)
out=$("$SFVIT" bench "${BANDS[@]}" "${FAST[@]}" --steps 2 --alternate SFVIT_CONV_BANDS=0 2>&1); rc=$?
check "bands / whole: runs (status 0)" test $rc -eq 0
check "bands / whole: the header names both" \
  grep -q "A: SFVIT_CONV_BANDS=1 (as configured), B: SFVIT_CONV_BANDS=0" <<< "$out"
a=$(value alternate_a_arena_mib "$out") b=$(value alternate_b_arena_mib "$out")
pa=$(arena_plain "${BANDS[@]}" "${FAST[@]}") pb=$(SFVIT_CONV_BANDS=0 arena_plain "${BANDS[@]}" "${FAST[@]}")
check "bands: A's arena peak ($a MiB) is a plain run's ($pa)" test -n "$a" -a "$a" = "$pa"
check "whole: B's arena peak ($b MiB) is a plain SFVIT_CONV_BANDS=0 run's ($pb)" test -n "$b" -a "$b" = "$pb"
check "whole columns take more of the arena than bands ($pb > $pa MiB)" holds "${pb:-0} > ${pa:-0}"

info=$("$SFVIT" info "$SIMA" 2>&1)

# ---- refused, by name ----
refused() { # WHAT STATUS PATTERN ARGS...
  local what=$1 want=$2 pattern=$3 out rc; shift 3
  out=$("$SFVIT" bench "$@" 2>&1); rc=$?
  check "$what: status $want" test $rc -eq "$want"
  check "$what: the message says why" grep -q -- "$pattern" <<< "$out"
  [ $rc -eq "$want" ] && grep -q -- "$pattern" <<< "$out" || echo "$out" | tail -3
}
refused "the run as configured" 2 "that is the run as configured" "$SIMA" --alternate train.precision=fp32
refused "a setting of the model's shape" 2 "'model.depth' cannot change between steps (KEY: train.precision" \
  "$SIMA" --alternate model.depth=3
refused "no '='" 2 "takes KEY=VALUE" "$SIMA" --alternate train.precision
refused "an unknown precision" 2 "train.precision" "$SIMA" --alternate train.precision=fp64
refused "SimA's order in a model without SimA" 2 "this model has no SimA block" \
  "$ROOT/configs/fmnist_msa.yaml" --alternate model.sima_order=kv_first
refused "packing in an fp32 run" 2 "SFVIT_PACK_WEIGHTS applies to bf16 products on oneDNN's kernels; this run's products are fp32" \
  "$SIMA" --alternate SFVIT_PACK_WEIGHTS=0
refused "small products in an emulated run" 2 "SFVIT_BF16_SMALL_MACS applies to bf16 products on oneDNN's kernels" \
  "$SIMA" train.precision=bf16_emulated --alternate SFVIT_BF16_SMALL_MACS=0
refused "a small-product threshold that is no number" 2 "takes a non-negative integer" \
  "$SIMA" train.precision=bf16_emulated --alternate SFVIT_BF16_SMALL_MACS=many
refused "the kernels of an fp32 run" 2 "the products' kernels of a bf16 run; this run is fp32" \
  "$SIMA" --alternate train.bf16_products=fp32
refused "with --token-sweep" 2 "not --token-sweep" --token-sweep --alternate train.precision=bf16_emulated
refused "a bands value" 2 "SFVIT_CONV_BANDS takes 0 or 1" "$SIMA" --alternate SFVIT_CONV_BANDS=2
refused "bands as configured" 2 "nothing to compare" "$SIMA" --alternate SFVIT_CONV_BANDS=1

# ---- the fp32 products' backend: B's products run on oneDNN, A's on OpenBLAS, and back ----
onednn_runs() { sed -n "s/^  products run on oneDNN a step: A \([0-9]*\), B \([0-9]*\)$/\1 \2/p" <<< "$1"; }
if grep -q "fp32 products: OpenBLAS.*; oneDNN 2" <<< "$info"; then
  out=$("$SFVIT" bench "$SIMA" "${FAST[@]}" --steps 2 --alternate SFVIT_GEMM=onednn 2>&1); rc=$?
  check "auto / onednn: runs (status 0)" test $rc -eq 0
  check "auto / onednn: the header names both" \
    grep -q "A: SFVIT_GEMM=auto (as configured), B: SFVIT_GEMM=onednn" <<< "$out"
  read -r na nb <<< "$(onednn_runs "$out")"
  check "auto / onednn: A ran no product on oneDNN, B ran its products there (${na:-?}, ${nb:-?} a step)" \
    test "${na:-x}" = 0 -a "${nb:-0}" -gt 100
  check "auto / onednn: both backends named" \
    grep -q "fp32 products: A OpenBLAS sgemm.*; B oneDNN f32 matmul (SFVIT_GEMM=onednn)" <<< "$out"
  a=$(value alternate_a_arena_mib "$out") b=$(value alternate_b_arena_mib "$out") pa=$(arena_plain "$SIMA" "${FAST[@]}")
  check "auto / onednn: the same activations ($a, $b MiB; a plain run $pa)" test -n "$a" -a "$a" = "$pa" -a "$b" = "$pa"
  out=$(SFVIT_GEMM=onednn "$SFVIT" bench "$SIMA" "${FAST[@]}" --steps 2 --alternate SFVIT_GEMM=auto 2>&1); rc=$?
  check "onednn / auto: runs (status 0)" test $rc -eq 0
  read -r na nb <<< "$(onednn_runs "$out")"
  check "onednn / auto: A on oneDNN, B not (${na:-?}, ${nb:-?} a step)" test "${na:-0}" -gt 100 -a "${nb:-x}" = 0
  SFVIT_GEMM=onednn refused "SFVIT_GEMM as configured" 2 "nothing to compare" "$SIMA" --alternate SFVIT_GEMM=onednn
  refused "SFVIT_GEMM=openblas" 2 "openblas sets OpenBLAS's own threads when the process starts" \
    "$SIMA" --alternate SFVIT_GEMM=openblas
  SFVIT_GEMM=openblas refused "from SFVIT_GEMM=openblas" 2 "this run has SFVIT_GEMM=openblas" "$SIMA" \
    --alternate SFVIT_GEMM=onednn
  refused "an unknown backend" 2 "SFVIT_GEMM takes auto or onednn here" "$SIMA" --alternate SFVIT_GEMM=mkl
elif ! grep -q "oneDNN 2" <<< "$info"; then
  refused "SFVIT_GEMM without oneDNN" 1 "built without oneDNN" "$SIMA" --alternate SFVIT_GEMM=onednn
else
  echo "auto already runs the fp32 products on oneDNN here (OpenBLAS has no kernels for this CPU):" \
    "no other backend to switch to"
  refused "SFVIT_GEMM as auto takes it" 2 "nothing to compare" "$SIMA" --alternate SFVIT_GEMM=onednn
fi

# ---- native bf16: B in bf16, and the oneDNN-only settings; elsewhere bf16 is refused ----
if grep -q "bf16 matmul: .*(native)" <<< "$info"; then
  out=$("$SFVIT" bench "$SIMA" "${FAST[@]}" --steps 2 --alternate train.precision=bf16 2>&1); rc=$?
  check "native: fp32 / bf16 runs (status 0)" test $rc -eq 0
  a=$(value alternate_a_arena_mib "$out") b=$(value alternate_b_arena_mib "$out")
  check "native: B keeps less than A ($b < $a MiB)" holds "${b:-0} < ${a:-0}"
  out=$("$SFVIT" bench "$SIMA" "${FAST[@]}" train.precision=bf16 train.bf16_products=onednn --steps 2 \
    --alternate SFVIT_BF16_SMALL_MACS=0 2>&1); rc=$?
  check "native: small products on oneDNN or not (status 0)" test $rc -eq 0
  check "native: the header names both thresholds" \
    grep -q "A: SFVIT_BF16_SMALL_MACS=1000000 (as configured), B: SFVIT_BF16_SMALL_MACS=0" <<< "$out"
  out=$("$SFVIT" bench "$SIMA" "${FAST[@]}" train.precision=bf16 train.bf16_products=onednn --steps 2 \
    --alternate SFVIT_PACK_WEIGHTS=0 2>&1); rc=$?
  check "native: packed weights or copies (status 0)" test $rc -eq 0
else
  refused "bf16 without native bf16" 1 "needs native bf16 products" "$SIMA" --alternate train.precision=bf16
fi

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
