#!/usr/bin/env bash
# The main job: on a fresh Debian 12 machine, install what is needed, build sfvit, import
# Fashion-MNIST (Debian's dataset-fashion-mnist) into data/fmnist as an ImageNet-format
# folder, train train/configs/fmnist_sima.yaml and print the validation top-1.
# Extra arguments are config overrides, e.g. `bash train/fmnist.sh train.epochs=1`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash train/install_deps.sh
[ -f build/build.ninja ] || meson setup build --buildtype=release
ninja -C build sfvit
src=/usr/share/datasets/fashion-mnist
if [ ! -f data/fmnist/.complete ]; then
  rm -rf data/fmnist
  names=train/configs/fmnist_classes.txt
  ./build/sfvit data import-idx $src/train-images-idx3-ubyte.gz $src/train-labels-idx1-ubyte.gz data/fmnist/train --classes $names
  ./build/sfvit data import-idx $src/t10k-images-idx3-ubyte.gz $src/t10k-labels-idx1-ubyte.gz data/fmnist/val --classes $names
  touch data/fmnist/.complete
fi
name="fmnist_sima-$(date +%Y%m%d-%H%M%S)"
./build/sfvit train train/configs/fmnist_sima.yaml train.name="$name" "$@"
