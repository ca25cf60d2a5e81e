#!/usr/bin/env bash
# Integration tests of `sfvit plot` on real run folders (a small Fashion-MNIST subset): the
# curves of two runs and the chart of an ablation with a diverged variant (dots with 95 %
# intervals, or --bars from 0) are PNGs that decode, have the expected size, show each run's
# colour in both panels and in the legend, and the NaN label of the diverged variant. Variant
# folders (seed<S>/ runs, handmade metrics.csv) give a mean line and a min-max band; the
# legend names only what is drawn. --series: handmade evaluation files over a setting, the mean
# dots, seed dashes and bands where the values put them, on linear and log x axes; its errors.
# Usage: test_plot.sh SFVIT_BINARY SOURCE_ROOT
set -uo pipefail
SFVIT=$(realpath "$1")
ROOT=$(realpath "$2")
W=$(mktemp -d /tmp/sfvit-plot-XXXXXX)
[ -n "${SFVIT_KEEP_TEST_DIR:-}" ] || trap 'rm -rf "$W"' EXIT; echo "work dir: $W"
cd "$W"
source "$ROOT/tests/lib.sh"

# Pixels of colour R,G,B in the box [x0, x1) x [y0, y1) of an 8-bit RGB PNG (tests/png_rows.py;
# the decoded rows are kept in PNG.rows).
count_color() { # PNG R G B x0 y0 x1 y1
  PYTHONPATH="$ROOT/tests" python3 - "$@" <<'EOF'
import os, pickle, sys
from png_rows import decode
path, r, g, b, x0, y0, x1, y1 = sys.argv[1], *map(int, sys.argv[2:])
cache = path + ".rows"
if os.path.exists(cache) and os.path.getmtime(cache) >= os.path.getmtime(path):
    w, h, rows = pickle.load(open(cache, "rb"))
else:
    w, h, rows = decode(path)
    pickle.dump((w, h, rows), open(cache, "wb"))
print(sum(1 for y in range(max(y0, 0), min(y1, h)) for x in range(max(x0, 0), min(x1, w))
          if rows[y][3 * x:3 * x + 3] == bytearray((r, g, b))))
EOF
}
# The smallest x of colour R,G,B in rows [y0, y1) (-1 if none), from count_color's decoded rows.
first_x() { # PNG R G B y0 y1
  count_color "$1" 0 0 0 0 0 0 0 > /dev/null
  python3 - "$@" <<'EOF'
import pickle, sys
path, r, g, b, y0, y1 = sys.argv[1], *map(int, sys.argv[2:])
w, h, rows = pickle.load(open(path + ".rows", "rb"))
xs = [x for y in range(y0, min(y1, h)) for x in range(w) if rows[y][3 * x:3 * x + 3] == bytearray((r, g, b))]
print(min(xs) if xs else -1)
EOF
}
size_of() { "$SFVIT" data check-image "$1" | sed -n 's/.*: \([0-9]*x[0-9]*\), 3 channels$/\1/p'; }

fmnist_subset "$SFVIT" "$ROOT" 512 128
BASE=$ROOT/configs/fmnist_tiny.yaml
COMMON=(data.root=fm train.out=runs train.threads=1 data.workers=1 train.batch_size=32 train.epochs=3 sched.warmup_epochs=0.5)
"$SFVIT" train "$BASE" "${COMMON[@]}" train.name=l1 > /dev/null 2>&1
"$SFVIT" train "$BASE" "${COMMON[@]}" train.name=none model.attn_norm=none > /dev/null 2>&1
check "two runs trained" test -s runs/l1/metrics.csv -a -s runs/none/metrics.csv
check "metrics.csv has a train_top1 column" grep -q "^epoch,.*,train_top1$" runs/l1/metrics.csv

