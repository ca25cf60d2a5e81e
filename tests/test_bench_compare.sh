#!/usr/bin/env bash
# Tests of bench/compare's summary (SUMMARIZE=DIR, no benchmark runs) on handmade kept numbers:
# the medians over rounds, the ratios, and the bf16 targets with their verdicts for each kind
# of CPU (AMX, AVX512_BF16 without AMX, no native bf16), read from the kernels line kept with
# the numbers, so a table summarized on another machine still names the machine it came from;
# SPLIT=1's table of each step's products and rest, and the rule that sorts PyTorch's
# profiled ops into the two.
# Usage: test_bench_compare.sh SFVIT_BINARY SOURCE_ROOT
set -uo pipefail
ROOT=$(realpath "$2")
W=$(mktemp -d /tmp/sfvit-bench-compare-XXXXXX)
[ -n "${SFVIT_KEEP_TEST_DIR:-}" ] || trap 'rm -rf "$W"' EXIT; echo "work dir: $W"
cd "$W"
source "$ROOT/tests/lib.sh"

# kept DIR ISA: three rounds of the two DeiT-S SimA phases and the Fashion-MNIST model.
# DeiT-S SimA training, sfvit bf16 / PyTorch autocast: medians 30 / 14 = 2.14; sfvit bf16 /
# sfvit fp32: 30 / 10 = 3.0; inference 60 / 50 = 1.2; fmnist 900 / 1000 = 0.9 (behind).
# Peak RSS bf16 / fp32: DeiT-S 770 / 850, fmnist 52.3 / 51.9 = 1.008.
kept() { # DIR KERNELS
  mkdir -p "$1"
  echo "$2" > "$1/kernels"
  echo "Test CPU" > "$1/cpu"
  echo "bf16 products: oneDNN's bf16 kernels (train.bf16_products=onednn, chosen by auto)" > "$1/sfb.products"
  printf '%s\n' 10 9 11 > "$1/sf.deit_small_sima.train_img_per_s"
  printf '%s\n' 20 20 20 > "$1/sf.deit_small_sima.infer_img_per_s"
  printf '%s\n' 7 7 7 > "$1/pt.deit_small_sima.train_img_per_s"
  printf '%s\n' 15 15 15 > "$1/pt.deit_small_sima.infer_img_per_s"
  printf '%s\n' 31 30 29 > "$1/sfb.deit_small_sima.train_img_per_s"
  printf '%s\n' 60 60 60 > "$1/sfb.deit_small_sima.infer_img_per_s"
  printf '%s\n' 14 13 15 > "$1/ptb.deit_small_sima.train_img_per_s"
  printf '%s\n' 50 50 50 > "$1/ptb.deit_small_sima.infer_img_per_s"
  printf '%s\n' 850 850 850 > "$1/sf.deit_small_sima.train_peak_rss_mib"
  printf '%s\n' 770 770 770 > "$1/sfb.deit_small_sima.train_peak_rss_mib"
  printf '%s\n' 1500 1500 1500 > "$1/pt.deit_small_sima.train_peak_rss_mib"
  printf '%s\n' 1400 1400 1400 > "$1/ptb.deit_small_sima.train_peak_rss_mib"
  printf '%s\n' 1000 1000 1000 > "$1/sf.fmnist.train_img_per_s"
  printf '%s\n' 300 300 300 > "$1/pt.fmnist.train_img_per_s"
  printf '%s\n' 900 900 900 > "$1/sfb.fmnist.train_img_per_s"
  printf '%s\n' 1000 1000 1000 > "$1/ptb.fmnist.train_img_per_s"
  printf '%s\n' 51.9 51.9 51.9 > "$1/sf.fmnist.train_peak_rss_mib"
  printf '%s\n' 52.3 52.3 52.3 > "$1/sfb.fmnist.train_peak_rss_mib"
  printf '%s\n' 290 290 290 > "$1/ptb.fmnist.train_peak_rss_mib"
}
native="oneDNN 2.6.3, ISA %s; f32 matmul: brg:avx512_core; bf16 matmul: %s (native)"

