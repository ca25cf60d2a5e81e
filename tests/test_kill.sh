#!/usr/bin/env bash
# Crash safety of training: `sfvit train` with a checkpoint after every step is killed with
# SIGKILL at random points (at the start of an update, half-way through writing
# last.safetensors or best.safetensors) and resumed with `sfvit train --resume` each time.
# After every kill the last checkpoint must load (`sfvit eval` exits 0); leftover
# "<file>.tmp.<pid>" files of interrupted writes must not disturb a resume; and the final
# weights, Adam moments and best checkpoint must equal an uninterrupted run's bit for bit.
# The points are reached through SFVIT_TEST_HOLD (tests/lib.sh wait_held), so where each kill
# lands does not depend on how fast the machine is.
# CI: 24 kills. SFVIT_SLOW_TESTS=1: 200 kills over a longer run.
# SFVIT_KILL_SEED=N fixes the random points; SFVIT_KILL_DEBUG=1 prints each kill's point.
# Usage: test_kill.sh SFVIT_BINARY SOURCE_ROOT
set -uo pipefail
SFVIT=$(realpath "$1")
ROOT=$(realpath "$2")
W=$(mktemp -d /tmp/sfvit-kill-XXXXXX)
[ -n "${SFVIT_KEEP_TEST_DIR:-}" ] || trap 'rm -rf "$W"' EXIT; echo "work dir: $W"
cd "$W"
source "$ROOT/tests/lib.sh"

if [ "${SFVIT_SLOW_TESTS:-0}" = 1 ]; then KILLS=200 EPOCHS=40; else KILLS=24 EPOCHS=8; fi

fmnist_subset "$SFVIT" "$ROOT" 512 64
BASE=$ROOT/configs/fmnist_tiny.yaml
# 16 steps per epoch, a checkpoint after every step.
COMMON=(data.root=fm train.out=runs train.threads=1 data.workers=2 train.log_every=4 train.batch_size=32
        train.eval_batch_size=64 train.epochs=$EPOCHS train.save_every_steps=1)

# ---- the uninterrupted reference ----
"$SFVIT" train "$BASE" "${COMMON[@]}" train.name=ref > ref.log 2>&1; rc=$?
check "uninterrupted run exits 0" test $rc -eq 0
steps=$((16 * EPOCHS))

# ---- the killed run ----
RUN=runs/k
RANDOM=${SFVIT_KILL_SEED:-$$}
# The run's update count, from the checkpoint's metadata.
ckpt_step() { head -c 65536 "$1" 2> /dev/null | grep -ao '"global_step":"[0-9]*"' | grep -o '[0-9]*' | head -1; }
kills=0 load_fail=0 max_tmp=0 no_ckpt=0 attempts=0 resume_fail=0 kinds=""
while [ $kills -lt $KILLS ]; do
  attempts=$((attempts + 1))
  gs=$(ckpt_step $RUN/last.safetensors); gs=${gs:-0}
  # Where to kill: at the start of one of the next few updates (1 to 4 ahead, so the run
  # advances about 2.5 updates per kill and lasts for all of them), or half-way through the
  # checkpoint write after it, or, while there is no best.safetensors yet (it is written at
  # the end of an epoch when missing, so this point is always reached), through its write.
  n=$((gs + 1 + RANDOM % 4)); [ $n -gt $steps ] && n=$steps
  kind=$((attempts % 8)) # every kind in turn, at random updates
  if [ $kind = 3 ] && [ ! -f $RUN/best.safetensors ]; then point="write best.safetensors" held=$point
  elif [ $kind -lt 3 ]; then point="step $n" held=$point
  else point="pass step $n;write last.safetensors" held="write last.safetensors"; fi
  if [ -f $RUN/last.safetensors ]; then
    SFVIT_TEST_HOLD=$point "$SFVIT" train --resume $RUN > attempt.log 2>&1 &
  else
    SFVIT_TEST_HOLD=$point "$SFVIT" train "$BASE" "${COMMON[@]}" train.name=k > attempt.log 2>&1 &
  fi
  pid=$!
  if wait_held attempt.log $pid "$held"; then
    kill -9 $pid
    wait $pid 2> /dev/null
    kills=$((kills + 1))
    case $held in step*) kinds="$kinds s" ;; "write last"*) kinds="$kinds l" ;; *) kinds="$kinds b" ;; esac
  else # ended without reaching the point
    wait $pid; rc=$?
    if [ $rc -ne 0 ]; then
      resume_fail=$((resume_fail + 1)); echo "attempt $attempts exited $rc before the kill:"; tail -5 attempt.log
    fi
    [ $rc -eq 0 ] && grep -q "final val top-1" attempt.log && break # finished before enough kills
    [ $attempts -gt $((4 * KILLS)) ] && break # it cannot reach its points: the checks below fail
  fi
  [ -n "${SFVIT_KILL_DEBUG:-}" ] && echo "kill $kills: at '$point' with the checkpoint of update $gs"
  ntmp=$(find $RUN -name '*.tmp.*' 2> /dev/null | wc -l)
  [ "$ntmp" -gt "$max_tmp" ] && max_tmp=$ntmp
  if [ -f $RUN/last.safetensors ]; then
    if ! "$SFVIT" eval $RUN/last.safetensors --data fm > eval.log 2>&1; then
      load_fail=$((load_fail + 1)); echo "after kill $kills: last.safetensors does not load:"; tail -3 eval.log
    fi
  else
    no_ckpt=$((no_ckpt + 1))
  fi
  if [ -f $RUN/best.safetensors ] && ! "$SFVIT" eval $RUN/best.safetensors --data fm > eval.log 2>&1; then
    load_fail=$((load_fail + 1)); echo "after kill $kills: best.safetensors does not load:"; tail -3 eval.log
  fi