# ---- curves: 1280 wide, 50 + 380 + 70 above the legend, a legend row per run and one for the styles ----
out=$("$SFVIT" plot runs/l1 runs/none -o curves.png 2>&1); rc=$?
check "plot of two runs exits 0" test $rc -eq 0
check "curves PNG decodes at 1280x598" test "$(size_of curves.png)" = 1280x598
# tab10 blue (run 1) and orange (run 2): the curves in the loss panel (x < 640) and the top-1
# panel (x >= 640), then the legend swatches below the panels.
check "run 1 drawn in the loss panel" test "$(count_color curves.png 31 119 180 90 50 640 431)" -gt 300
check "run 1 drawn in the top-1 panel" test "$(count_color curves.png 31 119 180 640 50 1280 431)" -gt 300
check "run 2 drawn in the loss panel" test "$(count_color curves.png 255 127 14 90 50 640 431)" -gt 300
check "run 2 drawn in the top-1 panel" test "$(count_color curves.png 255 127 14 640 50 1280 431)" -gt 300
check "legend swatches of both runs" \
  test "$(count_color curves.png 31 119 180 90 520 131 598)" -gt 300 -a "$(count_color curves.png 255 127 14 90 520 131 598)" -gt 300
check "legend names the runs (black text)" test "$(count_color curves.png 0 0 0 140 520 640 598)" -gt 200
check "plot area background is mostly white" test "$(count_color curves.png 255 255 255 90 50 640 431)" -gt 150000

# ---- one run, one epoch: points, no lines ----
"$SFVIT" train "$BASE" "${COMMON[@]}" train.name=one train.epochs=1 > /dev/null 2>&1
check "plot of a one-epoch run" "$SFVIT" plot runs/one -o one.png
check "one-epoch run: its points are drawn" test "$(count_color one.png 31 119 180 90 50 1280 431)" -gt 40

# ---- the chart of an ablation: 2 seeds, one variant diverges (lr 10, weight decay 5) ----
"$SFVIT" ablate "$BASE" "${COMMON[@]}" train.epochs=1 train.name=abl model.attn_norm=l1,l2 \
  optim.lr=1e-3,10 optim.weight_decay=5 --seeds 2 > /dev/null 2>&1
out=$("$SFVIT" plot runs/abl -o dots.png 2>&1); rc=$?
check "plot of an ablation exits 0" test $rc -eq 0
check "dots PNG decodes at 1400x(70 + 4 x 40 + 90)" test "$(size_of dots.png)" = 1400x320
# rows: variant i's centre at y = 92 + 40 i
check "mean dot and interval of variant 1 (blue)" test "$(count_color dots.png 31 119 180 0 80 1400 120)" -gt 100
check "mean dot and interval of variant 3 (green)" test "$(count_color dots.png 44 160 44 0 160 1400 200)" -gt 100
check "diverged variants: red NaN label, no dot" \
  test "$(count_color dots.png 200 30 30 0 120 1400 160)" -gt 50 -a "$(count_color dots.png 255 127 14 0 120 1400 160)" -eq 0
check "a mark per seed (black, 21 px high, in the plot area)" test "$(count_color dots.png 0 0 0 300 82 940 103)" -gt 60
check "the title says mean and 95 % interval over 2 seeds" test "$(count_color dots.png 0 0 0 0 0 1400 36)" -gt 500
check "dots: the axis spans the values (said on stdout)" grep -q 'x axis from' <<< "$out"

