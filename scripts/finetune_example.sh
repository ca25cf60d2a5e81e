#!/usr/bin/env bash
# The fine-tuning example (docs/checkpoints.md): train on one task, save, fine-tune on
# Fashion-MNIST at another resolution with a new head, and compare with training from scratch
# for the same number of steps.
#   1. pretrain: the main job's XCiT -> SimA model at 32x32 on 5 of the 10 classes (Sandal,
#      Shirt, Sneaker, Bag, Ankle boot), one epoch (configs/fmnist_pretrain5.yaml);
#   2. fine-tune: all 10 classes at 48x48 from that checkpoint, new 10-class head, a twentieth of
#      the training set for one epoch (fmnist_finetune.yaml);
#   3. from scratch: the same run without init_from, at the fine-tune lr and at the main job's lr.
# Prints one table of val top-1 (10,000 test images). A few minutes on 2 cores; on a busy
# machine SFVIT_THREADS=1 OMP_WAIT_POLICY=passive is faster than two spinning threads.
# Usage: bash scripts/finetune_example.sh [key=value ...]   (overrides for steps 2 and 3)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/fmnist_data.sh
# The pretraining task: five class folders linked from the full import.
rm -rf data/fmnist5
for split in train val; do
  mkdir -p data/fmnist5/$split
  for c in 05_Sandal 06_Shirt 07_Sneaker 08_Bag 09_Ankle_boot; do ln -s "../../fmnist/$split/$c" "data/fmnist5/$split/$c"; done
done
stamp=$(date +%Y%m%d-%H%M%S)
run() { # NAME CONFIG [key=value ...]: trains, prints the run's final line, keeps its top-1
  local name=$1 cfg=$2; shift 2
  local t0=$SECONDS
  ./build/sfvit train "$cfg" train.name="$name-$stamp" "$@" > "runs/$name-$stamp.log" 2>&1 \
    || { tail -20 "runs/$name-$stamp.log"; exit 1; }
  grep -E '^fine-tune from' "runs/$name-$stamp.log" || true
  local line; line=$(grep -E '^final val top-1' "runs/$name-$stamp.log")
  echo "$name: $line"
  result[$name]="$(sed -E 's/^final val top-1 ([0-9.]+%).*/\1/' <<< "$line") ($((SECONDS - t0)) s)"
}
mkdir -p runs
declare -A result
run pretrain5 configs/fmnist_pretrain5.yaml
ckpt=runs/pretrain5-$stamp/best.safetensors
run finetune48 configs/fmnist_finetune.yaml model.init_from="$ckpt" "$@"
run scratch48 configs/fmnist_finetune.yaml model.init_from="" "$@"
run scratch48_lr2e-3 configs/fmnist_finetune.yaml model.init_from="" optim.lr=2e-3 sched.warmup_epochs=0.25 "$@"
steps=$(grep -oE 'step [0-9]+/[0-9]+' "runs/finetune48-$stamp.log" | tail -1 | cut -d/ -f2 || true)
echo
echo "| run (10 classes, 48x48, $steps steps of batch 32) | val top-1 |"
echo "|---|---|"
echo "| fine-tuned from the 5-class 32x32 checkpoint | ${result[finetune48]} |"
echo "| from scratch, same recipe (lr 1e-3) | ${result[scratch48]} |"
echo "| from scratch, the main job's lr 2e-3 | ${result[scratch48_lr2e-3]} |"
echo "(pretraining: 5 classes at 32x32, 1 epoch, val top-1 on those classes ${result[pretrain5]})"
