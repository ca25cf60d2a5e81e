#!/usr/bin/env bash
# SIGINT and SIGTERM during training: the first signal finishes the current step, writes
# last.safetensors and exits 0 with a message; resuming from that checkpoint ends with the
# same weights as an uninterrupted run, bit for bit. A second signal exits at once (status
# 128 + signal) and leaves the previous checkpoint loadable.
# Usage: test_signals.sh SFVIT_BINARY SOURCE_ROOT
set -uo pipefail
SFVIT=$(realpath "$1")
ROOT=$(realpath "$2")
W=$(mktemp -d /tmp/sfvit-sig-XXXXXX)
[ -n "${SFVIT_KEEP_TEST_DIR:-}" ] || trap 'rm -rf "$W"' EXIT; echo "work dir: $W"
cd "$W"
source "$ROOT/tests/lib.sh"

fmnist_subset "$SFVIT" "$ROOT" 512 64
TINY=$ROOT/train/configs/fmnist_tiny.yaml
COMMON=(data.root=fm train.out=runs train.threads=1 data.workers=2 train.log_every=1 train.batch_size=32
        train.eval_batch_size=64)
batches() { local n; n=$(grep -c '"batch"' "$1" 2> /dev/null); echo "${n:-0}"; }
# Waits until the run's log holds at least N step lines (at most 60 s).
wait_steps() { # log N pid
  local i
  for i in $(seq 600); do
    [ "$(batches "$1")" -ge "$2" ] && return 0
    kill -0 "$3" 2> /dev/null || return 1
    sleep 0.1
  done
  return 1
}

# 16 steps per epoch, 6 epochs: the uninterrupted reference.
EP=train.epochs=6
"$SFVIT" train "$TINY" "${COMMON[@]}" $EP train.name=ref > ref.log 2>&1 || bad "reference run"

# ---- one signal: finish the step, checkpoint, exit 0; the resume matches the reference ----
for sig in INT TERM; do
  name=one_$sig
  "$SFVIT" train "$TINY" "${COMMON[@]}" $EP train.name=$name > $name.log 2>&1 &
  pid=$!
  wait_steps runs/$name/log.jsonl 20 $pid || bad "SIG$sig: the run did not reach step 20"
  at=$(batches runs/$name/log.jsonl)
  t0=$(date +%s.%N)
  kill -$sig $pid
  wait $pid; rc=$?
  dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2f", b - a}')
  check "SIG$sig once: exit 0 (got $rc) after ${dt}s" test $rc -eq 0
  check "SIG$sig once: says it stopped and where the checkpoint is" \
    grep -qE "stopped by signal after step [0-9]+; checkpoint written: runs/$name/last.safetensors" $name.log
  stop=$(grep -oE "stopped by signal after step [0-9]+" $name.log | grep -oE '[0-9]+$')
  # A step of this model takes milliseconds, so a few more may be logged between reading the
  # log and the signal's delivery; the bound that matters is the time to exit.
  check "SIG$sig once: stopped at step ${stop:-?} ($at logged when the signal was sent), within 5 s" \
    test -n "$stop" -a "${stop:-0}" -ge "$at" -a "$(awk -v d="$dt" 'BEGIN{print (d < 5)}')" = 1
  check "SIG$sig once: stopped early (step ${stop:-?} of 96)" test "${stop:-96}" -lt 96
  check "SIG$sig once: the checkpoint loads" "$SFVIT" eval runs/$name/last.safetensors --data fm
  "$SFVIT" train --resume runs/$name > $name-resume.log 2>&1; rc=$?
  check "SIG$sig once: the resume completes" test $rc -eq 0
  check "SIG$sig once: final weights and moments bit-identical to the uninterrupted run" \
    test "$(tensor_bytes runs/ref/last.safetensors)" = "$(tensor_bytes runs/$name/last.safetensors)"
done

# ---- a second signal exits at once ----
# Slow steps (the 4-block model, batch 256: about a second each) so both signals land inside
# one step, 0.1 s apart (two signals sent back to back can merge into one pending signal).
# A checkpoint after every step: the one of step 1 is the previous one to keep.
SIMA=$ROOT/train/configs/fmnist_sima.yaml
for sig in INT TERM; do
  name=two_$sig
  "$SFVIT" train "$SIMA" "${COMMON[@]}" train.batch_size=256 train.epochs=3 train.save_every_steps=1 train.name=$name > $name.log 2>&1 &
  pid=$!
  wait_steps runs/$name/log.jsonl 1 $pid || bad "second SIG$sig: the run did not reach step 1"
  sleep 0.2 # into step 2
  kill -$sig $pid; sleep 0.1; kill -$sig $pid
  wait $pid; rc=$?
  want=$((128 + $(kill -l $sig)))
  check "SIG$sig twice: exit $want at once (got $rc)" test $rc -eq $want
  check "SIG$sig twice: says so" grep -q "second signal, exiting now" $name.log
  check "SIG$sig twice: no 'checkpoint written' after the second signal" bash -c "! grep -q 'stopped by signal' $name.log"
  check "SIG$sig twice: the previous checkpoint loads" "$SFVIT" eval runs/$name/last.safetensors --data fm
  "$SFVIT" train --resume runs/$name train.max_steps=1 > $name-resume.log 2>&1; rc=$?
  check "SIG$sig twice: the run resumes from it" test $rc -eq 0
done

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