out=$("$SFVIT" plot runs/abl --bars -o bars.png 2>&1); rc=$?
check "plot --bars exits 0" test $rc -eq 0
check "--bars: the x axis starts at 0 or below" grep -qE 'x axis from (0|-[0-9.]+) to' <<< "$out"
# The bar starts at the value 0: the pixel of 0 on the axis (from the range on stdout, the
# plot's left edge = the axis line, its right edge at 1400 - 460) is the bar's left end.
read -r xmin xmax < <(sed -n 's/.*x axis from \([-0-9.e]*\) to \([-0-9.e]*\)$/\1 \2/p' <<< "$out")
axis_x=$(first_x bars.png 90 90 90 85 110)
bar_x=$(first_x bars.png 31 119 180 85 110)
zero_x=$(python3 -c "print(round($axis_x + 1 + (0 - $xmin) / ($xmax - $xmin) * (940 - $axis_x - 1)))")
check "--bars: the bar of variant 1 starts at 0 (x $bar_x, 0 at $zero_x)" test $((bar_x - zero_x)) -ge -1 -a $((bar_x - zero_x)) -le 1
check "--bars: the bar of variant 1 is drawn" test "$(count_color bars.png 31 119 180 0 80 1400 120)" -gt 200

# ---- several variant folders in one chart (--dots), from different grids ----
"$SFVIT" ablate "$BASE" "${COMMON[@]}" train.epochs=1 train.name=abl2 model.attn_norm=l1,none --seeds 2 > /dev/null 2>&1
out=$("$SFVIT" plot --dots runs/abl/attn_norm=l1,lr=1e-3 runs/abl2/attn_norm=none -o arms.png 2>&1); rc=$?
check "plot --dots of two grids' variants exits 0" test $rc -eq 0
check "--dots: 2 rows (1400x(70 + 2 x 40 + 90))" test "$(size_of arms.png)" = 1400x240
check "--dots: both rows drawn" \
  test "$(count_color arms.png 31 119 180 0 80 1400 120)" -gt 100 -a "$(count_color arms.png 255 127 14 0 120 1400 160)" -gt 100
out=$("$SFVIT" plot --dots runs/abl -o x.png 2>&1); rc=$?
check "--dots on a grid folder: an error naming it" test $rc -eq 1 -a -n "$(grep 'runs/abl has no seed<S>/ folders' <<< "$out")"
out=$("$SFVIT" plot --dots runs/abl2/attn_norm=none --metric nokey -o x.png 2>&1); rc=$?
check "--dots --metric nokey: names the file and key" test $rc -eq 1 -a -n "$(grep "result.json has no key 'nokey'" <<< "$out")"

# ---- curves of variant folders: mean over seeds and a min-max band (handmade metrics.csv) ----
python3 - <<'EOF'
import os
def run(d, rows, diverged=None, columns="epoch,train_loss,val_loss,top1,top5,lr,seconds,skipped,train_top1"):
    os.makedirs(d, exist_ok=True)
    with open(f"{d}/metrics.csv", "w") as f:
        f.write(columns + "\n")
        for e, r in enumerate(rows, 1): f.write(",".join(str(x) for x in (e,) + r) + "\n")
    with open(f"{d}/log.jsonl", "w") as f:
        if diverged: f.write('{"event":"diverged","step":%d,"loss":null}\n' % diverged)
for s in range(3):  # A: top-1 60/70/75 with a seed spread of 4, 4, 2 points
    run(f"v/A/seed{s}", [(1.0, 0.9 - 0.05 * s, 60 + 2 * s, 99, 1e-3, 1, 0, 58),
                         (0.8, 0.7 - 0.05 * s, 70 + 2 * s, 99, 1e-3, 1, 0, 68),
                         (0.6, 0.5, 75 + s, 99, 1e-3, 1, 0, 74)])
for s in range(2):  # B: two seeds, and a third that diverged in its first epoch
    run(f"v/B/seed{s}", [(1.2, 1.0 + 0.1 * s, 40 + 4 * s, 99, 1e-3, 1, 0, 40),
                         (1.1, 0.9 + 0.1 * s, 45 + 4 * s, 99, 1e-3, 1, 0, 45),
                         (1.0, 0.8 + 0.1 * s, 50 + 4 * s, 99, 1e-3, 1, 0, 50)])
