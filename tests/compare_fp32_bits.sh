#!/usr/bin/env bash
# Bit-for-bit check of the fp32 path between two builds (e.g. before and after a change to the
# product code): every golden model (tests/golden/models) through `sfvit dump` with each
# binary, same threads, default SFVIT_GEMM and SFVIT_GEMM=openblas; the output files (logits,
# loss, every gradient) must be byte-identical. Not part of `meson test` (it needs a second
# build); run by hand:
#   bash tests/compare_fp32_bits.sh OLD/build/sfvit build/sfvit
# PRECISION=bf16_emulated runs the same comparison in that precision (for a change that must
# not move the bf16 numbers either).
set -uo pipefail
OLD=$(realpath "$1")
NEW=$(realpath "$2")
PRECISION=${PRECISION:-fp32}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
W=$(mktemp -d /tmp/sfvit-bits-XXXXXX)
trap 'rm -rf "$W"' EXIT
source "$ROOT/tests/lib.sh"
for dir in "$ROOT"/tests/golden/models/*/; do
  c=$(basename "$dir")
  for gemm in auto openblas; do
    for b in OLD NEW; do
      SFVIT_GEMM=$gemm SFVIT_THREADS=2 "${!b}" dump "$dir/config.yaml" train.precision="$PRECISION" --weights "$dir/weights.safetensors" \
        --input "$dir/input.safetensors" --out "$W/$c.$gemm.$b" > /dev/null 2>&1
    done
    check "$c (SFVIT_GEMM=$gemm): $PRECISION dump byte-identical" cmp -s "$W/$c.$gemm.OLD" "$W/$c.$gemm.NEW"
  done
done
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
