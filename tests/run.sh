#!/usr/bin/env bash
# The test command: installs the build dependencies, builds sfvit and runs the whole suite,
# then the suite again in an AddressSanitizer + UndefinedBehaviorSanitizer build, then 30 s of
# libFuzzer per parser (tests/fuzz/run.sh) when clang and its fuzzer runtime can be installed.
# SFVIT_SKIP_ASAN=1 skips the sanitizer pass, SFVIT_SKIP_FUZZ=1 the fuzzing (neither in CI).
set -euo pipefail
cd "$(dirname "$0")/.."
bash train/install_deps.sh
[ -f build/build.ninja ] || meson setup build
ninja -C build
# Totals over every pass, for the closing line.
passed=0 failed=0 skipped=0
tally() { # meson test output on stdin
  local out; out=$(cat)
  passed=$((passed + $(sed -n 's/^Ok: *\([0-9]*\).*/\1/p' <<< "$out" | tail -1)))
  failed=$((failed + $(sed -n 's/^Fail: *\([0-9]*\).*/\1/p' <<< "$out" | tail -1)))
  skipped=$((skipped + $(sed -n 's/^Skipped: *\([0-9]*\).*/\1/p' <<< "$out" | tail -1)))
}
meson test -C build --print-errorlogs | tee build/run-tests.log
tally < build/run-tests.log
if [ "${SFVIT_SKIP_ASAN:-0}" != 1 ]; then
  [ -f build-asan/build.ninja ] || meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false --buildtype=debug
  ninja -C build-asan
  ASAN_OPTIONS=detect_leaks=1 meson test -C build-asan --print-errorlogs --timeout-multiplier 4 | tee build-asan/run-tests.log
  tally < build-asan/run-tests.log
fi
if [ "${SFVIT_SKIP_FUZZ:-0}" != 1 ]; then
  bash train/install_deps.sh clang libclang-rt-14-dev || echo "fuzz: could not install clang"
  if command -v clang > /dev/null; then
    bash tests/fuzz/run.sh 30 | tee build/run-fuzz.log
    passed=$((passed + $(sed -n 's/^fuzz: \([0-9]*\) passed.*/\1/p' build/run-fuzz.log | tail -1)))
  else
    echo "fuzz: clang is not available, fuzzing skipped"
  fi
fi
echo "totals: test programs of the normal and sanitizer builds, plus fuzz targets"
echo "sfvit: $passed passed, $failed failed, $skipped skipped"
