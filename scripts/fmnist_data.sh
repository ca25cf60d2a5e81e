#!/usr/bin/env bash
# Builds sfvit if needed and imports Debian's Fashion-MNIST (dataset-fashion-mnist) once into
# data/fmnist/{train,val}/<class>/*.png; a finished import is marked by data/fmnist/.complete,
# so an interrupted one starts over. Used by scripts/fmnist.sh and scripts/finetune_example.sh.
# build/ is a release build for this CPU whoever configured it first (the test command
# builds in build-test/ and leaves it alone).
set -euo pipefail
cd "$(dirname "$0")/.."
opts=(--buildtype=release -Dnative=true -Dwerror=false)
if [ -f build/build.ninja ]; then meson configure build "${opts[@]}" > /dev/null; else meson setup build "${opts[@]}"; fi
ninja -C build sfvit > /dev/null
src=/usr/share/datasets/fashion-mnist
if [ ! -f data/fmnist/.complete ]; then
  rm -rf data/fmnist
  names=configs/fmnist_classes.txt
  ./build/sfvit data import-idx $src/train-images-idx3-ubyte.gz $src/train-labels-idx1-ubyte.gz data/fmnist/train --classes $names
  ./build/sfvit data import-idx $src/t10k-images-idx3-ubyte.gz $src/t10k-labels-idx1-ubyte.gz data/fmnist/val --classes $names
  touch data/fmnist/.complete
fi
