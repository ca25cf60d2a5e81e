#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) and runs each for SECONDS (default 30),
# starting from the committed seeds in tests/fuzz/corpus/<target>/, after replaying the inputs
# in tests/fuzz/crashes/<target>/ (each once broke a parser). Fails on any crash, leak,
# sanitizer report, timeout or out-of-memory; the input that caused it is kept in
# $BUILD/fuzz-artifacts/<target>/ and the log in $BUILD/fuzz-logs/<target>.log.
# Usage: tests/fuzz/run.sh [SECONDS] [TARGET...]   (targets: config image safetensors idx pth)
# Env: SFVIT_FUZZ_BUILD (build folder, default build-fuzz), SFVIT_FUZZ_SKIP_BUILD=1 (use the
# existing build), SFVIT_FUZZ_ARGS (extra libFuzzer flags).
# New interesting inputs go to $BUILD/fuzz-corpus/<target>/, never into the committed seeds.
set -uo pipefail
cd "$(dirname "$0")/../.."
SECONDS_EACH=${1:-30}
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(config image safetensors idx pth)
BUILD=${SFVIT_FUZZ_BUILD:-build-fuzz}

if ! command -v clang > /dev/null; then
  echo "fuzz: clang is not installed (apt-get install clang libclang-rt-14-dev)"; exit 1
fi
if [ "${SFVIT_FUZZ_SKIP_BUILD:-0}" != 1 ]; then
  if [ ! -f "$BUILD/build.ninja" ]; then
    CC=clang meson setup "$BUILD" -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false > /dev/null || exit 1
  fi
  ninja -C "$BUILD" $(for t in "${TARGETS[@]}"; do echo "tests/fuzz/fuzz_$t"; done) > "$BUILD/fuzz-build.log" 2>&1 \
    || { tail -30 "$BUILD/fuzz-build.log"; exit 1; }
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
failed=0
passed=0
for t in "${TARGETS[@]}"; do
  exe=$BUILD/tests/fuzz/fuzz_$t
  work=$BUILD/fuzz-corpus/$t art=$BUILD/fuzz-artifacts/$t/ log=$BUILD/fuzz-logs/$t.log
  mkdir -p "$work" "$art" "$(dirname "$log")"
  # Inputs that once broke this target must pass first.
  crashes=(tests/fuzz/crashes/$t/*)
  if [ -e "${crashes[0]}" ]; then
    if ! "$exe" -rss_limit_mb=4096 "${crashes[@]}" < /dev/null > "$log.replay" 2>&1; then
      failed=$((failed + 1)); echo "FAIL fuzz_$t: a known crash input fails again (see $log.replay)"
      grep -aE -A20 'ERROR: |runtime error:|fuzz invariant failed' "$log.replay" | head -40
      continue
    fi
  fi
  # The parsers' own error messages (one per rejected input) are filtered out of the log.
  "$exe" "$work" tests/fuzz/corpus/$t -max_total_time="$SECONDS_EACH" -timeout=25 \
    -rss_limit_mb=4096 -artifact_prefix="$art" -print_final_stats=1 -close_fd_mask=1 ${SFVIT_FUZZ_ARGS:-} \
    < /dev/null 2>&1 | grep -avE '^(sfvit: (error|warning)|---> HINT|    )' > "$log"
  rc=${PIPESTATUS[0]}
  runs=$(grep -ao 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  cov=$(grep -aoE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1)
  if [ "$rc" -eq 0 ] && ! grep -aqE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|fuzz invariant failed' "$log"; then
    passed=$((passed + 1)); echo "ok   fuzz_$t: ${runs:-?} runs in ${SECONDS_EACH}s ($cov)"
  else
    failed=$((failed + 1)); echo "FAIL fuzz_$t (exit $rc): see $log and $art"
    grep -aE -A30 'ERROR: |runtime error:|fuzz invariant failed' "$log" | head -60
  fi
done
echo "fuzz: $passed passed, $failed failed"
[ $failed -eq 0 ]
