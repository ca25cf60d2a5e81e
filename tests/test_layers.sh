#!/usr/bin/env bash
# The layers link one way (docs/architecture.md): every sf_ symbol a layer's library uses and
# does not define itself is defined by a layer below it. And each layer calls only the
# external libraries meson.build gives it (ext[...]): yaml and MPI in the trainer, png and
# jpeg in data, cJSON and zlib in the engine, ... Read from the static libraries with nm, so
# it holds in every build (the --no-undefined link in meson.build checks the layers at build
# time, except under sanitizers). Both checks are shown to have teeth.
# Usage: test_layers.sh SFVIT_BINARY SOURCE_ROOT
set -uo pipefail
B=$(dirname "$(realpath "$1")")
ROOT=$(realpath "$2")
source "$ROOT/tests/lib.sh"
declare -A below=(
  [engine]=""
  [ops]="engine"
  [models]="ops engine"
  [data]="engine"
  [trainer]="models data ops engine"
  [cli]="trainer models data ops engine"
)
# The external libraries of each layer (meson.build's ext), and the symbols that name them.
declare -A libs=(
  [engine]="blas zlib cjson omp"
  [ops]="blas dnnl threads omp"
  [models]=""
  [data]="png jpeg zlib threads omp"
  [trainer]="yaml mpi omp"
  [cli]="cjson"
)
declare -A pattern=(
  [blas]='^(cblas_|openblas_)' [zlib]='^(crc32|inflate|deflate|gz|zlib|uncompress|compress)'
  [cjson]='^cJSON_' [png]='^png_' [jpeg]='^jpeg_' [yaml]='^yaml_' [mpi]='^(MPI_|PMPI_|ompi_)'
  [threads]='^pthread_' [omp]='^(omp_|GOMP_)' [dnnl]='^dnnl_'
)
lib() { echo "$B/libsfvit_$1.a"; }
defined() { for l in "$@"; do nm --defined-only "$(lib "$l")" | awk '$2 ~ /^[TDBR]$/ && $3 ~ /^sf_/ {print $3}'; done | sort -u; }
used() { nm -u "$(lib "$1")" | awk '$2 ~ /^sf_/ {print $2}' | sort -u; }
# symbols layer $1 uses that neither it nor the layers $2... define
violations() { local l=$1; shift; comm -23 <(used "$l") <(defined "$l" "$@"); }

# external symbols layer $1 uses that the libraries $2... do not name
foreign() {
  local l=$1; shift
  local ok_re='^$'
  for x in "$@"; do ok_re="$ok_re|${pattern[$x]}"; done
  for x in "${!pattern[@]}"; do
    nm -u "$(lib "$l")" | awk '{print $2}' | grep -E "${pattern[$x]}" | grep -vE "$ok_re" | sed "s/\$/ ($x)/"
  done | sort -u
}

for l in engine ops models data trainer cli; do
  check "libsfvit_$l.a exists" test -f "$(lib "$l")" || continue
  # shellcheck disable=SC2086
  v=$(violations "$l" ${below[$l]})
  if [ -z "$v" ]; then ok "$l uses only itself and the layers below (${below[$l]:-none})"
  else
    bad "$l uses symbols of layers above or beside it:"
    for s in $v; do
      for o in engine ops models data trainer cli; do defined "$o" | grep -qx "$s" && echo "    $s (defined in $o)"; done
    done
  fi
done
for l in engine ops models data trainer cli; do
  # shellcheck disable=SC2086
  f=$(foreign "$l" ${libs[$l]})
  if [ -z "$f" ]; then ok "$l calls only its own external libraries (${libs[$l]:-none})"
  else bad "$l calls external libraries it does not declare:"; sed 's/^/    /' <<< "$f"; fi
done
check "the library check has teeth: data without png and jpeg violates it" test -n "$(foreign data zlib threads omp)"
check "the library check has teeth: the engine without zlib and cJSON violates it" test -n "$(foreign engine blas omp)"
check "the check has teeth: the trainer on the engine alone violates it" test -n "$(violations trainer engine)"
check "the check has teeth: models without the ops layer below violates it" test -n "$(violations models engine)"

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
