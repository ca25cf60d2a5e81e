#!/usr/bin/env bash
# study.sh — the ablation study of docs/results.md, three `sfvit ablate` grids with 3 seeds per
# cell, then the figures of `sfvit plot`:
#   norm   SimA's attn_norm l1 / l2 / none at the recipe's lr (2e-3) and at 5x that (1e-2)
#   heads  4 heads vs 1 head, for SimA and for softmax attention (MSA)
#   kinds  SimA, MSA (ViT layout), XCA, SimA (XCiT layout) and SOFT at width 64, 4 blocks
# Usage: bash scripts/study.sh [DATA_ROOT] [key=value ...]
#   DATA_ROOT: any ImageNet-format folder (DATA_ROOT/{train,val}/<class>/*); default: a
#   10,000 / 2,000-image subset of Debian's Fashion-MNIST made in data/fmnist_study. The class
#   count is read from the folder. key=value overrides go to every run (e.g. train.threads=2).
# Environment: SEEDS (default 3), OUT (default runs/study), FIGURES (default docs/figures).
# Re-running the same command continues an interrupted study: finished cells are not re-run.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/sfvit ] || { meson setup build --buildtype=release && ninja -C build sfvit; }
sfvit=$PWD/build/sfvit
root=data/fmnist_study/fm
if [ $# -gt 0 ] && [[ "$1" != *=* ]]; then root=$1; shift; fi
if [ "$root" = data/fmnist_study/fm ] && [ ! -f data/fmnist_study/.complete ]; then
  rm -rf data/fmnist_study && mkdir -p data/fmnist_study
  (cd data/fmnist_study && source ../../tests/lib.sh && fmnist_subset "$sfvit" ../.. 10000 2000 && rm -f ./*.gz)
  touch data/fmnist_study/.complete
fi
classes=$(find "$root/train" -mindepth 1 -maxdepth 1 -type d | wc -l)
seeds=${SEEDS:-3}
out=${OUT:-runs/study}
figures=${FIGURES:-docs/figures}
common=(data.root="$root" model.num_classes="$classes" train.out="$out" train.threads=1 "$@")
c=configs
status=0
"$sfvit" ablate $c/study_vit.yaml "${common[@]}" train.name=norm \
  model.attn_norm=l1,l2,none optim.lr=2e-3,1e-2 --seeds "$seeds" || status=1
"$sfvit" ablate $c/study_vit.yaml "${common[@]}" train.name=heads \
  model.attn=sima,msa model.num_heads=4,1 --seeds "$seeds" || status=1
"$sfvit" ablate $c/study_vit.yaml,$c/study_vit_msa.yaml,$c/study_xcit.yaml,$c/study_xcit_sima.yaml,$c/study_soft.yaml \
  "${common[@]}" train.name=kinds --seeds "$seeds" || status=1
if "$sfvit" help | grep -q "^  plot"; then
  mkdir -p "$figures"
  for grid in norm heads kinds; do
    "$sfvit" plot "$out/$grid" -o "$figures/study_$grid.png" || status=1
  done
  k=$out/kinds/config=study
  "$sfvit" plot ${k}_vit/seed0 ${k}_vit_msa/seed0 ${k}_xcit/seed0 ${k}_xcit_sima/seed0 ${k}_soft/seed0 \
    -o "$figures/study_kinds_curves.png" || status=1
  n=$out/norm/attn_norm
  "$sfvit" plot "$n=l1,lr=2e-3/seed0" "$n=l2,lr=2e-3/seed0" "$n=none,lr=2e-3/seed0" \
    -o "$figures/study_norm_curves.png" || status=1
fi
exit $status
