#!/usr/bin/env bash
# The test command: installs the build dependencies, builds sfvit and runs the whole suite,
# then the suite again in an AddressSanitizer + UndefinedBehaviorSanitizer build.
# SFVIT_SKIP_ASAN=1 skips the sanitizer pass (not done in CI).
set -euo pipefail
cd "$(dirname "$0")/.."
bash train/install_deps.sh
[ -f build/build.ninja ] || meson setup build
ninja -C build
meson test -C build --print-errorlogs
if [ "${SFVIT_SKIP_ASAN:-0}" != 1 ]; then
  [ -f build-asan/build.ninja ] || meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false --buildtype=debug
  ninja -C build-asan
  ASAN_OPTIONS=detect_leaks=1 meson test -C build-asan --print-errorlogs --timeout-multiplier 4
fi
