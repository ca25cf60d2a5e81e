#!/usr/bin/env bash
# Tests of bench/bf16_checklist in its QUICK mode (every row on the Fashion-MNIST model with 2
# steps, bench/compare left out): every row runs on this machine and keeps its output, the bf16
# rows where oneDNN has native bf16 and left out by name elsewhere, each --alternate row with
# its ratio; a row whose command fails is reported FAILED by name, the rest still run, and the
# status is 1; a build folder without sfvit is refused (status 2). What the rows measure is not
# tested here (their commands have their own tests).
# Usage: test_bf16_checklist.sh SFVIT_BINARY SOURCE_ROOT
set -uo pipefail
SFVIT=$(realpath "$1")
ROOT=$(realpath "$2")
BUILD=$(dirname "$SFVIT")
W=$(mktemp -d /tmp/sfvit-bf16-checklist-XXXXXX)
[ -n "${SFVIT_KEEP_TEST_DIR:-}" ] || trap 'rm -rf "$W"' EXIT; echo "work dir: $W"
source "$ROOT/tests/lib.sh"

QUICK=1 bash "$ROOT/bench/bf16_checklist" "$BUILD" "$W/run" > "$W/run.log" 2>&1
rc=$?
S=$W/run/summary.md
cat "$S" 2>/dev/null | cut -c1-160 | head -30
check "QUICK run: status 0" test $rc -eq 0
check "the summary names the CPU and the threads" grep -q "^- CPU: .*flags: " "$S"
check "the summary says it is no measurement" grep -q "^- QUICK=1: .*not a measurement" "$S"
if "$SFVIT" info "$ROOT/configs/fmnist_sima.yaml" 2>&1 | grep -q "(native)"; then
  check "native: the kernels a bf16 run's timed steps ran, and whether AMX" \
    grep -Eq "^- kernels in the timed steps: .*; AMX kernels: (yes|no); reference kernels or SLOW lines: 0$" "$S"
  check "native: what train.bf16_products=auto took" grep -q "^- auto: " "$S"
  for row in bf16_vs_fp32 packing small_products bands_soft bands_xcit; do
    check "native: row $row with its ratio, kept in its file" \
      bash -c "grep -Eq '^- $row: B / A step [0-9.]+ ' '$S' && test -s '$W/run/$row.txt'"
  done
  check "native: the bf16 floor" grep -Eq "^- floor, bf16: [0-9.]+ ms a step without products" "$S"
  check "native: test_bf16_native passed" grep -Eq "^- test_bf16_native: .*[0-9]+ passed, 0 failed" "$S"
  check "native: bench/gemm's small-product table in the summary" grep -q "^    shape .*oneDNN .*fp32 .*ratio" "$S"
else
  check "not native: the bf16 rows left out, said so" grep -q "^- no native bf16 here" "$S"
  check "not native: no bf16 row, no small-product table" \
    bash -c "! grep -Eq '^- (packing|small_products|bands_soft|floor, bf16):|small bf16 products' '$S'"
fi
check "the fp32 floor" grep -Eq "^- floor, fp32: [0-9.]+ ms a step without products \(forward [0-9.]+, backward [0-9.]+, update [0-9.]+\)" "$S"
check "fp32 products on the other backend against the default, with its ratio" grep -Eq "^- gemm: B / A step [0-9.]+ " "$S"
check "bench/linear's output kept" test -s "$W/run/bench_linear.txt"
check "bench/compare left out in QUICK" grep -q "^- bench/compare: left out (QUICK=1)" "$S"
check "no row failed" bash -c "! grep -q FAILED '$S'"

# A build folder whose sfvit fails one row: that row FAILED with its status, the others run.
mkdir -p "$W/fake"
cat > "$W/fake/sfvit" << EOF
#!/bin/bash
case "\$*" in *"--alternate SFVIT_GEMM="*) echo "made to fail" >&2; exit 3 ;; esac
[ -n "\${SFVIT_GEMM:-}" ] && { echo "made to fail" >&2; exit 3; }
exec "$SFVIT" "\$@"
EOF
chmod +x "$W/fake/sfvit"
QUICK=1 bash "$ROOT/bench/bf16_checklist" "$W/fake" "$W/run2" > "$W/run2.log" 2>&1
rc=$?
S2=$W/run2/summary.md
check "a failing row: status 1" test $rc -eq 1
check "the failing row named, with its status and file" grep -q "^- gemm: FAILED (status 3; $W/run2/gemm.txt)" "$S2"
check "its output kept" grep -q "made to fail" "$W/run2/gemm.txt"
check "the rows after it still ran (the programs said not built)" \
  bash -c "grep -q '^- floor, fp32: ' '$S2' && grep -q '^- bench/gemm: not built' '$S2' && grep -q '^- test_bf16_native: not built' '$S2'"

# oneDNN held to AVX2 (DNNL_MAX_CPU_ISA): a CPU without native bf16, as a Zen 3 is
DNNL_MAX_CPU_ISA=AVX2 QUICK=1 bash "$ROOT/bench/bf16_checklist" "$BUILD" "$W/run4" > "$W/run4.log" 2>&1
rc=$?
S4=$W/run4/summary.md
check "no native bf16: status 0" test $rc -eq 0
check "no native bf16: said so" grep -q "^- no native bf16 here" "$S4"
check "no native bf16: no bf16 row, no small-product table" \
  bash -c "! grep -Eq '^- (bf16_vs_fp32|packing|small_products|bands_soft|bands_xcit|floor, bf16|auto):|small bf16 products' '$S4'"
check "no native bf16: the fp32 rows still run" \
  bash -c "grep -q '^- floor, fp32: ' '$S4' && grep -Eq '^- gemm: B / A step [0-9.]+ ' '$S4'"
check "no native bf16: test_bf16_native skipped with its reason" grep -q "^- test_bf16_native: skipped (exit 77): ." "$S4"

mkdir -p "$W/empty"
bash "$ROOT/bench/bf16_checklist" "$W/empty" "$W/run3" > "$W/run3.log" 2>&1
rc=$?
check "a build folder without sfvit: status 2" test $rc -eq 2
check "... and says why" grep -q "no sfvit in $W/empty" "$W/run3.log"

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