done
check "$kills SIGKILLs delivered (wanted $KILLS; the run must outlast them)" test $kills -ge $KILLS
check "last/best checkpoint loads after every kill ($load_fail failures)" test $load_fail -eq 0
check "no resume failed between kills ($resume_fail failures)" test $resume_fail -eq 0
tmp_before=$(find $RUN -name '*.tmp.*' | wc -l)
# ---- the last resume runs to the end, with whatever temporary files the kills left ----
if [ -f $RUN/last.safetensors ]; then
  "$SFVIT" train --resume $RUN > final.log 2>&1; rc=$?
else
  "$SFVIT" train "$BASE" "${COMMON[@]}" train.name=k > final.log 2>&1; rc=$?
fi
[ $rc -eq 0 ] || tail -5 final.log
check "final resume completes despite $tmp_before leftover temporary files" test $rc -eq 0
check "final resume printed no error" bash -c "! grep -q 'error' final.log"
check "final last.safetensors loads" "$SFVIT" eval $RUN/last.safetensors --data fm
check "final weights and moments bit-identical to the uninterrupted run" \
  test "$(tensor_bytes runs/ref/last.safetensors)" = "$(tensor_bytes $RUN/last.safetensors)"
check "best checkpoint bit-identical to the uninterrupted run's" \
  test "$(tensor_bytes runs/ref/best.safetensors)" = "$(tensor_bytes $RUN/best.safetensors)"
tmp_after=$(find $RUN -name '*.tmp.*' | wc -l)
n_s=$(echo $kinds | tr ' ' '\n' | grep -c s) n_l=$(echo $kinds | tr ' ' '\n' | grep -c l) n_b=$(echo $kinds | tr ' ' '\n' | grep -c b)
check "kills landed at every kind of point ($n_s at an update, $n_l in a last.safetensors write, $n_b in a best.safetensors write)" \
  test $n_s -gt 0 -a $n_l -gt 0 -a $n_b -gt 0
check "kills in a write left temporary files behind (at most $max_tmp at once)" test $max_tmp -gt 0
check "the final run removed the stale temporary files ($tmp_after left)" test $tmp_after -eq 0
echo "note: $attempts attempts, $kills kills spread over updates 0..$gs of $steps; $no_ckpt kills before the first checkpoint;" \
     "leftover temporary files: at most $max_tmp during the kills (a resume removes the stale ones), $tmp_after at the end"
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
