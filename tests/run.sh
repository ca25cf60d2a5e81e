#!/usr/bin/env bash
# The test command: installs the build dependencies, builds sfvit with -Werror and runs the
# whole suite, then the suite again in an AddressSanitizer + UndefinedBehaviorSanitizer build,
# then 30 s of libFuzzer per parser (tests/fuzz/run.sh) when clang and its fuzzer runtime can
# be installed. Every stage runs even when an earlier one failed; the last line totals them
# ("sfvit: N passed, N failed, N skipped") and the exit status is non-zero on any failure.
# SFVIT_SKIP_ASAN=1 skips the sanitizer pass, SFVIT_SKIP_FUZZ=1 the fuzzing (neither in CI).
set -uo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
bash train/install_deps.sh || exit 1

passed=0 failed=0 skipped=0 stages=()
count() { sed -n "s/^$1: *\([0-9]*\).*/\1/p" "$2" | tail -1; }
# suite NAME BUILDDIR [meson setup options...]: configure (warnings are errors), build, test.
suite() {
  local name=$1 dir=$2 t0=$SECONDS log; shift 2
  log=$dir/run-tests.log
  if [ -f "$dir/build.ninja" ]; then meson configure "$dir" -Dwerror=true "$@" > /dev/null
  else meson setup "$dir" -Dwerror=true "$@" > /dev/null; fi || { failed=$((failed + 1)); stages+=("$name: setup failed"); return; }
  if ! ninja -C "$dir"; then
    failed=$((failed + 1)); stages+=("$name: build failed (warnings are errors)"); return
  fi
  meson test -C "$dir" --print-errorlogs --timeout-multiplier "${TIMEOUT_MULT:-1}" | tee "$log"
  local p f s to
  p=$(count Ok "$log") f=$(count Fail "$log") s=$(count Skipped "$log") to=$(count Timeout "$log")
  f=$((${f:-0} + ${to:-0}))
  passed=$((passed + ${p:-0})) failed=$((failed + f)) skipped=$((skipped + ${s:-0}))
  stages+=("$name: ${p:-0} passed, $f failed, ${s:-0} skipped in $((SECONDS - t0)) s")
}

suite release build
if [ "${SFVIT_SKIP_ASAN:-0}" != 1 ]; then
  ASAN_OPTIONS=detect_leaks=1 TIMEOUT_MULT=4 \
    suite sanitizers build-asan -Db_sanitize=address,undefined -Db_lundef=false --buildtype=debug
fi
if [ "${SFVIT_SKIP_FUZZ:-0}" != 1 ]; then
  t0=$SECONDS
  bash train/install_deps.sh clang libclang-rt-14-dev || echo "fuzz: could not install clang"
  if command -v clang > /dev/null; then
    bash tests/fuzz/run.sh 30 | tee build/run-fuzz.log
    p=$(count fuzz build/run-fuzz.log) f=$(sed -n 's/^fuzz: [0-9]* passed, \([0-9]*\) failed.*/\1/p' build/run-fuzz.log | tail -1)
    [ -n "$p$f" ] || f=1 # no summary line: the fuzz build itself failed
    passed=$((passed + ${p:-0})) failed=$((failed + ${f:-0}))
    stages+=("fuzz: ${p:-0} targets passed, ${f:-0} failed, 30 s each, in $((SECONDS - t0)) s")
  else
    skipped=$((skipped + 1)); stages+=("fuzz: skipped, clang is not available")
  fi
fi
echo
echo "stages (test programs of the release and sanitizer builds, fuzz targets):"
printf '  %s\n' "${stages[@]}"
echo "total time $((SECONDS - start)) s"
echo "sfvit: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
