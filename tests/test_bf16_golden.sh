#!/usr/bin/env bash
# The golden models (tests/golden/models: DeiT/ViT MSA and SimA l1/l2/none, XCiT SimA and XCA,
# SOFT and SOFT++, CvT) through `sfvit dump` in train.precision=bf16_emulated, against the same
# PyTorch float64 outputs as the fp32 test (test_golden_dump.sh), with bf16 tolerances:
#   logits and loss: max |got - want| / max |want| <= 2^-5 (8u, u = 2^-8 the unit roundoff of
#     bf16's 8-bit significand; measured at most 1.1e-2 = 2.8u over the cases, AMD EPYC Zen 3);
#   every parameter gradient, each relative to its own largest entry: <= 0.5. Gradients of the
#     first layers pass back through every rounded product, and a gradient whose entries
#     cancel (a bias, a norm scale) can lose most of its relative accuracy: measured at most
#     0.37 (vit_sima_l2_1head_relu, blocks.0.mlp.fc1.bias). This catches a missing or wrong
#     term, not bf16's own noise; the per-op bounds are in test_bf16. A gradient that is zero by
#     construction (CvT's key biases) must stay below 2^-5 of the largest expected gradient.
# And the rounding must be in effect: each bf16 output must differ from the fp32 dump of the
# same case (the comparison with a 1e-7 tolerance must fail).
# Where oneDNN has native bf16 (AVX512_BF16, AMX_BF16), every case runs again in
# train.precision=bf16 against the same PyTorch outputs and tolerances: the whole models on the
# native kernels, bf16-only activations included. Against the emulation the native run differs
# by more than its summation order (a last-bit difference flips a later bf16 rounding: up to
# 2.6e-2 of a gradient's largest entry, Emerald Rapids), so PyTorch stays the reference. Elsewhere
# those cases are reported as skipped, with the reason. The native run names its kernels
# (train.bf16_products=onednn), since auto takes fp32 kernels where those are faster, and puts
# every product on them (SFVIT_BF16_SMALL_MACS=0: the golden models' products are small, and
# by default the smallest run on fp32 kernels); the default mix must pass the same tolerances;
# and a run on fp32 kernels (train.bf16_products=fp32) must give the bf16_emulated dump byte for
# byte.
# Usage: test_bf16_golden.sh SFVIT_BINARY SOURCE_ROOT
set -uo pipefail
SFVIT=$(realpath "$1")
ROOT=$(realpath "$2")
GOLD=$ROOT/tests/golden/models
CMP=$(dirname "$SFVIT")/tests/test_golden_models
W=$(mktemp -d /tmp/sfvit-bf16g-XXXXXX)
[ -n "${SFVIT_KEEP_TEST_DIR:-}" ] || trap 'rm -rf "$W"' EXIT; echo "work dir: $W"
cd "$W"
source "$ROOT/tests/lib.sh"
[ -x "$CMP" ] || { echo "comparison program $CMP not built"; echo "0 passed, 1 failed"; exit 1; }

info=$("$SFVIT" info "$(ls -d "$GOLD"/*/ | head -1)config.yaml" 2>&1)
native=0
grep -q "bf16 matmul: .*(native)" <<< "$info" && native=1
precisions="fp32 bf16_emulated"
if [ $native -eq 1 ]; then
  precisions="$precisions bf16"
else
  echo "skipped: the native bf16 cases (no native bf16 here: $(grep -o 'oneDNN [0-9].*' <<< "$info"))"
fi

n=0
for dir in "$GOLD"/*/; do
  c=$(basename "$dir")
  [ -f "$dir/config.yaml" ] || continue
  n=$((n + 1))
  for p in $precisions; do
    SFVIT_BF16_SMALL_MACS=0 "$SFVIT" dump "$dir/config.yaml" train.precision=$p train.bf16_products=onednn \
      --weights "$dir/weights.safetensors" --input "$dir/input.safetensors" --out "$c.$p.safetensors" > "$c.$p.log" 2>&1
    check "$c: dump in $p exits 0" test $? -eq 0
  done
  if [ $native -eq 1 ]; then
    "$SFVIT" dump "$dir/config.yaml" train.precision=bf16 train.bf16_products=onednn --weights "$dir/weights.safetensors" \
      --input "$dir/input.safetensors" --out "$c.bf16_mixed.safetensors" > "$c.bf16_mixed.log" 2>&1
    check "$c: dump in bf16, small products on fp32 kernels (the default), exits 0" test $? -eq 0
    "$SFVIT" dump "$dir/config.yaml" train.precision=bf16 train.bf16_products=fp32 --weights "$dir/weights.safetensors" \
      --input "$dir/input.safetensors" --out "$c.bf16_fp32k.safetensors" > "$c.bf16_fp32k.log" 2>&1
    check "$c: bf16 on fp32 kernels = bf16_emulated, byte for byte" cmp -s "$c.bf16_fp32k.safetensors" "$c.bf16_emulated.safetensors"
    check "$c: ... and not the native kernels' bytes" bash -c '! cmp -s "$1" "$2"' _ "$c.bf16_fp32k.safetensors" "$c.bf16.safetensors"
  fi
  res=$("$CMP" --compare "$c.bf16_emulated.safetensors" "$dir/expected.safetensors" 0.03125 0.5 2>&1); rc=$?
  echo "$res" | grep -E '^  dump|rel err|FAIL' | sed 's/^/     /'
  check "$c: bf16_emulated within bf16 tolerances of PyTorch float64" test $rc -eq 0
  "$CMP" --compare "$c.bf16_emulated.safetensors" "$c.fp32.safetensors" 1e-7 1e-7 > /dev/null 2>&1
  check "$c: bf16_emulated differs from fp32 (rounding in effect)" test $? -ne 0
  if [ $native -eq 1 ]; then
    res=$("$CMP" --compare "$c.bf16.safetensors" "$dir/expected.safetensors" 0.03125 0.5 2>&1)
    check "$c: native bf16 within bf16 tolerances of PyTorch float64" test $? -eq 0
    echo "$res" | grep -E 'FAIL' | sed 's/^/     /'
    "$CMP" --compare "$c.bf16.safetensors" "$c.fp32.safetensors" 1e-7 1e-7 > /dev/null 2>&1
    check "$c: native bf16 differs from fp32" test $? -ne 0
    res=$("$CMP" --compare "$c.bf16_mixed.safetensors" "$dir/expected.safetensors" 0.03125 0.5 2>&1)
    check "$c: native bf16 with the small products on fp32 kernels within the same tolerances" test $? -eq 0
    echo "$res" | grep -E 'FAIL' | sed 's/^/     /'
  fi
done
check "golden cases found" test $n -gt 0
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
