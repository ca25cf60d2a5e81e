#!/usr/bin/env bash
# SIGINT and SIGTERM during training: the first signal finishes the current step, writes
# last.safetensors and exits 0 with a message; resuming from that checkpoint ends with the
# same weights as an uninterrupted run, bit for bit. A second signal exits at once (status
# 128 + signal) and leaves the previous checkpoint loadable.
# The signals are sent at fixed points of the run (SFVIT_TEST_HOLD, see tests/lib.sh
# wait_held), so the outcome does not depend on how fast the machine is.
# Usage: test_signals.sh SFVIT_BINARY SOURCE_ROOT
set -uo pipefail
SFVIT=$(realpath "$1")
ROOT=$(realpath "$2")
W=$(mktemp -d /tmp/sfvit-sig-XXXXXX)
[ -n "${SFVIT_KEEP_TEST_DIR:-}" ] || trap 'rm -rf "$W"' EXIT; echo "work dir: $W"
cd "$W"
source "$ROOT/tests/lib.sh"

fmnist_subset "$SFVIT" "$ROOT" 512 64
TINY=$ROOT/configs/fmnist_tiny.yaml
COMMON=(data.root=fm train.out=runs train.threads=1 data.workers=2 train.log_every=1 train.batch_size=32
        train.eval_batch_size=64)

# 16 steps per epoch, 6 epochs: the uninterrupted reference.
EP=train.epochs=6
"$SFVIT" train "$TINY" "${COMMON[@]}" $EP train.name=ref > ref.log 2>&1 || bad "reference run"

# ---- one signal: finish the step, checkpoint, exit 0; the resume matches the reference ----
# Held before update 21 (in epoch 2), the signal arrives during it: the run stops after it.
for sig in INT TERM; do
  name=one_$sig
  SFVIT_TEST_HOLD="step 21" "$SFVIT" train "$TINY" "${COMMON[@]}" $EP train.name=$name > $name.log 2>&1 &
  pid=$!
  if wait_held $name.log $pid "step 21"; then kill -$sig $pid; else bad "SIG$sig: the run did not reach update 21"; fi
  wait $pid; rc=$?
  check "SIG$sig once: exit 0 (got $rc)" test $rc -eq 0
  check "SIG$sig once: says it stops after this step" grep -q "stopping after this step" $name.log
  check "SIG$sig once: says it stopped and where the checkpoint is" \
    grep -qE "stopped by signal after step [0-9]+; checkpoint written: runs/$name/last.safetensors" $name.log
  stop=$(grep -oE "stopped by signal after step [0-9]+" $name.log | grep -oE '[0-9]+$')
  check "SIG$sig once: stopped after update 21, the one it arrived in (got ${stop:-none})" test "${stop:-0}" = 21
  check "SIG$sig once: the checkpoint loads" "$SFVIT" eval runs/$name/last.safetensors --data fm
  "$SFVIT" train --resume runs/$name > $name-resume.log 2>&1; rc=$?
  check "SIG$sig once: the resume completes" test $rc -eq 0
  check "SIG$sig once: final weights and moments bit-identical to the uninterrupted run" \
    test "$(tensor_bytes runs/ref/last.safetensors)" = "$(tensor_bytes runs/$name/last.safetensors)"
done

# ---- a second signal exits at once ----
# A checkpoint after every step. The first signal arrives before update 3; the second while
# the checkpoint after update 3 is half written: the run exits at once, without renaming it
# over the checkpoint of update 2, which stays loadable.
for sig in INT TERM; do
  name=two_$sig
  SFVIT_TEST_HOLD="step 3;write last.safetensors" "$SFVIT" train "$TINY" "${COMMON[@]}" train.epochs=3 \
    train.save_every_steps=1 train.name=$name > $name.log 2>&1 &
  pid=$!
  if wait_held $name.log $pid "step 3"; then kill -$sig $pid; else bad "second SIG$sig: the run did not reach update 3"; fi
  if wait_held $name.log $pid "write last.safetensors"; then kill -$sig $pid
  else bad "second SIG$sig: the run did not reach the checkpoint write after update 3"; fi
  wait $pid; rc=$?
  want=$((128 + $(kill -l $sig)))
  check "SIG$sig twice: exit $want at once (got $rc)" test $rc -eq $want
  check "SIG$sig twice: says so" grep -q "second signal, exiting now" $name.log
  check "SIG$sig twice: no 'checkpoint written' after the second signal" bash -c "! grep -q 'stopped by signal' $name.log"
  gs=$(head -c 65536 runs/$name/last.safetensors | grep -ao '"global_step":"[0-9]*"' | grep -o '[0-9]*' | head -1)
  check "SIG$sig twice: last.safetensors is the checkpoint of update 2 (got ${gs:-none})" test "${gs:-0}" = 2
  check "SIG$sig twice: the previous checkpoint loads" "$SFVIT" eval runs/$name/last.safetensors --data fm
  "$SFVIT" train --resume runs/$name train.max_steps=1 > $name-resume.log 2>&1; rc=$?
  check "SIG$sig twice: the run resumes from it" test $rc -eq 0
done

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
