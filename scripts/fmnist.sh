#!/usr/bin/env bash
# The main job: on a fresh Debian 12 machine, install what is needed, build sfvit, import
# Fashion-MNIST (Debian's dataset-fashion-mnist) into data/fmnist as an ImageNet-format
# folder, train configs/fmnist_sima.yaml and print the validation top-1.
# Extra arguments are config overrides, e.g. `bash scripts/fmnist.sh train.epochs=1`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
bash scripts/fmnist_data.sh
name="fmnist_sima-$(date +%Y%m%d-%H%M%S)"
./build/sfvit train configs/fmnist_sima.yaml train.name="$name" "$@"
