# lib.sh — helpers shared by the integration tests (sourced, not run): pass/fail counting and
# a small real Fashion-MNIST subset made from Debian's dataset-fashion-mnist.
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   $*"; }
bad() { failed=$((failed + 1)); echo "FAIL $*"; }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }

# A gzip'd IDX file holding the first N records of another (header count rewritten).
idx_head() { # src.gz dst.gz N record_bytes dims ('\x03' images, '\x01' labels)
  local src=$1 dst=$2 n=$3 rec=$4 dims=$5 hdr
  { printf "\x00\x00\x08$dims"
    printf "\\x$(printf %02x $(( (n >> 24) & 255 )))\\x$(printf %02x $(( (n >> 16) & 255 )))\\x$(printf %02x $(( (n >> 8) & 255 )))\\x$(printf %02x $(( n & 255 )))"
    if [ "$dims" = '\x03' ]; then printf '\x00\x00\x00\x1c\x00\x00\x00\x1c'; hdr=16; else hdr=8; fi
    zcat "$src" | tail -c +$((hdr + 1)) | head -c $((n * rec))
  } | gzip -1 > "$dst"
}

# The tensor bytes of a safetensors file (after the 8-byte length and the JSON header, whose
# metadata names the run and so differs between runs).
tensor_bytes() { local n; n=$(od -An -tu8 -N8 "$1" | tr -d ' '); tail -c +$((9 + n)) "$1" | md5sum; }

# fm/{train,val} in the working folder: the first N_TRAIN training and N_VAL test images of
# Debian's Fashion-MNIST, imported with `sfvit data import-idx` (two checks). A missing
# dataset package fails the whole test.
fmnist_subset() { # SFVIT_BINARY SOURCE_ROOT N_TRAIN N_VAL
  local sfvit=$1 names=$2/configs/fmnist_classes.txt n_tr=$3 n_va=$4
  local fm=/usr/share/datasets/fashion-mnist
  if [ ! -f $fm/train-images-idx3-ubyte.gz ]; then
    echo "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)"; echo "0 passed, 1 failed"; exit 1
  fi
  idx_head $fm/train-images-idx3-ubyte.gz tr-img.gz "$n_tr" 784 '\x03'
  idx_head $fm/train-labels-idx1-ubyte.gz tr-lab.gz "$n_tr" 1 '\x01'
  idx_head $fm/t10k-images-idx3-ubyte.gz va-img.gz "$n_va" 784 '\x03'
  idx_head $fm/t10k-labels-idx1-ubyte.gz va-lab.gz "$n_va" 1 '\x01'
  check "data import-idx train ($n_tr images)" "$sfvit" data import-idx tr-img.gz tr-lab.gz fm/train --classes "$names"
  check "data import-idx val ($n_va images)" "$sfvit" data import-idx va-img.gz va-lab.gz fm/val --classes "$names"
}

# Waits, without a time limit or a sleep, until the process PID, run with SFVIT_TEST_HOLD,
# prints "sfvit test hook: held at POINT" into LOG (it then waits for a signal; see
# sf_test_hold in include/sfvit/core.h). Fails when the process ends before reaching POINT.
# tail -F, not -f: the caller starts PID as `cmd > LOG &`, so LOG may not exist yet when the
# wait begins (the child opens it after the fork), and tail -f gives up on a missing file at once.
wait_held() { # LOG PID POINT
  local re
  re="sfvit test hook: held at $(printf '%s' "$3" | sed 's/[].[*^$\\/]/\\&/g')\$"
  grep -q -m1 -e "$re" <(tail -n +1 -F --pid="$2" "$1" 2> /dev/null)
}
