#!/usr/bin/env bash
# Crash safety of training: `sfvit train` with a checkpoint after every step is killed with
# SIGKILL at random moments (during start-up, steps and checkpoint writes) and resumed with
# `sfvit train --resume` each time. After every kill the last checkpoint must load (`sfvit
# eval` exits 0); leftover "<file>.tmp.<pid>" files of interrupted writes must not disturb a
# resume; and the final weights, Adam moments and best checkpoint must equal an uninterrupted
# run's bit for bit.
# CI: 24 kills (well under 2 minutes). SFVIT_SLOW_TESTS=1: 200 kills over a longer run.
# SFVIT_KILL_SEED=N fixes the random delays; SFVIT_KILL_DEBUG=1 prints each kill's delay and step.
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
BASE=$ROOT/train/configs/fmnist_tiny.yaml
# 16 steps per epoch, a checkpoint after every step.
COMMON=(data.root=fm train.out=runs train.threads=1 data.workers=2 train.log_every=4 train.batch_size=32
        train.eval_batch_size=64 train.epochs=$EPOCHS train.save_every_steps=1)
now() { date +%s.%N; }

# ---- the uninterrupted reference, and the timings the kill delays are drawn from ----
t0=$(now)
"$SFVIT" train "$BASE" "${COMMON[@]}" train.name=one train.max_steps=1 > one.log 2>&1
t1=$(now)
"$SFVIT" train "$BASE" "${COMMON[@]}" train.name=ref > ref.log 2>&1; rc=$?
t2=$(now)
check "uninterrupted run exits 0" test $rc -eq 0
steps=$((16 * EPOCHS))
# start-up (to the first checkpoint) and one step, in milliseconds
startup_ms=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%d", (b - a) * 1000}')
step_ms=$(awk -v a="$t1" -v b="$t2" -v s="$startup_ms" -v n=$steps 'BEGIN{v = ((b - a) * 1000 - s) / n; printf "%d", v < 5 ? 5 : v}')
echo "start-up ${startup_ms} ms, ${step_ms} ms per step (with its checkpoint), $steps steps"

# ---- the killed run ----
RUN=runs/k
RANDOM=${SFVIT_KILL_SEED:-$$}
window_ms=$(( startup_ms / 2 + 4 * step_ms ))
max_window_ms=$window_ms
# The run's update count, from the checkpoint's metadata.
ckpt_step() { head -c 65536 "$1" 2> /dev/null | grep -ao '"global_step":"[0-9]*"' | grep -o '[0-9]*' | head -1; }
kills=0 load_fail=0 max_tmp=0 kills_with_tmp=0 no_ckpt=0 attempts=0 resume_fail=0
while [ $kills -lt $KILLS ]; do
  attempts=$((attempts + 1))
  if [ -f $RUN/last.safetensors ]; then
    "$SFVIT" train --resume $RUN > attempt.log 2>&1 &
  else
    "$SFVIT" train "$BASE" "${COMMON[@]}" train.name=k > attempt.log 2>&1 &
  fi
  pid=$!
  # Anywhere from half the start-up to a few steps past it; the window narrows when the run
  # advances faster than the kills (sanitizer builds start slowly, so the start-up measured
  # once is only a guide) and widens when it stalls.
  delay_ms=$(( startup_ms / 2 + RANDOM % (window_ms + 1) ))
  sleep "$(awk -v d=$delay_ms 'BEGIN{printf "%.3f", d / 1000}')"
  if kill -9 $pid 2> /dev/null; then
    wait $pid 2> /dev/null
    kills=$((kills + 1))
  else
    wait $pid; rc=$?
    if [ $rc -ne 0 ]; then
      resume_fail=$((resume_fail + 1)); echo "attempt $attempts exited $rc before the kill:"; tail -5 attempt.log
    fi
    [ $rc -eq 0 ] && grep -q "final val top-1" attempt.log && break # finished before enough kills
  fi
  gs=$(ckpt_step $RUN/last.safetensors); gs=${gs:-0}
  # on schedule: the kills so far should have used at most their share of half the steps
  if [ $((gs * KILLS)) -gt $((kills * steps / 2)) ]; then
    window_ms=$(( window_ms / 2 > step_ms ? window_ms / 2 : step_ms ))
  elif [ $window_ms -lt $max_window_ms ]; then
    window_ms=$(( window_ms * 5 / 4 + 1 ))
  fi
  [ -n "${SFVIT_KILL_DEBUG:-}" ] && echo "kill $kills: delay ${delay_ms} ms, window ${window_ms} ms, update $gs"
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
echo "note: $attempts attempts, $kills kills spread over updates 0..$gs of $steps; $no_ckpt kills before the first checkpoint;" \
     "leftover temporary files: at most $max_tmp during the kills, $tmp_after at the end" \
     "(one per interrupted write: each process names its own <file>.tmp.<pid> and none removes another's)"
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
