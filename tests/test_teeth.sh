#!/usr/bin/env bash
# The gradient checks have teeth: each hand-derived backward is broken on purpose
# (SFVIT_BREAK_BACKWARD=<op>, src/ops/ops_internal.h) and every check layer that covers it must
# then fail, naming that op: the op-level finite-difference check, the golden comparison with
# PyTorch, and the whole-model directional check of each tiny model that uses the op.
# A layer that kept passing with a broken backward would prove nothing; this test fails then.
# Usage: test_teeth.sh SFVIT_BINARY SOURCE_ROOT
set -uo pipefail
SFVIT=$(realpath "$1")
ROOT=$(realpath "$2")
T=$(dirname "$SFVIT")/tests
export SFVIT_TEST_DATA=$ROOT/tests
source "$ROOT/tests/lib.sh"

# fails OP WHAT PATTERN CMD...: with OP's backward broken, CMD exits non-zero and prints a
# failure matching PATTERN (so it failed for OP, not for something else).
fails() {
  local op=$1 what=$2 pattern=$3 out rc; shift 3
  out=$(SFVIT_BREAK_BACKWARD=$op "$@" 2>&1); rc=$?
  if [ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -Eq "$pattern" <<< "$out"; then
    ok "$op broken: $what fails"
  else
    bad "$op broken: $what did not fail as expected (exit $rc; wanted a failure matching '$pattern')"
    grep -E "FAIL|error" <<< "$out" | head -5 | sed 's/^/    /'
  fi
}

# op        op-level program    op-level failure (~ a space)  golden case  tiny models using it (_ a space)
table=(
  "l1norm_tokens  test_ops_attention  l1norm|l1n\\+sima      l1norm_tokens  vit_sima_l1,xcit_sima_l1,cvt_sima_l1"
  "l2norm_tokens  test_ops_attention  l2norm                 l2norm_tokens  xcit_sima_l2"
  "sima_qk_first  test_ops_attention  sima~qk-first          sima_qk_first  xcit_sima_l1,xcit_sima_l2,cvt_sima_l1"
  "sima_kv_first  test_ops_attention  sima~kv-first          sima_kv_first  vit_sima_l1,xcit_sima_l1,cvt_sima_l1"
  "xca            test_ops_attention  xca                    xca            xcit_xca"
  "msa            test_ops_attention  msa                    msa            soft,cvt_msa"
  "gauss_kernel   test_ops_soft       gauss                  gauss_kernel   soft,soft++,soft_fixed,vit_soft,vit_soft++"
  "nr_pinv        test_ops_soft       nr_pinv                nr_pinv        soft,soft_fixed,vit_soft"
  "soft_symnorm   test_ops_soft       symnorm|soft\\+\\+     soft_symnorm   soft++,vit_soft++"
  "layernorm      test_ops_conv_norm  layernorm              layernorm      vit_sima_l1,vit_msa,xcit_xca,soft,cvt_msa,vit_soft"
  "batchnorm2d    test_ops_conv_norm  batchnorm2d~train      batchnorm2d    cvt_msa,cvt_sima_l1"
  "conv2d         test_ops_conv_norm  conv                   conv2d         vit_sima_l1,xcit_xca,soft,cvt_msa"
  "linear         test_ops_basic      linear                 linear         vit_msa,vit_soft"
  "gelu           test_ops_basic      gelu                   gelu           vit_msa"
  "quick_gelu     test_ops_basic      quick_gelu             quick_gelu     cvt_msa,cvt_sima_l1"
  "slice_tokens   test_ops_basic      slice_tokens           slice_tokens   cvt_msa,cvt_sima_l1"
  "concat_tokens  test_ops_basic      concat_tokens          concat_tokens  cvt_msa,cvt_sima_l1"
  "softmax        test_ops_basic      softmax                softmax        -"
  "cross_entropy  test_ops_basic      cross_entropy          cross_entropy  -"
)

# One table row: every layer that covers OP, with OP broken.
row_checks() {
  local op prog pattern golden models m label
  read -r op prog pattern golden models <<< "$1"
  fails "$op" "$prog" "FAIL.*(${pattern//\~/ })" "$T/$prog"
  fails "$op" "golden $golden" "golden $golden.* FAIL" "$T/test_golden_ops" "$golden"
  [ "$models" = - ] && return
  for m in ${models//,/ }; do
    label="model ${m//_/ }"
    fails "$op" "$label gradcheck" "FAIL.*${label//+/\\+}: .*directional gradient error" \
      "$T/test_models" gradcheck "$label"
  done
}

# Rows run two at a time, one thread each (the programs are small: threads buy little).
export SFVIT_THREADS=1
W=$(mktemp -d /tmp/sfvit-teeth-XXXXXX)
trap 'rm -rf "$W"' EXIT
for i in "${!table[@]}"; do
  (passed=0 failed=0; row_checks "${table[$i]}" > "$W/$i.out") &
  [ $((i % 2)) -eq 1 ] && wait
done
wait
for i in "${!table[@]}"; do
  cat "$W/$i.out"
  passed=$((passed + $(grep -c '^ok ' "$W/$i.out")))
  failed=$((failed + $(grep -c '^FAIL ' "$W/$i.out")))
done

# Without the switch every layer passes (the same programs, so the failures above come from
# the broken backward alone).
check "unbroken: whole-model gradient checks pass" "$T/test_models" gradcheck > /dev/null
echo "teeth: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
