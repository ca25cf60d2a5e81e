#!/bin/bash
# Data-parallel scaling on this machine: the same training run (Fashion-MNIST, the README's
# SimA ViT, global batch 128) as 1 process x 1 thread and as `mpirun -np 2` x 1 thread each,
# over loopback TCP. Reports images/s of each, the speed-up, the gradient all-reduce time per
# update, and its share of the step. Then a DeiT-S training step on this machine (random
# data, `sfvit bench`) and the network throughput one such step needs per rank.
#   bench/mpi_scaling.sh [BUILD_DIR] [STEPS] [DEIT_BATCH]    (defaults: build 60 16; DEIT_BATCH 0 skips DeiT-S)
set -euo pipefail
build=${1:-build}
steps=${2:-60}
deit_batch=${3:-16}
src=$(cd "$(dirname "$0")/.." && pwd)
bin="$build/sfvit"
[ -x "$bin" ] || bin="$src/$build/sfvit"
[ -x "$bin" ] || { echo "bench/mpi_scaling.sh: $bin not built (ninja -C $build)" >&2; exit 1; }
bin=$(realpath "$bin")
ldd "$bin" | grep -q libmpi || { echo "bench/mpi_scaling.sh: $bin was built without MPI (-Dmpi)" >&2; exit 1; }
FM=/usr/share/datasets/fashion-mnist
[ -f $FM/train-images-idx3-ubyte.gz ] || { echo "needs dataset-fashion-mnist" >&2; exit 1; }
MPIRUN=(mpirun --oversubscribe --bind-to none --mca pml ob1 --mca btl self,tcp --mca btl_tcp_if_include lo)
[ "$(id -u)" -eq 0 ] && MPIRUN+=(--allow-run-as-root)

dir=$(mktemp -d /tmp/sfvit_mpi_bench.XXXXXX)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
idx_head() { # src.gz dst.gz N record_bytes dims: the first N records of an IDX file
  local src=$1 dst=$2 n=$3 rec=$4 dims=$5
  { printf "\x00\x00\x08$dims"
    printf "\\x$(printf %02x $(( (n >> 24) & 255 )))\\x$(printf %02x $(( (n >> 16) & 255 )))\\x$(printf %02x $(( (n >> 8) & 255 )))\\x$(printf %02x $(( n & 255 )))"
    if [ "$dims" = '\x03' ]; then printf '\x00\x00\x00\x1c\x00\x00\x00\x1c'; hdr=16; else hdr=8; fi
    zcat "$src" | tail -c +$((hdr + 1)) | head -c $((n * rec)) || true  # head closes the pipe early
  } | gzip -1 > "$dst"
}
n=$(( (steps + 1) * 128 ))
idx_head $FM/train-images-idx3-ubyte.gz tr-img.gz $n 784 '\x03'
idx_head $FM/train-labels-idx1-ubyte.gz tr-lab.gz $n 1 '\x01'
idx_head $FM/t10k-images-idx3-ubyte.gz va-img.gz 256 784 '\x03'
idx_head $FM/t10k-labels-idx1-ubyte.gz va-lab.gz 256 1 '\x01'
"$bin" data import-idx tr-img.gz tr-lab.gz fm/train --classes "$src/configs/fmnist_classes.txt" > /dev/null
"$bin" data import-idx va-img.gz va-lab.gz fm/val --classes "$src/configs/fmnist_classes.txt" > /dev/null

run=("$bin" train "$src/configs/fmnist_sima.yaml" data.root=fm train.out=runs train.threads=1
     data.workers=1 train.batch_size=128 train.epochs=1 train.max_steps=$steps train.log_every=10)
# Mean images/s of the log windows after the first (warm-up excluded).
img_s() { grep '"batch"' "$1" | tail -n +2 | grep -o '"img_per_s":[0-9.]*' | cut -d: -f2 |
          awk '{s += $1; n++} END {printf "%.1f", n ? s / n : 0}'; }

echo "Fashion-MNIST SimA ViT (fmnist_sima.yaml), global batch 128, $steps steps, 1 thread per rank, $(nproc) cores"
echo "load average before the runs: $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine skews every number below)"
"${run[@]}" train.name=p1 > p1.log 2>&1
"${MPIRUN[@]}" -np 2 "${run[@]}" train.name=p2 > p2.log 2>&1
a=$(img_s runs/p1/log.jsonl)
b=$(img_s runs/p2/log.jsonl)
ar=$(grep -o 'allreduce: [0-9.]* ms per update' p2.log | awk '{print $2}')
mb=$(grep -o '[0-9.]* MB of gradient' p2.log | awk '{print $1}')
echo "1 rank : $a img/s"
echo "2 ranks: $b img/s"
awk -v a="$a" -v b="$b" -v ar="$ar" -v mb="$mb" 'BEGIN {
  step = 1000 * 128 / b
  printf "speed-up 2 ranks / 1 rank: %.2fx (efficiency %.0f%%)\n", b / a, 50 * b / a
  printf "allreduce: %.2f ms per update (%s MB of gradient), %.1f%% of the %.1f ms step\n", ar, mb, 100 * ar / step, step
}'

# The ceiling 2 ranks could reach here: two independent 1-thread processes at once, no MPI
# (random data, `sfvit bench`), against one alone at the same per-rank batch of 64.
cfg="$src/configs/fmnist_sima.yaml"
one=$(SFVIT_THREADS=1 "$bin" bench "$cfg" train.batch_size=64 --steps 10 --no-infer 2>&1 | grep -o 'train_img_per_s [0-9.]*' | awk '{print $2}')
SFVIT_THREADS=1 "$bin" bench "$cfg" train.batch_size=64 --steps 10 --no-infer > c1.log 2>&1 &
SFVIT_THREADS=1 "$bin" bench "$cfg" train.batch_size=64 --steps 10 --no-infer > c2.log 2>&1
wait
two=$(cat c1.log c2.log | grep -o 'train_img_per_s [0-9.]*' | awk '{s += $2} END {print s}')
awk -v a="$one" -v b="$two" 'BEGIN {
  printf "ceiling without MPI: 1 process %.1f img/s, 2 independent processes together %.1f img/s (%.2fx)\n", a, b, b / a
}'

if [ "$deit_batch" -gt 0 ]; then
  echo
  echo "DeiT-S (deit_small_sima.yaml) training step on this machine, batch $deit_batch per rank, $(nproc) threads, random data:"
  out=$("$bin" bench "$src/configs/deit_small_sima.yaml" train.batch_size=$deit_batch --steps 2 --no-infer 2>&1)
  ips=$(grep -o 'train_img_per_s [0-9.]*' <<< "$out" | awk '{print $2}')
  params=$("$bin" info deit_small 2>&1 | grep 'total params' | grep -o '[0-9,]*$' | tr -d ,)
  awk -v ips="$ips" -v b="$deit_batch" -v p="$params" 'BEGIN {
    step = b / ips; bytes = 4 * p
    printf "  %.2f img/s, %.2f s per step; gradient %.1f MB per step\n", ips, step, bytes / 1e6
    printf "  gradient bytes / step time = %.1f MB/s per rank here", bytes / step / 1e6
    printf " (a ring all-reduce moves 2(P-1)/P of that each way: %.1f MB/s at P=2)\n", bytes / step / 1e6
    printf "  at 0.25 s per step (an accelerator-class node) the same step needs %.0f MB/s = %.1f Gbit/s\n",
           bytes / 0.25 / 1e6, 8 * bytes / 0.25 / 1e9
  }'
fi
