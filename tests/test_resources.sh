#!/usr/bin/env bash
# Resource errors: an unwritable run folder, a full disk (a small tmpfs when this process may
# mount one, and a file-size limit), and a memory request that cannot be met. Each must give a
# clear message and a non-zero exit, never a crash, and a failed checkpoint write must leave
# the previous last.safetensors intact and loadable (no temporary file left behind).
# Usage: test_resources.sh SFVIT_BINARY SOURCE_ROOT
set -uo pipefail
SFVIT=$(realpath "$1")
ROOT=$(realpath "$2")
W=$(mktemp -d /tmp/sfvit-res-XXXXXX)
MNT=""
cleanup() { [ -n "$MNT" ] && umount "$MNT" 2> /dev/null; [ -n "${SFVIT_KEEP_TEST_DIR:-}" ] || rm -rf "$W"; }
trap cleanup EXIT; echo "work dir: $W"
cd "$W"
source "$ROOT/tests/lib.sh"
skip() { echo "skip $* (not counted)"; }

fmnist_subset "$SFVIT" "$ROOT" 256 64
BASE=$ROOT/configs/fmnist_tiny.yaml
COMMON=(data.root=$W/fm train.threads=1 data.workers=1 train.batch_size=32 train.eval_batch_size=64
        train.save_every_steps=1 train.log_every=1)

# ---- unwritable run folders ----
touch plainfile
out=$("$SFVIT" train "$BASE" "${COMMON[@]}" train.out=plainfile/runs train.name=x 2>&1); rc=$?
check "run folder under a regular file: exit non-zero" test $rc -ne 0 -a $rc -lt 128
check "run folder under a regular file: message names the folder and the reason" \
  grep -q "cannot create run folder plainfile/runs/x: Not a directory" <<< "$out"
out=$("$SFVIT" train "$BASE" "${COMMON[@]}" train.out=/proc/sfvit-test train.name=x 2>&1); rc=$?
check "run folder in /proc: exit non-zero" test $rc -ne 0 -a $rc -lt 128
check "run folder in /proc: clear message" grep -q "cannot create run folder /proc/sfvit-test/x" <<< "$out"
out=$("$SFVIT" data import-idx tr-img.gz tr-lab.gz plainfile/fm/train 2>&1); rc=$?
check "import into a folder under a file: exit non-zero" test $rc -ne 0 -a $rc -lt 128
check "import into a folder under a file: message names it" grep -q "plainfile" <<< "$out"
out=$("$SFVIT" viz /nonexistent.safetensors tr-img.gz -o plainfile/heat.png 2>&1); rc=$?
check "viz of a missing checkpoint: exit non-zero, no crash" test $rc -ne 0 -a $rc -lt 128

# ---- a full disk: the checkpoint write fails, the previous checkpoint survives ----
# setup: a run with two steps done and last.safetensors written, on the file system under test.
# then: fill it, resume; the first checkpoint write must fail cleanly.
full_disk_case() { # what dir
  local what=$1 dir=$2
  "$SFVIT" train "$BASE" "${COMMON[@]}" train.out="$dir" train.name=r train.max_steps=2 > "$what-1.log" 2>&1 \
    || { bad "$what: setup run"; tail -3 "$what-1.log"; return; }
  cp "$dir/r/last.safetensors" "$what-good.safetensors"
}
after_failed_save() { # what dir rc log
  local what=$1 dir=$2 rc=$3 log=$4
  check "$what: resume exits non-zero (got $rc)" test "$rc" -ne 0
  check "$what: the error names the checkpoint and the system error" \
    grep -qE "last.safetensors: (write|fsync|close) of .*last.safetensors.tmp.[0-9]+ failed: $5" "$log"
  check "$what: says the previous file is unchanged" grep -q "the previous file, if any, is unchanged" "$log"
  check "$what: last.safetensors byte-identical to before" cmp -s "$what-good.safetensors" "$dir/r/last.safetensors"
  check "$what: last.safetensors still loads" "$SFVIT" eval "$dir/r/last.safetensors" --data fm
  check "$what: no temporary file left" test "$(find "$dir/r" -name '*.tmp.*' | wc -l)" -eq 0
}

mkdir -p disk
if mount -t tmpfs -o size=1m tmpfs disk 2> /dev/null; then
  MNT=$W/disk
  full_disk_case tmpfs "$W/disk"
  avail=$(df -B1 --output=avail disk | tail -1 | tr -d ' ')
  # leave 64 KiB: a checkpoint is about 250 KiB
  head -c $((avail - 65536)) /dev/zero > disk/filler 2> /dev/null
  "$SFVIT" train --resume disk/r train.max_steps=2 > tmpfs-2.log 2>&1; rc=$?
  after_failed_save tmpfs "$W/disk" $rc tmpfs-2.log "No space left on device"
  rm -f disk/filler
  "$SFVIT" train --resume disk/r train.max_steps=2 > tmpfs-3.log 2>&1; rc=$?
  check "tmpfs: with space again, the resume succeeds" test $rc -eq 0
  check "tmpfs: and writes a newer checkpoint" bash -c "! cmp -s tmpfs-good.safetensors disk/r/last.safetensors"
  umount disk; MNT=""