kept amx "$(printf "$native" AMX brg:avx512_core_amx)"
out=$(SUMMARIZE=amx bash "$ROOT/bench/compare" 2>&1); rc=$?
echo "$out" | sed -n '/^# bf16 targets/,/^$/p'
check "AMX: the summary runs (status 0)" test $rc -eq 0
check "the header names the kept CPU and kernels" grep -q "^# CPU: Test CPU; oneDNN 2.6.3, ISA AMX" <<< "$out"
check "the bf16 table: medians and their ratio (30 / 14)" \
  grep -Eq "^deit_small_sima b8 train +30.00 +14.00 +2.14 +3.00 +2.00 +850/770/1400" <<< "$out"
check "AMX: >= 2x autocast, measured 2.14, met" \
  grep -Eq "^deit_small_sima b8 train, sfvit bf16 / PyTorch autocast +2.14 +>= 2.0  met$" <<< "$out"
check "AMX: >= 2.5x sfvit fp32, measured 3.00, met" \
  grep -Eq "^deit_small_sima b8 train, sfvit bf16 / sfvit fp32 +3.00 +>= 2.5  met$" <<< "$out"
check "every workload ahead: the lowest is fmnist at 0.90, not met" \
  grep -Eq "^every workload ahead of autocast \(lowest: fmnist train\) +0.90 +>= 1.0  NOT met$" <<< "$out"
check "DeiT-S peak memory bf16 / fp32 0.906, met" \
  grep -Eq "^deit_small_sima b8 train, peak RSS sfvit bf16 / sfvit fp32 +0.906 +<= 1.0  met$" <<< "$out"
check "every workload's memory: the highest is fmnist at 1.008, not met" \
  grep -Eq "^every workload's peak RSS, bf16 / fp32 \(highest: fmnist\) +1.008 +<= 1.0  NOT met$" <<< "$out"

# The same numbers on a CPU with AVX512_BF16 alone: the 1.3x target, the AMX ones named only.
kept avx "$(printf "$native" AVX512_BF16 brg:avx512_core_bf16)"
out=$(SUMMARIZE=avx bash "$ROOT/bench/compare" 2>&1)
check "AVX512_BF16: >= 1.3x autocast, measured 2.14, met" \
  grep -Eq "^deit_small_sima b8 train, sfvit bf16 / PyTorch autocast +2.14 +>= 1.3  met$" <<< "$out"
check "AVX512_BF16: no verdict on the AMX target against fp32" \
  bash -c '! grep -q "train, sfvit bf16 / sfvit fp32" <<< "$1" && grep -q "this CPU has no AMX" <<< "$1"' _ "$out"
# A target missed: DeiT-S bf16 at 17 / 14 = 1.21 < 1.3.
printf '%s\n' 17 17 17 > avx/sfb.deit_small_sima.train_img_per_s
out=$(SUMMARIZE=avx bash "$ROOT/bench/compare" 2>&1)
check "AVX512_BF16: 1.21 < 1.3 is NOT met" \
  grep -Eq "^deit_small_sima b8 train, sfvit bf16 / PyTorch autocast +1.21 +>= 1.3  NOT met$" <<< "$out"

# No native bf16: the emulated column is labelled, and no speed verdict is given.
kept emu "oneDNN 2.6.3, ISA AVX2; f32 matmul: brg:avx2; bf16 matmul: none"
out=$(SUMMARIZE=emu bash "$ROOT/bench/compare" 2>&1)
check "no native bf16: the column says EMULATED" grep -q "sfvit bf16 EMULATED" <<< "$out"
check "no native bf16: no verdicts, and why" \
  bash -c '! grep -q " met$" <<< "$1" && grep -q "^no native bf16 here: the speed targets need AVX512_BF16 or AMX" <<< "$1"' _ "$out"

