#!/usr/bin/env bash
# End-to-end check of `sfvit dump` against the PyTorch golden models, and of its refusals.
# For every case in tests/golden/models/ (written by tests/golden/models.py) the real command
# runs on the committed config, weights and input, and its output file is compared with the
# expected logits, loss and parameter gradients by `test_golden_models --compare` (same
# tolerances as the in-process test: 1e-4 logits/loss, 1e-3 per gradient, relative to the
# largest expected magnitude). Then weights files that do not fit the model (a missing key,
# a wrong shape, a truncated file, no file) and an input of the wrong size must be refused
# with a non-zero exit, a message naming the key or the file, and no output file.
# The broken weights are made from a golden file by editing its JSON header in place with
# same-length replacements, so everything else in the file stays valid.
# Usage: test_golden_dump.sh SFVIT_BINARY SOURCE_ROOT
set -uo pipefail
SFVIT=$(realpath "$1")
ROOT=$(realpath "$2")
GOLD=$ROOT/tests/golden/models
CMP=$(dirname "$SFVIT")/tests/test_golden_models
W=$(mktemp -d /tmp/sfvit-dump-XXXXXX)
[ -n "${SFVIT_KEEP_TEST_DIR:-}" ] || trap 'rm -rf "$W"' EXIT; echo "work dir: $W"
cd "$W"
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   $*"; }
bad() { failed=$((failed + 1)); echo "FAIL $*"; }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }

if [ ! -x "$CMP" ]; then
  echo "comparison program $CMP not built (run the tests from the meson build directory)"
  echo "0 passed, 1 failed"; exit 1
fi

# ---- every golden case through the real command ----
n=0
for dir in "$GOLD"/*/; do
  c=$(basename "$dir")
  [ -f "$dir/config.yaml" ] || continue
  n=$((n + 1))
  out=$("$SFVIT" dump "$dir/config.yaml" --weights "$dir/weights.safetensors" --input "$dir/input.safetensors" \
        --out "$c.out.safetensors" 2>&1); rc=$?
  check "$c: dump exits 0" test $rc -eq 0
  [ $rc -eq 0 ] || { echo "$out"; continue; }
  res=$("$CMP" --compare "$c.out.safetensors" "$dir/expected.safetensors" 2>&1); rc=$?
  echo "$res" | grep -E '^  dump|rel err|gradients|FAIL' | sed 's/^/     /'
  check "$c: dump output matches PyTorch" test $rc -eq 0
done
check "golden cases found" test $n -gt 0

# ---- refusals ----
C=$GOLD/vit_mixed_msa_sima
WTS=$C/weights.safetensors
refused() { # name, message regexp, dump args...
  local what=$1 re=$2; shift 2
  rm -f refused.out
  local out rc
  out=$("$SFVIT" dump "$C/config.yaml" "$@" --out refused.out 2>&1); rc=$?
  check "$what: non-zero exit" test $rc -ne 0
  if grep -Eq "$re" <<< "$out"; then ok "$what: message names it"; else bad "$what: message names it ($out)"; fi
  check "$what: no output file" test ! -e refused.out
}
check "perl is available (header edits)" command -v perl
# head.bias renamed to head.bia_: one key missing, one unexpected
perl -0777 -pe 's/"head\.bias"/"head.bia_"/' "$WTS" > missing.safetensors
check "missing-key file differs from the original" test "$(cmp -s missing.safetensors "$WTS"; echo $?)" -eq 1
refused "missing key" 'missing.*head\.bias|head\.bias.*missing|^ +head\.bias$' \
  --weights missing.safetensors --input "$C/input.safetensors"
# head.weight [10,16] stored as [16,10]: same bytes, wrong shape
perl -0777 -pe 's/("head\.weight":\{"dtype":"F32","shape":)\[10,16\]/${1}[16,10]/' "$WTS" > shape.safetensors
check "wrong-shape file differs from the original" test "$(cmp -s shape.safetensors "$WTS"; echo $?)" -eq 1
refused "wrong shape" 'head\.weight.*(shape|16, 10)' --weights shape.safetensors --input "$C/input.safetensors"
# cut inside the tensor data
head -c 5000 "$WTS" > truncated.safetensors
refused "truncated file" 'truncated\.safetensors' --weights truncated.safetensors --input "$C/input.safetensors"
refused "no weights file" 'nonexistent\.safetensors' --weights nonexistent.safetensors --input "$C/input.safetensors"
# a 64-px input for a 32-px model
refused "input of the wrong size" 'input\.safetensors.*(fit|expected)' \
  --weights "$WTS" --input "$GOLD/soft/input.safetensors"

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