else
  skip "full tmpfs (cannot mount tmpfs here; the file-size limit below covers the write failure)"
fi

# A file-size limit (ulimit -f, in KiB) below the checkpoint size: write() fails with EFBIG
# when SIGXFSZ is ignored...
mkdir -p fsz
full_disk_case fsize "$W/fsz"
(trap '' XFSZ; ulimit -f 128; exec "$SFVIT" train --resume fsz/r train.max_steps=2) > fsize-2.log 2>&1; rc=$?
after_failed_save fsize "$W/fsz" $rc fsize-2.log "File too large"
# ...and when the caller leaves SIGXFSZ at its default action: the trainer ignores it itself,
# so the write fails with a message instead of the kernel killing the process mid-write.
(ulimit -f 128; exec "$SFVIT" train --resume fsz/r train.max_steps=2) > fsize-3.log 2>&1; rc=$?
check "fsize, default SIGXFSZ: clean error exit, not killed (exit $rc)" test $rc -eq 1
check "fsize, default SIGXFSZ: message says why" grep -q "File too large" fsize-3.log
check "fsize, default SIGXFSZ: last.safetensors byte-identical" cmp -s fsize-good.safetensors fsz/r/last.safetensors
check "fsize, default SIGXFSZ: last.safetensors loads" "$SFVIT" eval fsz/r/last.safetensors --data fm
rm -f fsz/r/*.tmp.*
"$SFVIT" train --resume fsz/r train.max_steps=2 > fsize-4.log 2>&1; rc=$?
check "fsize: without the limit the resume succeeds" test $rc -eq 0

# ---- memory that cannot be had: the size is reported, exit status 2, no crash ----
# A realistic case: a 3 GB evaluation batch under a 2 GB address-space limit. Sanitizer builds
# reserve terabytes of address space at start-up and cannot run under ulimit -v at all.
if (ulimit -v 2000000; "$SFVIT" info deit_tiny) > /dev/null 2>&1; then
  out=$( (ulimit -v 2000000; exec "$SFVIT" train "$BASE" "${COMMON[@]}" train.out=runs train.name=mem \
          train.eval_batch_size=1000000) 2>&1 > /dev/null); rc=$?
  check "ulimit -v: exit status 2 (got $rc)" test $rc -eq 2
  check "ulimit -v: 'could not allocate' with the size" grep -qE "could not allocate [0-9]+ bytes \([0-9.]+ MiB\)" <<< "$out"
  check "ulimit -v: a hint follows" grep -q "HINT" <<< "$out"
  # A 69-byte PNG whose header claims 32768 x 32768 RGB (3 GiB of pixels) in the training set:
  # under the limit its allocation fails, and it must be a skipped bad image, not the end.
  cp -r fm fmbad
  python3 -c '
import struct, sys, zlib
def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
sys.stdout.buffer.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 32768, 32768, 8, 2, 0, 0, 0))
    + chunk(b"IDAT", zlib.compress(bytes(100))) + chunk(b"IEND", b""))' > fmbad/train/00_T-shirt_top/huge.png
  out=$( (ulimit -v 2000000; exec "$SFVIT" data check-image fmbad/train/00_T-shirt_top/huge.png) 2>&1); rc=$?
  check "ulimit -v, huge PNG header: decode error, exit 1 (got $rc)" test $rc -eq 1
  check "ulimit -v, huge PNG header: says it is too large" grep -q "too large to allocate" <<< "$out"
  out=$( (ulimit -v 2000000; exec "$SFVIT" train "$BASE" "${COMMON[@]}" data.root=$W/fmbad train.out=runs \
          train.name=badimg train.epochs=1) 2>&1); rc=$?
  check "ulimit -v, huge PNG header in the train set: training completes (exit $rc)" test $rc -eq 0
  check "ulimit -v, huge PNG header in the train set: skipped by name" grep -q "skipping bad image .*huge.png" <<< "$out"
else
  skip "ulimit -v (this binary cannot start under an address-space limit: a sanitizer build)"
fi
# An absurd request (a 2.5 TB evaluation batch) fails without any limit, in every build.
out=$(ASAN_OPTIONS="${ASAN_OPTIONS:-}:allocator_may_return_null=1:detect_leaks=0" "$SFVIT" train "$BASE" \
      "${COMMON[@]}" train.out=runs train.name=huge model.img_size=448 model.in_chans=3 \
      train.eval_batch_size=1048576 2>&1 > /dev/null); rc=$?
check "huge request: exit status 2 (got $rc)" test $rc -eq 2
check "huge request: 'could not allocate' with the size" grep -qE "could not allocate [0-9]+ bytes" <<< "$out"

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
