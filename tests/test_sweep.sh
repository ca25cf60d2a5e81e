#!/usr/bin/env bash
# `sfvit bench --token-sweep` and `sfvit plot SWEEP.csv` on small sweeps, one thread: the CSV
# has one row per kind x N x phase; the analytic MACs (deterministic, unlike the times, which
# nothing here asserts) grow with slope ~2 for msa and SimA (QK)V and ~1 for SimA Q(KV) and
# XCA; sima_auto takes the cheaper order on both sides of N = D_h; the memory cap skips
# points and says so; the figure decodes at its size with every kind drawn in every panel;
# bad options are errors naming the option.
# Usage: test_sweep.sh SFVIT_BINARY SOURCE_ROOT
set -uo pipefail
SFVIT=$(realpath "$1")
ROOT=$(realpath "$2")
W=$(mktemp -d /tmp/sfvit-sweep-XXXXXX)
[ -n "${SFVIT_KEEP_TEST_DIR:-}" ] || trap 'rm -rf "$W"' EXIT; echo "work dir: $W"
cd "$W"
source "$ROOT/tests/lib.sh"
export SFVIT_THREADS=1
FAST=(--min-time 0 --steps 1 --warmup 0)
KINDS="msa sima_qk_first sima_kv_first sima_auto xca soft"

# Least-squares slope of log(macs) on log(N) over the 3 largest N of one kind (phase infer).
macs_slope() { # CSV KIND
  awk -F, -v k="$2" '$1 == k && $3 == "infer" { print $2, $6 }' "$1" | sort -n | tail -3 |
    awk '{ x = log($1); y = log($2); sx += x; sy += y; sxx += x * x; sxy += x * y; n++ }
         END { printf "%.3f\n", (n * sxy - sx * sy) / (n * sxx - sx * sx) }'
}
within() { awk -v v="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(v >= lo && v <= hi) }'; }

# ---- a sweep of every kind: 16..256 tokens, D_h 4, one head (the products dominate the linears) ----
out=$("$SFVIT" bench --token-sweep -o a.csv --tokens 16:256 --dh 4 --heads 1 "${FAST[@]}" 2>&1); rc=$?
check "sweep exits 0" test $rc -eq 0
check "CSV header" grep -q "^kind,N,phase,ms,peak_bytes,macs,status," a.csv
n_n=$(awk -F, 'NR > 1 && $1 == "msa" && $3 == "train" { print $2 }' a.csv | sort -u | wc -l)
check "9 token counts (two per octave from 16 to 256), got $n_n" test "$n_n" -eq 9
for k in $KINDS; do
  for ph in infer train; do
    c=$(awk -F, -v k=$k -v p=$ph '$1 == k && $3 == p && $7 == "ok" && $4 > 0 && $5 > 0' a.csv | wc -l)
    check "$k $ph: 9 timed rows with a peak" test "$c" -eq 9
  done
done
check "108 rows in all" test "$(($(wc -l < a.csv) - 1))" -eq 108
check "N spans 16..257 (cls token included in the ViT layout)" \
  test "$(awk -F, 'NR > 1 { print $2 }' a.csv | sort -n | head -1)" -eq 16 -a "$(awk -F, 'NR > 1 { print $2 }' a.csv | sort -n | tail -1)" -eq 257
for k in msa sima_qk_first; do
  s=$(macs_slope a.csv $k)
  check "$k: MACs slope over the top points $s is about 2" within "$s" 1.85 2.05
done
for k in sima_kv_first sima_auto xca; do
  s=$(macs_slope a.csv $k)
  check "$k: MACs slope over the top points $s is about 1" within "$s" 0.95 1.05
done
# SOFT with m = 49 fixed (7x7 landmarks from N = 49 on): linear, less the constant m^3 of NR
s=$(macs_slope a.csv soft)
check "soft: MACs slope over the top points $s is at most 1" within "$s" 0.7 1.02
check "stdout: the machine line" grep -q "^machine: .*threads 1" <<< "$out"
check "stdout: a slope row per kind and phase" \
  test "$(grep -cE "^  (msa|sima_qk_first|sima_kv_first|sima_auto|xca|soft) +(infer|train) +9 " <<< "$out")" -eq 12

# ---- the order crossover: D_h 32, N from 10 to 101 ----
"$SFVIT" bench --token-sweep -o x.csv --kinds sima_qk_first,sima_kv_first,sima_auto --tokens 9:100 --dh 32 --heads 1 \
  "${FAST[@]}" > /dev/null 2>&1
# targets 9, 12.7, 18, 25.5, 36, 51, 72 -> sides 3, 4, 4, 5, 6, 7, 8: six token counts per kind
check "crossover sweep wrote its rows" test "$(awk -F, '$3 == "infer"' x.csv | wc -l)" -eq 18
verdict=$(awk -F, '$3 == "infer" { m[$1, $2] = $6; n[$2] = 1 }
  END { below = above = bad = 0
        for (N in n) { qk = m["sima_qk_first", N]; kv = m["sima_kv_first", N]; a = m["sima_auto", N]
                       cheap = qk < kv ? qk : kv
                       if (a != cheap) bad++
                       if (N + 0 < 32 && qk < kv) below++
                       if (N + 0 > 32 && kv < qk) above++ }
        print below, above, bad }' x.csv)
read -r below above bad <<< "$verdict"
check "auto's MACs are the cheaper order's at every N ($bad mismatches)" test "$bad" -eq 0
check "qk_first is the cheaper order below N = D_h ($below points)" test "$below" -ge 2
check "kv_first is the cheaper order above N = D_h ($above points)" test "$above" -ge 3

# ---- the memory cap: points estimated above it are written as skipped, with the reason ----
out=$("$SFVIT" bench --token-sweep -o cap.csv --kinds msa,sima_kv_first --tokens 16:256 --dh 4 --heads 2 \
  --mem-cap 0.001 "${FAST[@]}" 2>&1); rc=$?
check "capped sweep exits 0" test $rc -eq 0
check "capped sweep: every row written (36)" test "$(($(wc -l < cap.csv) - 1))" -eq 36
check "capped sweep: msa's largest points skipped with the estimate" \
  grep -q "^msa,257,train,,,[0-9]*,skipped,.*estimated .* GiB > --mem-cap 0.001 GiB" cap.csv
check "capped sweep: kv_first's linear memory is under the cap" test "$(grep -c "^sima_kv_first.*skipped" cap.csv)" -eq 0
check "capped sweep: stdout says skipped" grep -q "skipped: estimated" <<< "$out"

# ---- the figure ----
out=$("$SFVIT" plot a.csv -o a.png 2>&1); rc=$?
check "plot of the sweep exits 0" test $rc -eq 0
check "figure decodes at 1600x726 (three panels, a legend row per kind)" \
  test "$("$SFVIT" data check-image a.png | sed -n 's/.*: \([0-9]*x[0-9]*\), 3 channels$/\1/p')" = 1600x726
# Pixels of each kind's tab10 colour per panel (x0 90 + 510 i): in its plot area (380 wide, y
# 90..490), where later kinds may cover earlier ones, and in its legend's swatches (below 530).
colours=$(PYTHONPATH="$ROOT/tests" python3 - a.png <<'EOF'
import sys
from png_rows import decode
w, h, rows = decode(sys.argv[1])
tab10 = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189), (140, 86, 75)]
for k, col in enumerate(tab10):
    for p in range(3):
        x0 = 90 + 510 * p
        area = sum(1 for y in range(90, 491) for x in range(x0, x0 + 381) if tuple(rows[y][3 * x:3 * x + 3]) == col)
        legend = sum(1 for y in range(530, h) for x in range(x0, x0 + 40) if tuple(rows[y][3 * x:3 * x + 3]) == col)
        print(k, p, area, legend)
EOF
)
check "every kind has a legend swatch under every panel" test "$(awk '$4 > 50' <<< "$colours" | wc -l)" -eq 18
check "the kind drawn last (soft) is in every panel" test "$(awk '$1 == 5 && $3 > 300' <<< "$colours" | wc -l)" -eq 3
check "lines in every panel" test "$(awk '{ s[$2] += $3 } END { for (p in s) if (s[p] > 1500) n++; print n }' <<< "$colours")" -eq 3
check "the legend gives slopes" grep -q "wrote a.png (1600x726): 6 kinds" <<< "$out"

