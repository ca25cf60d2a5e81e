#!/usr/bin/env bash
# Integration tests of `sfvit plot` on real run folders (a small Fashion-MNIST subset): the
# curves of two runs and the bar chart of an ablation with a diverged variant are PNGs that
# decode, have the expected size, show each run's colour in both panels and in the legend,
# and the NaN label of the diverged variant.
# Usage: test_plot.sh SFVIT_BINARY SOURCE_ROOT
set -uo pipefail
SFVIT=$(realpath "$1")
ROOT=$(realpath "$2")
W=$(mktemp -d /tmp/sfvit-plot-XXXXXX)
[ -n "${SFVIT_KEEP_TEST_DIR:-}" ] || trap 'rm -rf "$W"' EXIT; echo "work dir: $W"
cd "$W"
source "$ROOT/tests/lib.sh"

# Pixels of colour R,G,B in the box [x0, x1) x [y0, y1) of an 8-bit RGB PNG (Python's zlib
# only: the five PNG row filters undone here; the decoded rows are kept in PNG.rows).
count_color() { # PNG R G B x0 y0 x1 y1
  python3 - "$@" <<'EOF'
import os, pickle, struct, sys, zlib
def decode(path):
    data, pos, idat = open(path, "rb").read(), 8, b""
    while pos < len(data):
        n, t = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if t == b"IHDR": w, h, depth, ctype = struct.unpack(">IIBB", body[:10]); assert (depth, ctype) == (8, 2)
        if t == b"IDAT": idat += body
        pos += 12 + n
    raw, stride, rows, prev = zlib.decompress(idat), 3 * w, [], bytearray(3 * w)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - 3] if i >= 3 else 0; up = prev[i]; c = prev[i - 3] if i >= 3 else 0
            if f == 1: line[i] = (line[i] + a) & 255
            elif f == 2: line[i] = (line[i] + up) & 255
            elif f == 3: line[i] = (line[i] + (a + up) // 2) & 255
            elif f == 4:
                p = a + up - c; pa, pb, pc = abs(p - a), abs(p - up), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else up if pb <= pc else c)) & 255
        rows.append(line); prev = line
    return w, h, rows
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

# ---- bars of an ablation: 2 seeds, one variant diverges (lr 10, weight decay 5) ----
"$SFVIT" ablate "$BASE" "${COMMON[@]}" train.epochs=1 train.name=abl model.attn_norm=l1,l2 \
  optim.lr=1e-3,10 optim.weight_decay=5 --seeds 2 > /dev/null 2>&1
out=$("$SFVIT" plot runs/abl -o bars.png 2>&1); rc=$?
check "plot of an ablation exits 0" test $rc -eq 0
check "bars PNG decodes at 1200x(70 + 4 x 40 + 90)" test "$(size_of bars.png)" = 1200x320
check "bar of variant 1 (blue)" test "$(count_color bars.png 31 119 180 0 80 1200 120)" -gt 500
check "bar of variant 3 (green)" test "$(count_color bars.png 44 160 44 0 160 1200 200)" -gt 500
check "diverged variants: red NaN label, no bar" \
  test "$(count_color bars.png 200 30 30 0 120 1200 160)" -gt 50 -a "$(count_color bars.png 255 127 14 0 120 1200 160)" -eq 0
check "seed dots and error bars (black in the bar rows)" test "$(count_color bars.png 0 0 0 300 80 940 120)" -gt 30

# ---- errors ----
out=$("$SFVIT" plot runs/l1 2>&1); rc=$?
check "no -o: exit 2" test $rc -eq 2
out=$("$SFVIT" plot fm -o x.png 2>&1); rc=$?
check "not a run folder: an error naming metrics.csv" test $rc -ne 0 -a ! -e x.png
check "not a run folder: the message" grep -q "fm/metrics.csv" <<< "$out"

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
