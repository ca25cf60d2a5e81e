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