# ---- errors name the option ----
err() { # WHAT PATTERN ARGS...
  local what=$1 pat=$2; shift 2
  local o rc; o=$("$SFVIT" "$@" 2>&1); rc=$?
  check "$what: exit 2 naming it" test $rc -eq 2 -a -n "$(grep -e "$pat" <<< "$o")"
}
err "--tokens 0:10" "--tokens '0:10'" bench --token-sweep --tokens 0:10
err "--tokens 64" "--tokens '64'" bench --token-sweep --tokens 64
err "--tokens 9:4" "--tokens '9:4'" bench --token-sweep --tokens 9:4
err "--kinds with an unknown kind" "--kinds: unknown kind 'bogus'" bench --token-sweep --kinds msa,bogus
err "--dh 0" "--dh '0'" bench --token-sweep --dh 0
err "--heads x" "--heads 'x'" bench --token-sweep --heads x
err "--mem-cap -1" "--mem-cap '-1'" bench --token-sweep --mem-cap -1
err "--min-time x" "--min-time 'x'" bench --token-sweep --min-time x
err "a sweep option without --token-sweep" "--tokens belongs to --token-sweep" bench "$ROOT/configs/fmnist_tiny.yaml" --tokens 16:64
err "a config with --token-sweep" "takes no config" bench --token-sweep "$ROOT/configs/fmnist_tiny.yaml"
o=$("$SFVIT" bench --token-sweep --tokens 16:16 model.bogus_key=1 -o b.csv 2>&1); rc=$?
check "an unknown override key: exit 1 naming it" test $rc -eq 1 -a -n "$(grep -e "bogus_key" <<< "$o")"
echo "epoch,top1" > notsweep.csv
o=$("$SFVIT" plot notsweep.csv -o n.png 2>&1); rc=$?
check "plot of a CSV without the sweep header: an error naming the header" \
  test $rc -eq 1 -a ! -e n.png -a -n "$(grep -e "kind,N,phase" <<< "$o")"

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