run("v/B/seed2", [], diverged=17)
run("v/nan", [], diverged=3)                                              # nothing to draw
run("v/valonly", [(0.9, 55), (0.8, 60)], columns="epoch,val_loss,top1")  # no train columns
EOF
out=$("$SFVIT" plot v/A v/B v/nan -o vcurves.png 2>&1); rc=$?
check "curves of variant folders exit 0" test $rc -eq 0
check "variant curves PNG: 3 legend rows (1280x(500 + 4 x 26 + 20))" test "$(size_of vcurves.png)" = 1280x624
# a band is the variant's colour blended 1/4 over white: tab10 blue -> 199,221,236, orange -> 255,223,195
check "band of A (blue tint) in the top-1 panel" test "$(count_color vcurves.png 199 221 236 640 50 1280 431)" -gt 2000
check "band of A in the loss panel" test "$(count_color vcurves.png 199 221 236 90 50 640 431)" -gt 500
check "band of B (orange tint) in the top-1 panel" test "$(count_color vcurves.png 255 223 195 640 50 1280 431)" -gt 2000
check "mean lines of A and B drawn" \
  test "$(count_color vcurves.png 31 119 180 640 50 1280 431)" -gt 300 -a "$(count_color vcurves.png 255 127 14 640 50 1280 431)" -gt 300
# legend rows from y = 500: styles, then A, B, nan every 26 pixels
check "legend: a band key (grey tint)" test "$(count_color vcurves.png 214 214 214 90 500 1280 520)" -gt 300
check "legend: B's left-out seed named in red" test "$(count_color vcurves.png 200 30 30 90 552 1280 572)" -gt 100
check "legend: swatches of A and B" \
  test "$(count_color vcurves.png 31 119 180 90 526 131 546)" -gt 300 -a "$(count_color vcurves.png 255 127 14 90 552 131 572)" -gt 300
check "legend: no swatch for the run with nothing drawn, its name in red" \
  test "$(count_color vcurves.png 44 160 44 0 578 1280 598)" -eq 0 -a "$(count_color vcurves.png 200 30 30 90 578 1280 598)" -gt 100
check "nothing in green (the third colour) anywhere" test "$(count_color vcurves.png 44 160 44 0 0 1280 624)" -eq 0

"$SFVIT" plot v/valonly -o valonly.png > /dev/null 2>&1
# the style row: the "val" sample at x 90..130, the "train" sample at 216..256, y 500..516
check "legend with a train curve shows the train style" test "$(count_color vcurves.png 90 90 90 216 500 257 516)" -gt 40
check "legend without a train curve: no train style" test "$(count_color valonly.png 90 90 90 216 500 257 516)" -eq 0
check "legend without a variant: no band key" test "$(count_color valonly.png 214 214 214 0 500 1280 520)" -eq 0

# ---- --series: one evaluation over a setting (handmade ev_<x>.json files) ----
python3 - <<'EOF2'
import json, os
def seed(d, vals):  # vals: {x: top1}
    os.makedirs(d, exist_ok=True)
    for x, v in vals.items(): json.dump({"top1": v, "images": 100}, open(f"{d}/ev_{x}.json", "w"))
for s in range(3):  # A: 10+2s, 20+2s, 30+2s
    seed(f"sr/A/seed{s}", {1: 10 + 2 * s, 2: 20 + 2 * s, 4: 30 + 2 * s})
for s in range(2):  # B: 40+4s, 50+4s, 60+4s; seed 2 not yet evaluated at x = 4
    seed(f"sr/B/seed{s}", {1: 40 + 4 * s, 2: 50 + 4 * s, 4: 60 + 4 * s})