# SPLIT=1: each step split into its products and the rest. sfvit's rest from the run with
# --no-products (img/s at batch 8): fp32 median 10 img/s (800 ms), 40 without products (200
# ms); bf16 30 (266.7 ms) and 60 (133.3 ms). PyTorch's from its profiled products: fp32 900 +
# 500 ms, autocast 300 + 271.
printf '%s\n' 40 39 41 > amx/sf.deit_small_sima.rest_img_per_s
printf '%s\n' 900 900 900 > amx/pt.deit_small_sima.train_products_ms
printf '%s\n' 500 500 500 > amx/pt.deit_small_sima.train_rest_ms
printf '%s\n' 60 60 60 > amx/sfb.deit_small_sima.rest_img_per_s
printf '%s\n' 300 300 300 > amx/ptb.deit_small_sima.train_products_ms
printf '%s\n' 271 271 271 > amx/ptb.deit_small_sima.train_rest_ms
out=$(SUMMARIZE=amx bash "$ROOT/bench/compare" 2>&1)
echo "$out" | grep -A4 "the training step outside its products"
check "split, fp32: sfvit 800 = 600 products + 200 rest, PyTorch 1400 = 900 + 500, rests 2.50" \
  bash -c 'sed -n "/^# fp32: the training step outside/,/^$/p" <<< "$1" |
    grep -Eq "^deit_small_sima b8 +800.0 +600.0 +200.0 +1400.0 +900.0 +500.0 +2.50$"' _ "$out"
check "split, bf16: sfvit 266.7 = 133.3 + 133.3, autocast 571 = 300 + 271, rests 2.03" \
  bash -c 'sed -n "/^# bf16 (sfvit train.precision=bf16, PyTorch autocast): the training step/,/^$/p" <<< "$1" |
    grep -Eq "^deit_small_sima b8 +266.7 +133.3 +133.3 +571.0 +300.0 +271.0 +2.03$"' _ "$out"
check "split: a workload run without SPLIT gets no row" \
  bash -c '! sed -n "/outside its products/,/^$/p" <<< "$1" | grep -q "^fmnist"' _ "$out"

# Which of PyTorch's profiled ops are products (bench/torch_split.py, no PyTorch needed): the
# matrix products, a dense convolution whole, a depthwise one only when run as im2col and a
# product; everything else is the rest, largest first.
split=$(cd "$ROOT/bench" && python3 -c '
import torch_split
ev = [("aten::mm", [[8, 4], [4, 2]], 10.0), ("aten::addmm", [[2], [8, 4], [4, 2]], 5.0),
      ("aten::mkldnn_convolution", [[8, 3, 32, 32], [64, 3, 3, 3], [64]], 7.0),
      ("aten::convolution_backward", [[8, 64, 16, 16], [8, 64, 32, 32], [64, 1, 3, 3]], 3.0),
      ("aten::mkldnn_convolution", [[8, 64, 32, 32], [64, 1, 3, 3], [64]], 2.0),
      ("aten::_slow_conv2d_forward", [[8, 64, 32, 32], [64, 1, 3, 3]], 4.0),
      ("aten::gelu", [[8, 4]], 1.5), ("aten::gelu", [[8, 2]], 0.5), ("aten::copy_", [[8, 4]], 2.5)]
p, rest = torch_split.split(ev)
print("products %.1f" % p)
for k, ms in rest: print("rest %s %.1f" % (k, ms))')
echo "$split"
check "torch_split: products are mm, addmm, the dense convolution and the im2col depthwise one (26.0)" \
  grep -qx "products 26.0" <<< "$split"
check "torch_split: the rest, largest first, depthwise convolutions named, gelu's shapes summed" \
  test "$(grep '^rest' <<< "$split" | tr '\n' '|')" = \
  "rest aten::convolution_backward (depthwise) 3.0|rest aten::copy_ 2.5|rest aten::mkldnn_convolution (depthwise) 2.0|rest aten::gelu 2.0|"

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
