# onnx_models.sh — sourced by test_onnx.sh and test_onnx_runtime.sh: a tiny checkpoint of
# every model kind `sfvit export` handles, trained for two steps on a small real
# Fashion-MNIST subset (so BatchNorm statistics and weights are not the init values), and
# one random normalized input batch for `sfvit dump` and ONNX Runtime alike.
# Needs: lib.sh sourced, $SFVIT and $ROOT set, the working folder current.

# name | base config (configs/ or the working folder) | image side | overrides
# (the tiny sizes keep each export and run well under a second)
ONNX_MODELS=(
  "vit_msa|fmnist_tiny.yaml|28|model.attn=msa"
  "vit_sima_l1_auto|fmnist_tiny.yaml|28|model.attn=sima model.attn_norm=l1"
  "vit_sima_l2_qk_first_avg|fmnist_tiny.yaml|28|model.attn=sima model.attn_norm=l2 model.sima_order=qk_first model.global_pool=avg"
  "vit_relu_none|fmnist_tiny.yaml|28|model.attn=sima model.attn_norm=none model.act=relu"
  "xcit_xca_p8|fmnist_sima.yaml|32|model.attn=xca model.embed_dim=32 model.depth=1 model.num_heads=2"
  "xcit_sima_p8|fmnist_sima.yaml|32|model.attn=sima model.embed_dim=32 model.depth=1 model.num_heads=2"
  "xcit_sima_p16_nolpi|fmnist_sima.yaml|32|model.name=xcit_tiny_12_p16 model.num_classes=10 model.in_chans=1 model.attn=sima model.attn_norm=l2 model.embed_dim=32 model.depth=2 model.num_heads=2 model.lpi=false"
  "soft|soft_small.yaml|32|model.attn_norm=none"
  "soft_pp|soft_small.yaml|32|model.attn_norm=symmetric"
  "soft_fixed|soft_small.yaml|32|model.attn_norm=none model.soft_landmarks=fixed model.num_landmarks=9"
  "vit_soft_fixed|fmnist_tiny.yaml|28|model.attn=soft model.attn_norm=none model.soft_landmarks=fixed model.num_landmarks=9"
  "vit_softpp_fixed_avg|fmnist_tiny.yaml|28|model.attn=soft model.attn_norm=symmetric model.soft_landmarks=fixed model.num_landmarks=4 model.global_pool=avg"
  "cvt_sima_l1_quick_gelu|fmnist_cvt_sima.yaml|28|"
  "cvt_msa|fmnist_cvt_sima.yaml|28|model.attn=msa"
  "cvt_mixed_l2_qk_first_gelu|fmnist_cvt_sima.yaml|28|model.block_attn=[msa,sima,msa,sima] model.attn_norm=l2 model.sima_order=qk_first model.act=gelu model.stage_heads=[2,2,3]"
)

# onnx_make_checkpoints: runs/<name>/last.safetensors for every model above.
onnx_make_checkpoints() {
  fmnist_subset "$SFVIT" "$ROOT" 256 128
  # a SOFT pyramid small enough for the test: 32 px -> grids 8, 4, 2, 1
  printf 'base: %s\nmodel:\n  name: soft_tiny\n  in_chans: 1\n  num_classes: 10\n  embed_dims: [16, 32, 32, 64]\n  depths: [1, 1, 1, 1]\n  num_heads: [2, 2, 2, 2]\n' \
    "$ROOT/configs/fmnist_tiny.yaml" > soft_small.yaml
  for m in "${ONNX_MODELS[@]}"; do
    IFS='|' read -r name base S over <<< "$m"
    [ -f "$base" ] || base=$ROOT/configs/$base
    # shellcheck disable=SC2086
    "$SFVIT" train "$base" $over model.img_size=$S \
      data.root=fm train.out=runs train.name=$name train.epochs=1 train.max_steps=2 train.batch_size=16 \
      train.eval_batch_size=16 train.threads=1 data.workers=1 > train_$name.log 2>&1
    check "$name: checkpoint" test -s runs/$name/last.safetensors
  done
}

# onnx_input B C S: in.f32 (raw) and in.safetensors (for sfvit dump) with B random images.
onnx_input() {
  /usr/bin/python3 - "$@" <<'PY'
import json, struct, sys
import numpy as np
B, C, S = map(int, sys.argv[1:4])
x = np.random.default_rng(0).standard_normal((B, C, S, S)).astype(np.float32)
x.tofile("in%d.f32" % S)
labels = np.zeros(B, dtype=np.int64)
hdr = {"images": {"dtype": "F32", "shape": [B, C, S, S], "data_offsets": [0, x.nbytes]},
       "labels": {"dtype": "I64", "shape": [B], "data_offsets": [x.nbytes, x.nbytes + labels.nbytes]}}
h = json.dumps(hdr).encode()
h += b" " * (-len(h) % 8)
open("in%d.safetensors" % S, "wb").write(struct.pack("<Q", len(h)) + h + x.tobytes() + labels.tobytes())
PY
}
