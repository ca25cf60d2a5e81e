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

n=0
for dir in "$GOLD"/*/; do
  c=$(basename "$dir")
  [ -f "$dir/config.yaml" ] || continue
  n=$((n + 1))
  for p in fp32 bf16_emulated; do
    "$SFVIT" dump "$dir/config.yaml" train.precision=$p --weights "$dir/weights.safetensors" \
      --input "$dir/input.safetensors" --out "$c.$p.safetensors" > "$c.$p.log" 2>&1
    check "$c: dump in $p exits 0" test $? -eq 0
  done
  res=$("$CMP" --compare "$c.bf16_emulated.safetensors" "$dir/expected.safetensors" 0.03125 0.5 2>&1); rc=$?
  echo "$res" | grep -E '^  dump|rel err|FAIL' | sed 's/^/     /'
  check "$c: bf16_emulated within bf16 tolerances of PyTorch float64" test $rc -eq 0
  "$CMP" --compare "$c.bf16_emulated.safetensors" "$c.fp32.safetensors" 1e-7 1e-7 > /dev/null 2>&1
  check "$c: bf16_emulated differs from fp32 (rounding in effect)" test $? -ne 0
done
check "golden cases found" test $n -gt 0
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
