#!/usr/bin/env bash
# The main job: on a fresh Debian 12 machine, install what is needed, build sfvit, import
# Fashion-MNIST (Debian's dataset-fashion-mnist) into data/fmnist as an ImageNet-format
# folder, train train/configs/fmnist_sima.yaml and print the validation top-1.
# Extra arguments are config overrides, e.g. `bash train/fmnist.sh train.epochs=1`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash train/install_deps.sh
bash train/fmnist_data.sh
name="fmnist_sima-$(date +%Y%m%d-%H%M%S)"
./build/sfvit train train/configs/fmnist_sima.yaml train.name="$name" "$@"
