#!/usr/bin/env bash
# The layers link one way (docs/architecture.md): every sf_ symbol a layer's library uses and
# does not define itself is defined by a layer below it. Read from the static libraries with
# nm, so it holds in every build (the --no-undefined link in meson.build checks the same at
# build time, except under sanitizers). The check is shown to have teeth: the trainer's
# symbols checked as if it sat on the engine alone must fail.
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
)
lib() { echo "$B/libsfvit_$1.a"; }
defined() { for l in "$@"; do nm --defined-only "$(lib "$l")" | awk '$2 ~ /^[TDBR]$/ && $3 ~ /^sf_/ {print $3}'; done | sort -u; }
used() { nm -u "$(lib "$1")" | awk '$2 ~ /^sf_/ {print $2}' | sort -u; }
# symbols layer $1 uses that neither it nor the layers $2... define
violations() { local l=$1; shift; comm -23 <(used "$l") <(defined "$l" "$@"); }

for l in engine ops models data trainer; do
  check "libsfvit_$l.a exists" test -f "$(lib "$l")" || continue
  # shellcheck disable=SC2086
  v=$(violations "$l" ${below[$l]})
  if [ -z "$v" ]; then ok "$l uses only itself and the layers below (${below[$l]:-none})"
  else
    bad "$l uses symbols of layers above or beside it:"
    for s in $v; do
      for o in engine ops models data trainer; do defined "$o" | grep -qx "$s" && echo "    $s (defined in $o)"; done
    done
  fi
done
check "the check has teeth: the trainer on the engine alone violates it" test -n "$(violations trainer engine)"
check "the check has teeth: models without the ops layer below violates it" test -n "$(violations models engine)"

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
