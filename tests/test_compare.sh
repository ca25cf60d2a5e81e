#!/usr/bin/env bash
# Tests of `sfvit compare` on a handmade grid of result.json files (no training): every verdict
# kind, the pairing by seed (a missing seed, a diverged one, a NaN value, a seed only on one
# side), the mean difference and its 95 % interval recomputed here, the Student-t quantile
# against known values for 1 to 100 degrees of freedom, another file and key (test.json,
# top1), two files of the same folders (--base-file), the markdown and CSV outputs, and errors
# naming the folder, file or key.
# Usage: test_compare.sh SFVIT_BINARY SOURCE_ROOT
set -uo pipefail
SFVIT=$(realpath "$1")
ROOT=$(realpath "$2")
W=$(mktemp -d /tmp/sfvit-compare-XXXXXX)
[ -n "${SFVIT_KEEP_TEST_DIR:-}" ] || trap 'rm -rf "$W"' EXIT; echo "work dir: $W"
cd "$W"
source "$ROOT/tests/lib.sh"

# ---- the grid: g/<variant>/seed<S>/result.json; base values 70 + S (seeds 0..5) ----
python3 - <<'EOF'
import json, os
def cell(variant, seed, value, status="ok", name="result.json", raw=None):
    d = f"g/{variant}/seed{seed}"
    os.makedirs(d, exist_ok=True)
    with open(f"{d}/{name}", "w") as f:
        if raw is not None: f.write(raw)
        else: json.dump({"status": status, "seed": seed, "final_top1": value, "best_top1": value}, f)
base = [70.0 + s for s in range(6)]
jitter = [0.03, -0.02, 0.01, -0.03, 0.02, -0.01]
for s, b in enumerate(base):
    cell("base", s, b)
    cell("better", s, b + 2 + jitter[s])             # +2: far above 0 and past the margin
    cell("worse", s, b - 2 + jitter[s])
    cell("equivalent", s, b + jitter[s])              # around 0, inside ±0.5
    cell("better_small", s, b + 0.2 + jitter[s])      # above 0, inside ±0.5
    cell("worse_small", s, b - 0.2 + jitter[s])
    cell("inconclusive", s, b + (3 if s % 2 else -2))  # mean +0.5, spread ±2.5
    cell("ties", s, b if s < 4 else b + 0.1)          # 4 ties and 2 small wins
# gaps: seed 5 absent, seed 4 diverged (null), seed 3 NaN written by Python, seed 9 only here
for s in range(3): cell("gaps", s, base[s] + 1 + jitter[s])
cell("gaps", 3, float("nan"))
cell("gaps", 4, None, status="diverged")
cell("gaps", 9, 50.0)
cell("single", 0, 71.0)
# test.json of `sfvit eval --json` in the seed folders of base and better (better lacks seed 2's)
for s, b in enumerate(base):
    os.makedirs(f"g/base/seed{s}", exist_ok=True)
    json.dump({"top1": b - 5, "top5": 99.0, "images": 2000, "loss": 0.5}, open(f"g/base/seed{s}/test.json", "w"))
    if s != 2: json.dump({"top1": b - 4, "top5": 99.0, "images": 2000, "loss": 0.4}, open(f"g/better/seed{s}/test.json", "w"))
EOF

