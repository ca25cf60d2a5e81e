#!/usr/bin/env bash
# Exported models run in a real ONNX Runtime: for every model kind of onnx_models.sh, the
# logits of onnxruntime-node on a batch of 3 random images must match `sfvit dump`'s on the
# same input within 1e-4 relative (max |difference| / max |logit|). ONNX Runtime is not
# packaged in Debian: the pinned npm package is installed once into the build folder with
# --ignore-scripts (its postinstall downloads GPU files). Without npm, network or Node the
# test is skipped (exit 77) with the reason, never passed.
# Usage: test_onnx_runtime.sh SFVIT_BINARY SOURCE_ROOT
set -uo pipefail
SFVIT=$(realpath "$1")
ROOT=$(realpath "$2")
ORT_VERSION=1.20.1
ORT_DIR=$(dirname "$SFVIT")/onnxruntime-node-$ORT_VERSION
W=$(mktemp -d /tmp/sfvit-ort-XXXXXX)
[ -n "${SFVIT_KEEP_TEST_DIR:-}" ] || trap 'rm -rf "$W"' EXIT; echo "work dir: $W"
cd "$W"
source "$ROOT/tests/lib.sh"
source "$ROOT/tests/onnx_models.sh"

skip() { echo "SKIP: $*"; exit 77; }
command -v node > /dev/null || skip "node is not installed"
command -v npm > /dev/null || skip "npm is not installed"
/usr/bin/python3 -c 'import numpy' 2>/dev/null || skip "python3-numpy is not installed (bash scripts/install_deps.sh python3-onnx)"
if [ ! -d "$ORT_DIR/node_modules/onnxruntime-node" ]; then
  mkdir -p "$ORT_DIR"
  (cd "$ORT_DIR" && timeout 300 npm install --ignore-scripts --no-audit --no-fund --loglevel=error \
     onnxruntime-node@$ORT_VERSION > npm.log 2>&1) || { cat "$ORT_DIR/npm.log"; rm -rf "$ORT_DIR"; skip "npm install onnxruntime-node@$ORT_VERSION failed (offline?)"; }
fi
export NODE_PATH=$ORT_DIR/node_modules
node -e 'require("onnxruntime-node")' 2>/dev/null || skip "onnxruntime-node does not load on this machine"

onnx_make_checkpoints
onnx_input 3 1 28
onnx_input 3 1 32
for m in "${ONNX_MODELS[@]}"; do
  IFS='|' read -r name base S over <<< "$m"
  "$SFVIT" export runs/$name/last.safetensors -o $name.onnx > /dev/null 2>&1
  "$SFVIT" dump runs/$name/config.yaml --weights runs/$name/last.safetensors --input in$S.safetensors \
    --out dump_$name.safetensors > /dev/null 2>&1
  check "$name: runs in ONNX Runtime" node "$ROOT/tests/onnx_run.js" $name.onnx in$S.f32 3,1,$S,$S ort_$name.f32
  check "$name: ONNX Runtime logits = sfvit dump's (1e-4 relative)" /usr/bin/python3 - dump_$name.safetensors ort_$name.f32 <<'PY'
import json, struct, sys
import numpy as np
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
e = json.loads(b[8:8 + n])["logits"]
s, t = e["data_offsets"]
ref = np.frombuffer(b[8 + n + s:8 + n + t], dtype=np.float32).reshape(e["shape"])
got = np.fromfile(sys.argv[2], dtype=np.float32).reshape(ref.shape)
rel = np.abs(got - ref).max() / np.abs(ref).max()
print("  max |ort - dump| / max |dump| = %.2e" % rel)
sys.exit(0 if rel <= 1e-4 else 1)
PY
done

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
