#!/usr/bin/env bash
# Every loop the library marks `#pragma omp ... simd` is vectorized by the compiler, as the
# comments beside them and docs/performance.md say: each library source is compiled again
# with its own command from the build's compile_commands.json plus GCC's
# -fopt-info-vec-optimized, and each marked `for` must be reported "loop vectorized". A select
# the compiler will not if-convert (the reason for -fno-trapping-math in meson.build) leaves a
# loop scalar without any warning; this is where that shows.
# Skipped (exit 77) where it cannot say: not GCC, or a build without optimization (the
# sanitizer stage's debug build vectorizes nothing).
# Usage: test_simd.sh SFVIT_BINARY SOURCE_ROOT
set -uo pipefail
BUILD=$(dirname "$(realpath "$1")")
ROOT=$(realpath "$2")
source "$ROOT/tests/lib.sh"
db=$BUILD/compile_commands.json
[ -f "$db" ] || { echo "skipped: no $db"; exit 77; }
W=$(mktemp -d /tmp/sfvit-simd-XXXXXX)
trap 'rm -rf "$W"' EXIT

# the compile command of one source, its output sent to the work folder
command_of() {
  python3 - "$db" "$1" "$W/x.o" <<'EOF'
import json, shlex, sys
db, src, out = sys.argv[1:]
for e in json.load(open(db)):
    if e["file"].endswith(src):
        args = shlex.split(e["command"])
        i = args.index("-o"); args[i + 1] = out
        # no dependency file: this compile must leave the build folder as it was
        for flag in ("-MD", "-MQ", "-MF"):
            while flag in args:
                j = args.index(flag); del args[j:j + (1 if flag == "-MD" else 2)]
        print(e["directory"]); print(shlex.join(args)); break
EOF
}

sources=$(cd "$ROOT" && ls src/*.c src/ops/*.c models/*.c data/*.c train/*.c)
first=$(command_of src/ops/elementwise.c)
cmd=$(sed -n 2p <<< "$first")
compiler=${cmd%% *}
macros=$(echo | "$compiler" -dM -E - 2>/dev/null)
grep -q __GNUC__ <<< "$macros" && ! grep -q __clang__ <<< "$macros" || { echo "skipped: $compiler is not GCC"; exit 77; }
grep -Eq -- ' -O[23s]( |$)' <<< "$cmd" || { echo "skipped: the build does not optimize (no -O2/-O3)"; exit 77; }

loops=0
for s in $sources; do
  c=$(command_of "$s")
  [ -n "$c" ] || continue
  dir=$(sed -n 1p <<< "$c")
  report=$(cd "$dir" && eval "$(sed -n 2p <<< "$c") -fopt-info-vec-optimized" 2>&1)
  vectorized=" $(grep "loop vectorized" <<< "$report" | grep -o ':[0-9]*:' | tr -d : | sort -un | tr '\n' ' ') "
  # each `for` right under a simd pragma: reported at its own line or within the next 3
  while IFS=: read -r line text; do
    loops=$((loops + 1))
    found=0
    for k in 0 1 2 3; do [[ $vectorized == *" $((line + k)) "* ]] && found=1; done
    check "$s:$line vectorized:$(sed 's/^ *//' <<< "$text")" test $found -eq 1
  done < <(awk '/#pragma omp .*simd/ { getline nxt; if (nxt ~ /^[ \t]*for *\(/) print NR ":" nxt }' "$ROOT/$s")
done
check "found the marked loops ($loops)" test "$loops" -ge 20

# A combined `parallel for simd` with an `if` clause: without the `parallel :` modifier the
# condition governs the simd part as well (OpenMP 5), so when it is false (a small array, or a
# call inside a parallel region) GCC runs a scalar copy of the loop; the vectorization report
# above still says "loop vectorized", for the other copy.
unmodified=$(cd "$ROOT" && grep -n -E '#pragma omp .*for simd.*[^a-z_]if *\(' $sources | grep -v -E 'if *\( *parallel *:' || true)
check "every 'parallel for simd if (...)' says 'if (parallel : ...)'${unmodified:+: $unmodified}" test -z "$unmodified"

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
