#!/usr/bin/env bash
# `sfvit export`: every ViT/XCiT/SOFT kind to ONNX, checked by onnx.checker (Debian's
# python3-onnx, full shape inference), the exp-type node counts (no Softmax/Exp in a SimA
# model), SOFT's unrolled Newton-Raphson, atomic output and a refusal naming its key. The numbers are compared with ONNX Runtime
# in test_onnx_runtime.sh.
# Usage: test_onnx.sh SFVIT_BINARY SOURCE_ROOT
set -uo pipefail
SFVIT=$(realpath "$1")
ROOT=$(realpath "$2")
W=$(mktemp -d /tmp/sfvit-onnx-XXXXXX)
[ -n "${SFVIT_KEEP_TEST_DIR:-}" ] || trap 'rm -rf "$W"' EXIT; echo "work dir: $W"
cd "$W"
source "$ROOT/tests/lib.sh"
source "$ROOT/tests/onnx_models.sh"
skipped=0

onnx_make_checkpoints
have_checker=1
/usr/bin/python3 -c 'import onnx' 2>/dev/null || { have_checker=0; echo "skip onnx.checker: python3-onnx is not installed (bash scripts/install_deps.sh python3-onnx)"; }
for m in "${ONNX_MODELS[@]}"; do
  IFS='|' read -r name base S over <<< "$m"
  out=$("$SFVIT" export runs/$name/last.safetensors -o $name.onnx 2>&1); rc=$?
  echo "$out"
  check "$name: export exits 0" test $rc -eq 0
  softmax=$(grep -o 'Softmax [0-9]*' <<< "$out" | tail -1 | awk '{print $2}')
  exps=$(grep -o 'Exp [0-9]*' <<< "$out" | tail -1 | awk '{print $2}')
  case $name in
    vit_msa) check "$name: one Softmax per block (2), got $softmax" test "$softmax" = 2 ;;
    xcit_xca*) check "$name: Softmax in the XCA block and the 2 class-attention layers, got $softmax" test "$softmax" = 3 ;;
    soft*) check "$name: 2 Gaussian-kernel Exp per softmax-free layer (3 layers), 1 Softmax in stage 4: Exp $exps, Softmax $softmax" \
             test "$exps/$softmax" = 6/1
           iters=$(grep -o 'nr_iters: [0-9]*' runs/$name/config.yaml | awk '{print $2}')
           mm=$(grep -o 'MatMul [0-9]*' <<< "$out" | awk '{print $2}')
           pool=0; [[ $name == *fixed* ]] && pool=1  # fixed landmarks: the pooling MatMul instead of a Conv
           # per layer: 2 per NR iteration, 3 in the core, 2 in the kernels; stage 4: 2 attention;
           # Linears: 5 per layer, 5 in block 4 (q, kv, proj, fc1, fc2), 1 head
           check "$name: Newton-Raphson unrolled ($iters iterations: $mm MatMul nodes)" test "$mm" -eq $((3 * (2 * iters + 3 + 2 + 5 + pool) + 2 + 5 + 1)) ;;
    cvt_msa) check "$name: one Softmax per block (4), no Exp: Softmax $softmax, Exp $exps" test "$softmax/$exps" = 4/0 ;;
    cvt_mixed*) check "$name: a Softmax in each msa block (2 of 4), no Exp: Softmax $softmax, Exp $exps" \
                  test "$softmax/$exps" = 2/0 ;;
    vit_soft*) check "$name: 2 Gaussian-kernel Exp per block (2 blocks), no Softmax: Exp $exps, Softmax $softmax" \
                 test "$exps/${softmax:-0}" = 4/0 ;;
    *) check "$name: exp-free (Softmax $softmax, Exp $exps)" test "$softmax$exps" = 00 ;;
  esac
  if [ $have_checker = 1 ]; then
    check "$name: onnx.checker (full check) accepts it" /usr/bin/python3 -c "
import onnx, sys
m = onnx.load('$name.onnx')
onnx.checker.check_model(m, full_check=True)
assert m.opset_import[0].version == 17 and m.graph.input[0].type.tensor_type.shape.dim[0].dim_param == 'batch'
assert len(m.graph.initializer) > 0
"
  else
    skipped=$((skipped + 1))
  fi
done
out=$("$SFVIT" export runs/vit_sima_l1_auto/last.safetensors -o sima.onnx 2>&1)
check "SimA export counts its ReduceL1 token norms (2 blocks x q, k)" grep -q "ReduceL1 4" <<< "$out"

# ---- refusals and atomic output ----
"$SFVIT" train soft_small.yaml model.img_size=32 model.nr_init=paper data.root=fm train.out=runs train.name=soft_paper \
  train.epochs=1 train.max_steps=1 train.batch_size=16 train.eval_batch_size=16 train.threads=1 data.workers=1 > soft.log 2>&1
check "a SOFT checkpoint with the paper's NR init" test -s runs/soft_paper/last.safetensors
echo keep > soft.onnx
out=$("$SFVIT" export runs/soft_paper/last.safetensors -o soft.onnx 2>&1); rc=$?
check "paper NR init refused (exit 1)" test $rc -eq 1
check "the refusal names the key" grep -q "model.nr_init=paper" <<< "$out"
check "refused export leaves the old file alone" grep -q keep soft.onnx
out=$("$SFVIT" export runs/vit_msa/last.safetensors -o /nonexistent/dir/m.onnx 2>&1); rc=$?
check "unwritable output: exit 1, path named" test $rc -eq 1 -a -n "$(grep '/nonexistent/dir/m.onnx' <<< "$out")"
out=$("$SFVIT" export runs/vit_msa/last.safetensors 2>&1); rc=$?
check "missing -o: usage error" test $rc -eq 2

echo "$passed passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ] || exit 1
[ $skipped -eq 0 ] || exit 77
