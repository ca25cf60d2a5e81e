#!/usr/bin/env bash
# The test command: installs the build dependencies, then runs four stages, each in its own
# build folder under build-test/ with every option it relies on set here (so it does not
# matter who configured build/, or whether the main job ran first):
#   warnings    every C file compiled with -Werror for a fixed list of -march targets at
#               -O2 and -O3 (tests/warnings.py): the same verdict on every host CPU
#   release     the suite in a --buildtype=release build for this CPU (-march=native)
#   older ISAs  that build's suite again with oneDNN held below this CPU's ISA (DNNL_MAX_CPU_ISA:
#               AVX512_CORE_BF16 on AMX CPUs, AVX512_CORE on AVX512_BF16 ones, AVX2 on any
#               AVX-512 one), so that a test which holds only on this CPU's kernels fails here
#               rather than on the next machine; none on an AVX2-only CPU
#   sanitizers  the suite again under AddressSanitizer + UndefinedBehaviorSanitizer
#   fuzz        30 s of libFuzzer per parser (tests/fuzz/run.sh), when clang can be installed
# The suite builds print warnings but do not fail on them: the warnings stage is the one
# place where a warning is an error, for a list of targets rather than whichever CPU runs this.
# Every stage runs even when an earlier one failed; the last line totals them
# ("sfvit: N passed, N failed, N skipped") and the exit status is non-zero on any failure.
# SFVIT_SKIP_ASAN=1 skips the sanitizer pass, SFVIT_SKIP_FUZZ=1 the fuzzing,
# SFVIT_SKIP_WARNINGS=1 the warnings stage, SFVIT_SKIP_OLDER_ISAS=1 the older-ISA passes
# (none of them in CI).
set -uo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
# python3-onnx and python3-numpy: the ONNX export tests (onnx.checker; reading ONNX Runtime's
# output). ONNX Runtime itself comes from npm, installed by tests/test_onnx_runtime.sh.
bash scripts/install_deps.sh python3-onnx python3-numpy || exit 1
mkdir -p build-test

passed=0 failed=0 skipped=0 stages=()
count() { sed -n "s/^$1: *\([0-9]*\).*/\1/p" "$2" | tail -1; }
# configure BUILDDIR [meson setup options...]: set up, or set the same options again.
configure() {
  local dir=$1; shift
  if [ -f "$dir/build.ninja" ]; then meson configure "$dir" "$@" > /dev/null
  else meson setup "$dir" "$@" > /dev/null; fi
}
# suite NAME BUILDDIR [meson setup options...]: configure, build, test.
suite() {
  local name=$1 dir=$2 t0=$SECONDS log; shift 2
  log=$dir/run-tests.log
  configure "$dir" -Dwerror=false -Dnative=true -Dslow_tests=false -Dfuzz=false "$@" \
    || { failed=$((failed + 1)); stages+=("$name: setup failed"); return; }
  if ! ninja -C "$dir"; then
    failed=$((failed + 1)); stages+=("$name: build failed"); return
  fi
  run_suite "$name" "$dir" "$log" "$t0"
}
# run_suite NAME BUILDDIR LOG START: the built suite's tests, counted into the totals.
run_suite() {
  local name=$1 dir=$2 log=$3 t0=$4 p f s to
  meson test -C "$dir" --print-errorlogs --timeout-multiplier "${TIMEOUT_MULT:-1}" | tee "$log"
  p=$(count Ok "$log") f=$(count Fail "$log") s=$(count Skipped "$log") to=$(count Timeout "$log")
  f=$((${f:-0} + ${to:-0}))
  passed=$((passed + ${p:-0})) failed=$((failed + f)) skipped=$((skipped + ${s:-0}))
  stages+=("$name: ${p:-0} passed, $f failed, ${s:-0} skipped in $((SECONDS - t0)) s")
}

if [ "${SFVIT_SKIP_WARNINGS:-0}" != 1 ]; then
  t0=$SECONDS log=build-test/run-warnings.log
  if configure build-test/release --buildtype=release; then
    python3 tests/warnings.py build-test/release | tee $log
    p=$(sed -n 's/^warnings: \([0-9]*\) passed.*/\1/p' $log) f=$(sed -n 's/^warnings: [0-9]* passed, \([0-9]*\) failed.*/\1/p' $log)
    [ -n "$p$f" ] || f=1 # no summary line: the stage itself broke
    passed=$((passed + ${p:-0})) failed=$((failed + ${f:-0}))
    stages+=("warnings: ${p:-0} target/level builds passed, ${f:-0} failed (-Werror, -O2 and -O3) in $((SECONDS - t0)) s")
  else
    failed=$((failed + 1)); stages+=("warnings: setup failed")
  fi
fi
suite release build-test/release --buildtype=release
if [ "${SFVIT_SKIP_OLDER_ISAS:-0}" != 1 ] && [ -f build-test/release/build.ninja ]; then
  older=()
  grep -qw amx_bf16 /proc/cpuinfo && older+=(AVX512_CORE_BF16)
  grep -qw avx512_bf16 /proc/cpuinfo && older+=(AVX512_CORE)
  grep -qw avx512f /proc/cpuinfo && older+=(AVX2)
  for isa in "${older[@]}"; do
    DNNL_MAX_CPU_ISA=$isa run_suite "release, oneDNN held to $isa" build-test/release \
      "build-test/release/run-tests-$isa.log" $SECONDS
  done
  [ ${#older[@]} -gt 0 ] || stages+=("older ISAs: none below this CPU's (AVX2 or older)")
fi
if [ "${SFVIT_SKIP_ASAN:-0}" != 1 ]; then
  ASAN_OPTIONS=detect_leaks=1 TIMEOUT_MULT=4 \
    suite sanitizers build-test/asan -Db_sanitize=address,undefined -Db_lundef=false --buildtype=debug
fi
if [ "${SFVIT_SKIP_FUZZ:-0}" != 1 ]; then
  t0=$SECONDS log=build-test/run-fuzz.log
  bash scripts/install_deps.sh clang libclang-rt-14-dev || echo "fuzz: could not install clang"
  if command -v clang > /dev/null; then
    SFVIT_FUZZ_BUILD=build-test/fuzz bash tests/fuzz/run.sh 30 | tee $log
    p=$(count fuzz $log) f=$(sed -n 's/^fuzz: [0-9]* passed, \([0-9]*\) failed.*/\1/p' $log | tail -1)
    [ -n "$p$f" ] || f=1 # no summary line: the fuzz build itself failed
    passed=$((passed + ${p:-0})) failed=$((failed + ${f:-0}))
    stages+=("fuzz: ${p:-0} targets passed, ${f:-0} failed, 30 s each, in $((SECONDS - t0)) s")
  else
    skipped=$((skipped + 1)); stages+=("fuzz: skipped, clang is not available")
  fi
fi
echo
echo "stages (warnings builds, test programs of the release build (also with oneDNN held to older ISAs) and the sanitizer build, fuzz targets):"
printf '  %s\n' "${stages[@]}"
echo "total time $((SECONDS - start)) s"
echo "sfvit: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
