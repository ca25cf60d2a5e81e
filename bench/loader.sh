#!/bin/bash
# Loader throughput: sfvit's threaded loader vs torchvision ImageFolder + DataLoader on the same
# generated JPEG tree (decode + RandomResizedCrop 224 + flip + normalize), same workers, one run.
#   bench/loader.sh [BUILD_DIR] [N_IMAGES] [WORKERS]     (defaults: build 512 2)
# Installs python3-torchvision (Debian's, with scripts/install_deps.sh) for the reference when missing.
set -euo pipefail
build=${1:-build}
n=${2:-512}
workers=${3:-2}
batch=64
epochs=3
src=$(cd "$(dirname "$0")/.." && pwd)
bin="$build/bench/loader"
[ -x "$bin" ] || bin="$src/$build/bench/loader"
[ -x "$bin" ] || { echo "bench/loader.sh: $bin not built (ninja -C $build bench/loader)" >&2; exit 1; }
if ! /usr/bin/python3 -c 'import torchvision' 2> /dev/null; then
    bash "$src/scripts/install_deps.sh" python3-torchvision >&2 \
        || { echo "bench/loader.sh: torchvision is needed for the reference: apt-get install python3-torchvision" >&2; exit 1; }
fi
dir=$(mktemp -d /tmp/sfvit_loader_bench.XXXXXX)
trap 'rm -rf "$dir"' EXIT
"$bin" gen "$dir" "$n" 500 375
echo "dataset: $n JPEGs 500x375 in $dir ($(du -sh "$dir" | cut -f1)), batch $batch, $epochs epochs, workers $workers"
ours=$("$bin" run "$dir" "$workers" "$batch" "$epochs")
echo "$ours"
theirs=$(/usr/bin/python3 "$src/bench/loader_torch.py" "$dir" "$workers" "$batch" "$epochs")
echo "$theirs"
a=$(echo "$ours" | sed -E 's/.* = ([0-9.]+) images\/s.*/\1/')
b=$(echo "$theirs" | sed -E 's/.* = ([0-9.]+) images\/s.*/\1/')
awk -v a="$a" -v b="$b" 'BEGIN { printf "ratio sfvit / torchvision: %.2fx\n", a / b }'