seed("sr/B/seed2", {1: 42, 2: 52})
EOF2
out=$("$SFVIT" plot --series 'ev_{x}.json' --x 1,2,4 --xlabel "setting" sr/A sr/B -o series.png 2>&1); rc=$?
check "--series exits 0" test $rc -eq 0
# y: A's interval at x = 1 reaches 7.03, B's at x = 4 (2 seeds) 87.4: a 1-2-5 axis from 0 to 100
check "--series: the y axis spans the values and intervals (0 to 100)" grep -q "y axis from 0 to 100" <<< "$out"
check "--series PNG: 1280x(70 + 420 + 70 + 3 x 26)" test "$(size_of series.png)" = 1280x638
# the plot area is x 90..1200, y 70..490; x = 1, 2, 4 at pixels 131, 474, 1159; y = v at 490 - 4.2 v
check "--series: A's mean at x = 1 (12) is a blue dot at (131, 440)" test "$(count_color series.png 31 119 180 127 436 136 445)" -gt 40
check "--series: B's mean at x = 4 (62, 2 seeds) is an orange dot at (1159, 230)" test "$(count_color series.png 255 127 14 1155 226 1164 235)" -gt 40
check "--series: A's seeds at x = 1 (10, 12, 14) as blue dashes beside the dot (y 448, 440, 431)" \
  test "$(count_color series.png 31 119 180 139 446 146 451)" -gt 10 -a "$(count_color series.png 31 119 180 139 429 146 434)" -gt 10
check "--series: B's dashes in the next column (x 149..155)" test "$(count_color series.png 255 127 14 149 300 156 330)" -gt 10
check "--series: bands of A and B (their tints)" \
  test "$(count_color series.png 199 221 236 90 70 1200 490)" -gt 2000 -a "$(count_color series.png 255 223 195 90 70 1200 490)" -gt 2000
check "--series: nothing in green (no third folder)" test "$(count_color series.png 44 160 44 0 0 1280 638)" -eq 0
out=$("$SFVIT" plot --series 'ev_{x}.json' --x 1,2,4 --logx sr/A -o series_log.png 2>&1); rc=$?
# log x: 1, 2, 4 equally spaced (pixels 131, 645, 1159); A alone: y from 5 to 40, 22 at y 286
check "--series --logx: A alone, y from 5 to 40" test $rc -eq 0 -a -n "$(grep "y axis from 5 to 40" <<< "$out")"
check "--series --logx: x = 2 midway between 1 and 4 (A's mean 22 at (645, 286))" \
  test "$(count_color series_log.png 31 119 180 641 282 650 291)" -gt 40
out=$("$SFVIT" plot --series 'ev.json' --x 1,2 sr/A -o x.png 2>&1); rc=$?
check "--series without {x}: exit 2, named" test $rc -eq 2 -a -n "$(grep "has no {x}" <<< "$out")"
out=$("$SFVIT" plot --series 'ev_{x}.json' --x 2,1 sr/A -o x.png 2>&1); rc=$?
check "--series --x not ascending: exit 2, named" test $rc -eq 2 -a -n "$(grep "must ascend ('1' after '2')" <<< "$out")"
out=$("$SFVIT" plot --series 'ev_{x}.json' --x 0,1 --logx sr/A -o x.png 2>&1); rc=$?
check "--series --logx with 0: exit 2, named" test $rc -eq 2 -a -n "$(grep "'0' on a log axis" <<< "$out")"
out=$("$SFVIT" plot --series 'ev_{x}.json' sr/A -o x.png 2>&1); rc=$?
check "--series without --x: exit 2" test $rc -eq 2
out=$("$SFVIT" plot --series 'ev_{x}.json' --x 1,2 --metric top5 sr/A -o x.png 2>&1); rc=$?
check "--series --metric missing from the files: exit 1 naming file and key" \
  test $rc -eq 1 -a -n "$(grep "ev_1.json has no key 'top5'" <<< "$out")" -a ! -e x.png

# ---- errors ----
out=$("$SFVIT" plot runs/l1 2>&1); rc=$?
check "no -o: exit 2" test $rc -eq 2
out=$("$SFVIT" plot fm -o x.png 2>&1); rc=$?
check "not a run folder: an error naming metrics.csv" test $rc -ne 0 -a ! -e x.png
check "not a run folder: the message" grep -q "fm/metrics.csv" <<< "$out"

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