V=(better worse equivalent better_small worse_small inconclusive ties gaps single)
out=$("$SFVIT" compare g/base "${V[@]/#/g/}" -o cmp.csv 2> err.txt); rc=$?
check "compare exits 0" test $rc -eq 0
check "compare writes cmp.csv" test -s cmp.csv
check "cmp.csv: a row per variant" test "$(tail -n +2 cmp.csv | wc -l)" -eq ${#V[@]}
field() { python3 -c "import csv,sys; r={x['variant']: x for x in csv.DictReader(open('cmp.csv'))}; print(r['g/$1']['$2'])"; }
for v in better:better worse:worse equivalent:equivalent "better_small:better, within margin" \
         "worse_small:worse, within margin" inconclusive:inconclusive ties:equivalent "single:too few pairs"; do
  check "verdict of ${v%%:*}: ${v#*:}" test "$(field "${v%%:*}" verdict)" = "${v#*:}"
  check "markdown row of ${v%%:*} ends with its verdict" grep -q "^| g/${v%%:*} | .* | ${v#*:} |$" <<< "$out"
done
check "ties: wins/ties/losses 2/4/0" test "$(field ties wins)/$(field ties ties)/$(field ties losses)" = 2/4/0
check "worse: 0 wins, 6 losses" test "$(field worse wins)/$(field worse losses)" = 0/6
check "6 pairs for a full variant" test "$(field better pairs)" -eq 6
check "gaps: 3 pairs (seeds 0-2)" test "$(field gaps pairs)" -eq 3
check "gaps: 2 diverged (status, NaN) of 6 seed folders" test "$(field gaps variant_diverged)/$(field gaps variant_seeds)" = 2/6
check "gaps: the diffs are those of seeds 0, 1, 2" \
  test "$(field gaps diffs)" = "seed0:1.030000;seed1:0.980000;seed2:1.010000"
check "markdown: the unpaired seeds named with their reason" \
  grep -q '^- g/gaps: seed 3 (variant: final_top1 is NaN); seed 4 (variant: status diverged); seed 9 (only in variant); seed 5 (only in base)$' <<< "$out"
check "markdown: base counts" grep -q '^Base: g/base (6 seeds: 6 ok, 0 diverged, 0 missing)' <<< "$out"
check "markdown: per-seed differences" grep -q '^| g/better | 3 | 73.00 | 74.97 | +1.97 |$' <<< "$out"

# the mean difference, its sample std and 95 % interval, recomputed from the diffs column with
# known quantiles t(0.975, df): df 2 and 5 here
python3 - cmp.csv > recomputed.txt <<'EOF'
import csv, math, sys
T975 = {2: 4.302653, 5: 2.570582}
bad = 0
for r in csv.DictReader(open(sys.argv[1])):
    d = [float(x.split(":")[1]) for x in r["diffs"].split(";") if x]
    if len(d) < 2: continue
    n = len(d); m = sum(d) / n; s = math.sqrt(sum((x - m) ** 2 for x in d) / (n - 1)); h = T975[n - 1] * s / math.sqrt(n)
    ok = all(abs(a - b) < 2e-6 for a, b in [(m, float(r["diff_mean"])), (s, float(r["diff_std"])),
                                            (m - h, float(r["diff_ci95_lo"])), (m + h, float(r["diff_ci95_hi"]))])
    print(r["variant"], "ok" if ok else f"MISMATCH {m} {s} {m - h} {m + h} vs {r}")
EOF
check "mean, std and interval of every row recomputed" test "$(grep -c ' ok$' recomputed.txt)" -eq 8 -a "$(grep -c MISMATCH recomputed.txt)" -eq 0

# ---- the markdown file equals stdout; CSV only for .csv ----
"$SFVIT" compare g/base g/better g/worse -o cmp.md > stdout.md 2> /dev/null
check "-o cmp.md holds the printed table" cmp -s cmp.md stdout.md
check "-o cmp.md is markdown" grep -q '^| variant | pairs |' cmp.md
# each folder on its own: base = 70..75 (mean 72.5, sd 1.8708, t(0.975,5) = 2.5706 -> ±1.963)
check "per-folder row of the base: 6/6 seeds, mean and interval" grep -qF '| g/base (base) | 6/6 | 0 | 72.50 | [70.54, 74.46] |' cmp.md
check "per-folder row of a variant" grep -qF '| g/worse | 6/6 | 0 |' cmp.md
"$SFVIT" compare g/base g/gaps > gaps.md 2> /dev/null
check "per-folder row counts ok seeds of all and the diverged" grep -qF '| g/gaps | 4/6 | 2 | 66.50 |' gaps.md

# ---- --margin: a wider margin turns better_small's and inconclusive's verdicts ----
"$SFVIT" compare g/base g/better_small g/inconclusive g/better --margin 5 -o m5.csv > /dev/null 2>&1
check "--margin 5: inconclusive becomes equivalent" grep -q '"g/inconclusive",.*,"equivalent",' m5.csv
check "--margin 5: +2 is better, within margin" grep -q '"g/better",.*,"better, within margin",' m5.csv
check "--margin 5: the margin is in the CSV" grep -q '^"g/base","g/better","result.json","final_top1",5,' m5.csv

# ---- another file and key: test.json, top1 ----
out=$("$SFVIT" compare g/base g/better --file test.json --metric top1 -o t.csv 2>&1); rc=$?
check "--file test.json --metric top1 exits 0" test $rc -eq 0
check "test.json: 5 pairs, +1 each, better" grep -q '^"g/base","g/better","test.json","top1",0.5,5,6,0,0,6,0,1,.*,1.000000,0.000000,1.000000,1.000000,5,0,0,"better",' t.csv
check "test.json: the seed without it is named" grep -q '^- g/better: seed 2 (variant: no test.json)$' <<< "$out"

# ---- two evaluations of the same runs: --base-file init.json --file trained.json ----
# e/a: trained = init + 0.1 in seeds 0-3 (seed 4 has no trained.json); e/b: trained = init - 0.3
python3 - <<'EOF2'
import json, os
for s in range(5):
    for v, init, step in (("a", 0.5 + 0.01 * s, 0.1), ("b", 0.8, -0.3)):
        d = f"e/{v}/seed{s}"; os.makedirs(d)
        json.dump({"auc": init}, open(f"{d}/init.json", "w"))
        if not (v == "a" and s == 4): json.dump({"auc": init + step}, open(f"{d}/trained.json", "w"))
EOF2
out=$("$SFVIT" compare e/a --base-file init.json --file trained.json --metric auc --margin 0.01 -o e.csv 2>&1); rc=$?
check "--base-file with one folder exits 0" test $rc -eq 0
check "--base-file: the title names both files" grep -q '^# auc of trained.json against init.json, paired by seed$' <<< "$out"
check "--base-file: the folder's own trained.json against its init.json, 4 pairs, +0.1 each, better"   grep -q '^"e/a: init.json","e/a: trained.json","trained.json","auc",0.01,4,5,0,0,5,0,1,.*,0.100000,0.000000,0.100000,0.100000,4,0,0,"better",' e.csv
check "--base-file: the seed without trained.json is named" grep -q '^- e/a: trained.json: seed 4 (variant: no trained.json)$' <<< "$out"
"$SFVIT" compare e/a e/b --base-file init.json --file trained.json --metric auc -o e2.csv > /dev/null 2>&1
check "--base-file with two folders: both are variants against the first's init.json"   test "$(cut -d, -f1,2 e2.csv | tail -n +2 | tr '\n' ' ')" = '"e/a: init.json","e/a: trained.json" "e/a: init.json","e/b: trained.json" '
out=$("$SFVIT" compare e/a --base-file init.json 2>&1); rc=$?
check "--base-file without --file: status 2, named" test $rc -eq 2 -a -n "$(grep -- "--base-file needs --file" <<< "$out")"
out=$("$SFVIT" compare e/a --base-file none.json --file trained.json --metric auc 2>&1); rc=$?
check "--base-file naming a file no seed has: status 1, named" test $rc -eq 1 -a -n "$(grep 'no seed folder of e/a has none.json' <<< "$out")"

# ---- the t quantile against known values: df + 1 seeds, diffs alternating 0 and 100 (large
# against the CSV's 6 decimals) ----
python3 - <<'EOF'
import json, os
for df in (1, 2, 3, 4, 5, 9, 10, 19, 29, 30, 60, 100):
    for s in range(df + 1):
        for v, x in (("base", 50.0), ("other", 50.0 + 100 * (s % 2))):
            d = f"t/df{df}/{v}/seed{s}"; os.makedirs(d)
            json.dump({"status": "ok", "final_top1": x}, open(f"{d}/result.json", "w"))
EOF
for pair in 1:12.706205 2:4.302653 3:3.182446 4:2.776445 5:2.570582 9:2.262157 10:2.228139 \
            19:2.093024 29:2.045230 30:2.042272 60:2.000298 100:1.983972; do
  df=${pair%%:*} want=${pair#*:}
  "$SFVIT" compare t/df$df/base t/df$df/other -o t$df.csv > /dev/null 2>&1
  have=$(python3 -c "
import csv, math
r = next(csv.DictReader(open('t$df.csv')))
n = int(r['pairs']); print('%.6f' % ((float(r['diff_ci95_hi']) - float(r['diff_mean'])) / (float(r['diff_std']) / math.sqrt(n))))")
  check "t(0.975, $df) = $want ($have)" python3 -c "import sys; sys.exit(abs($have - $want) > 1e-6)"
done

# ---- errors ----
out=$("$SFVIT" compare g/base g 2>&1); rc=$?
check "a folder without seed<S>/: status 1, named" test $rc -eq 1 -a -n "$(grep 'g has no seed<S>/ folders' <<< "$out")"
out=$("$SFVIT" compare g/base g/better --metric nokey 2>&1); rc=$?
check "missing key: status 1, names the file and the key" \
  test $rc -eq 1 -a -n "$(grep "g/base/seed0/result.json has no key 'nokey'" <<< "$out")"
out=$("$SFVIT" compare g/base g/worse --file test.json --metric top1 2>&1); rc=$?
check "no seed with the file: names it" test $rc -eq 1 -a -n "$(grep 'no seed folder of g/worse has test.json' <<< "$out")"
mkdir -p bad/seed0 && echo 'not json' > bad/seed0/result.json
out=$("$SFVIT" compare g/base bad 2>&1); rc=$?
check "a file that is not JSON: named" test $rc -eq 1 -a -n "$(grep 'bad/seed0/result.json is not a JSON object' <<< "$out")"
out=$("$SFVIT" compare g/base g/better --no-such 2>&1); rc=$?
check "unknown option: status 2, named" test $rc -eq 2 -a -n "$(grep -- "--no-such" <<< "$out")"
out=$("$SFVIT" compare g/base g/better --margin -1 2>&1); rc=$?
check "--margin -1: status 2" test $rc -eq 2 -a -n "$(grep -- "--margin takes a positive number" <<< "$out")"
out=$("$SFVIT" compare g/base 2>&1); rc=$?
check "one folder only: status 2" test $rc -eq 2

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
