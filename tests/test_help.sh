#!/usr/bin/env bash
# Every command answers --help (and `sfvit help CMD`) with its usage on stdout and status 0,
# whatever else is on the line: `info --help` is not a model name, `data check --help` not a
# folder. The commands are read from `sfvit --help`, so a new command is checked too.
# Usage: test_help.sh SFVIT_BINARY SOURCE_ROOT
set -uo pipefail
SFVIT=$(realpath "$1")
ROOT=$(realpath "$2")
W=$(mktemp -d /tmp/sfvit-help-XXXXXX)
trap 'rm -rf "$W"' EXIT
cd "$W"
source "$ROOT/tests/lib.sh"

out=$("$SFVIT" --help); rc=$?
check "sfvit --help exits 0" test $rc -eq 0
cmds=$(sed -n 's/^  \([a-z-]*\) .*/\1/p' <<< "$out" | sort -u)
check "sfvit --help lists commands" test "$(wc -w <<< "$cmds")" -ge 8
for c in $cmds; do
  for args in "--help" "-h" "x.yaml --help" "a b --help c"; do
    # shellcheck disable=SC2086
    o=$("$SFVIT" $c $args 2>&1); rc=$?
    check "sfvit $c $args: status 0 and usage" test $rc -eq 0 -a -n "$(grep "^usage: sfvit $c" <<< "$o")"
  done
  o=$("$SFVIT" help "$c" 2>&1); rc=$?
  check "sfvit help $c" test $rc -eq 0 -a -n "$(grep "^usage: sfvit $c" <<< "$o")"
done
# The options a command's parser accepts (its row of cli/table.c, listed after a usage
# error) all appear in its --help text, so the two cannot drift apart.
for c in $cmds; do
  o=$("$SFVIT" $c --no-such-flag 2>&1); rc=$?
  check "sfvit $c --no-such-flag: status 2, names it" test $rc -eq 2 -a -n "$(grep -- "--no-such-flag" <<< "$o")"
  opts=$(sed -n 's/^---> HINT: options: //p' <<< "$o" | tr ',' '\n' | awk '{print $1}')
  help=$("$SFVIT" $c --help)
  for f in $opts; do
    check "sfvit $c: option $f is in its usage" grep -qe "$f" <<< "$help"
  done
done
o=$("$SFVIT" data check --help 2>&1); rc=$?
check "data check --help is not a folder" test $rc -eq 0 -a -z "$(grep -i error <<< "$o")"
check "--help writes no folder" test -z "$(ls -A)"
o=$("$SFVIT" nosuchcommand 2>&1); rc=$?
check "unknown command: status 2" test $rc -eq 2
"$SFVIT" > /dev/null 2>&1; rc=$?
check "no command: status 2" test $rc -eq 2

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
