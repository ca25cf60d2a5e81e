#!/usr/bin/env bash
# torch.save files end to end: every model fixture of tests/golden/pth/ (written by
# tests/golden/gen_pth.py from the PyTorch reference models, in the official, timm, DDP and
# legacy forms) goes through the real `sfvit dump` in place of the safetensors weights, and its
# logits, loss and parameter gradients are compared with the golden case's expected values by
# `test_golden_models --compare` (same tolerances as test_golden_dump.sh). Then `sfvit convert`
# with and without --model, the converted file through dump again, a .pth given directly to
# eval, viz and model.init_from, and refusals of a truncated file by the CLI.
# Usage: test_pth_golden.sh SFVIT_BINARY SOURCE_ROOT
set -uo pipefail
SFVIT=$(realpath "$1")
ROOT=$(realpath "$2")
GOLD=$ROOT/tests/golden/models
PTH=$ROOT/tests/golden/pth
CMP=$(dirname "$SFVIT")/tests/test_golden_models
W=$(mktemp -d /tmp/sfvit-pth-XXXXXX)
[ -n "${SFVIT_KEEP_TEST_DIR:-}" ] || trap 'rm -rf "$W"' EXIT
cd "$W"
source "$ROOT/tests/lib.sh"

# dump CASE WEIGHTS LAYOUT_REGEXP: dump with these weights must match the golden case.
dump_case() {
  local c=$1 weights=$2 layout=$3 out rc
  out=$("$SFVIT" dump "$GOLD/$c/config.yaml" --weights "$weights" --input "$GOLD/$c/input.safetensors" \
        --out "$c.out.safetensors" 2>&1); rc=$?
  check "$(basename "$weights"): dump exits 0" test $rc -eq 0
  [ $rc -eq 0 ] || { echo "$out"; return; }
  if [ -n "$layout" ]; then
    if grep -Eq "loaded [0-9]+ tensors, $layout" <<< "$out"; then ok "$(basename "$weights"): reports '$layout'";
    else bad "$(basename "$weights"): reports '$layout' ($out)"; fi
  fi
  out=$("$CMP" --compare "$c.out.safetensors" "$GOLD/$c/expected.safetensors" 2>&1); rc=$?
  echo "$out" | grep -E '^  dump' | sed 's/^/     /'
  check "$(basename "$weights"): logits, loss and gradients match PyTorch" test $rc -eq 0
}

dump_case vit_mixed_msa_sima "$PTH/vit_mixed_msa_sima.deit_train.pth" 'official DeiT'
dump_case vit_sima_l1_avgpool_gray "$PTH/vit_sima_l1_avgpool_gray.legacy.pth" 'official DeiT'
dump_case xcit_xca_nolpi_p16 "$PTH/xcit_xca_nolpi_p16.timm.pth" 'timm XCiT layout'
dump_case xcit_sima_l2_nolpi "$PTH/xcit_sima_l2_nolpi.official_ddp.pth" "official SimA \(XCiT\) layout \(DistributedDataParallel 'module.' prefix removed\)"
# Without BatchNorm's num_batches_tracked counters (dropped by some converters): the same
# results, and one line saying the counters were set to 0.
for c in xcit_xca_lpi soft; do
  dump_case $c "$PTH/$c.no_counters.pth" ''
  out=$("$SFVIT" dump "$GOLD/$c/config.yaml" --weights "$PTH/$c.no_counters.pth" --input "$GOLD/$c/input.safetensors" \
        --out "$c.nc.safetensors" 2>&1)
  check "$c.no_counters.pth: says the counters were set to 0" grep -q "num_batches_tracked counters are not in the file; set to 0" <<< "$out"
done
dump_case soft "$PTH/soft.official.pth" 'official SOFT layout'
# CvT as the released checkpoints are saved: a plain state_dict with the official keys,
# BatchNorm's num_batches_tracked included.
dump_case cvt_msa "$PTH/cvt_msa.official.pth" 'official CvT layout'

# convert: plain (the file's own names), then for the model (sfvit names + config).
out=$("$SFVIT" convert "$PTH/xcit_xca_nolpi_p16.timm.pth" -o plain.safetensors 2>&1)
check "convert without --model" grep -q "64 tensors written to plain.safetensors" <<< "$out"
dump_case xcit_xca_nolpi_p16 plain.safetensors 'timm XCiT layout'
out=$("$SFVIT" convert "$PTH/xcit_xca_nolpi_p16.timm.pth" -o model.safetensors --model "$GOLD/xcit_xca_nolpi_p16/config.yaml" 2>&1)
check "convert --model" grep -q "60 parameters of xcit_tiny_12_p16 written" <<< "$out"
check "converted file has sfvit names" grep -aq '"cls_attn_blocks.0.attn.qkv.weight"' model.safetensors
check "converted file carries the config" grep -aq '"config"' model.safetensors
dump_case xcit_xca_nolpi_p16 model.safetensors ''
out=$("$SFVIT" convert "$PTH/soft.official.pth" -o wrong.safetensors --model deit_tiny 2>&1); rc=$?
check "convert into the wrong model fails" test $rc -ne 0
check "  and leaves no output" test ! -e wrong.safetensors
check "  and names the known layouts" grep -q "known layout" <<< "$out"

# eval, viz and model.init_from take a .pth directly
fmnist_subset "$SFVIT" "$ROOT" 64 200
C=vit_sima_l1_avgpool_gray
out=$("$SFVIT" eval "$PTH/$C.legacy.pth" --config "$GOLD/$C/config.yaml" --data fm 2>&1); rc=$?
check "eval of a .pth (legacy format)" test $rc -eq 0
check "  reports the layout" grep -q "loaded 32 tensors, official DeiT" <<< "$out"
check "  evaluates 200 images" grep -qE "200 images .*top-1" <<< "$out"
out=$("$SFVIT" eval "$PTH/$C.legacy.pth" --data fm 2>&1); rc=$?
check "eval of a .pth without --config asks for one" grep -q "holds no config" <<< "$out"
out=$("$SFVIT" viz "$PTH/xcit_sima_l2_nolpi.official_ddp.pth" "$ROOT/tests/fuzz/corpus/image/rgb8.png" -o heat.png \
      --config "$GOLD/xcit_sima_l2_nolpi/config.yaml" 2>&1); rc=$?
check "viz of a .pth" test $rc -eq 0 -a -s heat.png
out=$("$SFVIT" train "$GOLD/$C/config.yaml" model.init_from="$PTH/$C.legacy.pth" data.root=fm train.out=runs \
      train.name=ft train.epochs=1 train.max_steps=2 train.batch_size=8 sched.warmup_epochs=0 aug.mixup=0 aug.cutmix=0 2>&1); rc=$?
check "train with model.init_from=.pth" test $rc -eq 0
check "  loads every tensor" grep -q "fine-tune from .*official DeiT (= timm) layout): 32 tensors loaded" <<< "$out"

# refusals through the CLI
head -c 3000 "$PTH/soft.official.pth" > cut.pth
out=$("$SFVIT" dump "$GOLD/soft/config.yaml" --weights cut.pth --input "$GOLD/soft/input.safetensors" --out x 2>&1); rc=$?
check "truncated .pth refused" test $rc -ne 0
check "  naming the file" grep -q "cut.pth" <<< "$out"
check "  and no output" test ! -e x

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
