#!/usr/bin/env bash
# Integration tests of `sfvit ablate --seeds` on real Fashion-MNIST data (a small subset): the
# tables (mean, sample std and the 95 % Student-t interval of the mean checked against the runs), a diverging variant shown as NaN with
# its step, the cell order, resuming after the process is killed mid-grid without re-running
# finished cells, and a changed study refused in an existing folder (settings compared, so a run
# written before a key existed still belongs to its study).
# Usage: test_ablate.sh SFVIT_BINARY SOURCE_ROOT
set -uo pipefail
SFVIT=$(realpath "$1")
ROOT=$(realpath "$2")
W=$(mktemp -d /tmp/sfvit-ablate-XXXXXX)
[ -n "${SFVIT_KEEP_TEST_DIR:-}" ] || trap 'rm -rf "$W"' EXIT; echo "work dir: $W"
cd "$W"
source "$ROOT/tests/lib.sh"
# The CSV rows of one variant without their first, quoted column (variant names hold commas).
rows() { grep "^\"$1\"," "$2" | sed 's/^"[^"]*",//'; }

fmnist_subset "$SFVIT" "$ROOT" 512 128
BASE=$ROOT/configs/fmnist_tiny.yaml
COMMON=(data.root=fm train.out=runs train.threads=1 data.workers=1 train.log_every=4)

# ---- 2 x 2 grid, 2 seeds; lr=10 with weight decay 5 multiplies every weight by -49 per step ----
GRID=(model.attn_norm=l1,none optim.lr=1e-3,10 optim.weight_decay=5 sched.warmup_epochs=0 train.batch_size=32 --seeds 2)
out=$("$SFVIT" ablate "$BASE" "${COMMON[@]}" train.name=grid "${GRID[@]}" 2>&1); rc=$?
check "ablate --seeds 2 exits 0" test $rc -eq 0
D=runs/grid
check "ablation.md, ablation.csv, runs.csv written" test -s $D/ablation.md -a -s $D/ablation.csv -a -s $D/runs.csv
check "ablation.csv: 4 variants" test "$(tail -n +2 $D/ablation.csv | wc -l)" -eq 4
check "runs.csv: 8 cells" test "$(tail -n +2 $D/runs.csv | wc -l)" -eq 8
order=$(tail -n +2 $D/runs.csv | cut -d, -f1-4 | tr -d '"' | awk -F, '{print $1 "," $2 "/" $3}' | tr '\n' ' ')
want='attn_norm=l1,lr=1e-3/0 attn_norm=l1,lr=10/0 attn_norm=none,lr=1e-3/0 attn_norm=none,lr=10/0 attn_norm=l1,lr=1e-3/1 attn_norm=l1,lr=10/1 attn_norm=none,lr=1e-3/1 attn_norm=none,lr=10/1 '
check "cells run round by round in command-line order" test "$order" = "$want"
check "cell folders <variant>/seed<S>" test -s "$D/attn_norm=none,lr=1e-3/seed1/result.json"

# Every lr=10 cell diverged: NaN final top-1, the step of the NaN/Inf in runs.csv and the tables.
div=$(grep -c '^"attn_norm=[a-z0-9]*,lr=10",[01],diverged,[1-9][0-9]*,[0-9]*,nan,' $D/runs.csv)
check "runs.csv: 4 diverged cells with step and NaN top-1" test "$div" -eq 4
check "ablation.md: diverged variants show NaN and the steps" \
  grep -qE '^\| attn_norm=l1,lr=10 \| NaN \| – \| NaN \| 0/2 \|.*\| 2/2 diverged at step [0-9]+, [0-9]+ \|$' $D/ablation.md
step=$(rows attn_norm=l1,lr=10 $D/runs.csv | grep '^0,' | cut -d, -f3)
check "the step is the trainer's" grep -q "\"event\":\"diverged\",\"step\":$step," "$D/attn_norm=l1,lr=10/seed0/log.jsonl"

# final top-1 of each finished cell = the last line of its metrics.csv; best = the max.
for v in attn_norm=l1,lr=1e-3 attn_norm=none,lr=1e-3; do
  for s in 0 1; do
    m=$(tail -n +2 "$D/$v/seed$s/metrics.csv" | awk -F, '{last=$4; if ($4 > b) b = $4} END {printf "%.4f %.4f", last, b}')
    r=$(rows "$v" $D/runs.csv | grep "^$s,ok," | awk -F, '{printf "%.4f %.4f", $5, $6}')
    check "$v seed $s: runs.csv top-1 = metrics.csv" test "$m" = "$r"
  done
  # mean and sample standard deviation (n - 1) of the two seeds, recomputed here
  want=$(rows "$v" $D/runs.csv | awk -F, '{f[NR]=$5; b[NR]=$6} END {
    mf=(f[1]+f[2])/2; mb=(b[1]+b[2])/2
    sf=sqrt(((f[1]-mf)^2+(f[2]-mf)^2)/1); sb=sqrt(((b[1]-mb)^2+(b[2]-mb)^2)/1)
    printf "%.2f %.2f %.2f %.2f", mf, sf, mb, sb}')
  have=$(rows "$v" $D/ablation.csv | awk -F, '{printf "%.2f %.2f %.2f %.2f", $4, $5, $6, $7}')
  check "$v: mean ± std in ablation.csv ($have)" test "$want" = "$have"
  read -r mf sf _ <<< "$want"
  # the 95 % interval of the mean: mean ± t(0.975, 1) · std / √2 with t(0.975, 1) = 12.706205
  ci=$(rows "$v" $D/runs.csv | awk -F, '{f[NR]=$5; b[NR]=$6} END {
    mf=(f[1]+f[2])/2; mb=(b[1]+b[2])/2; hf=12.706205*sqrt((f[1]-mf)^2+(f[2]-mf)^2)/sqrt(2)
    hb=12.706205*sqrt((b[1]-mb)^2+(b[2]-mb)^2)/sqrt(2); printf "%.4f %.4f %.4f %.4f", mf-hf, mf+hf, mb-hb, mb+hb}')
  have=$(rows "$v" $D/ablation.csv | awk -F, '{printf "%.4f %.4f %.4f %.4f", $8, $9, $10, $11}')
  check "$v: 95 % interval in ablation.csv ($have, recomputed $ci)" python3 -c "
import sys; a, b = '$ci'.split(), '$have'.split(); sys.exit(max(abs(float(x) - float(y)) for x, y in zip(a, b)) > 2e-4)"
  read -r lo hi _ <<< "$ci"
  check "$v: mean ± std and the interval in ablation.md" \
    grep -q "^| $v | $mf ± $sf | \[$(printf %.2f "$lo"), $(printf %.2f "$hi")\] |" $D/ablation.md
done
check "ablation.csv: the interval columns" \
  grep -q '^variant,.*,best_top1_std,final_top1_ci95_lo,final_top1_ci95_hi,best_top1_ci95_lo,best_top1_ci95_hi,train_img_per_s,' $D/ablation.csv
check "ablation.md: the interval is defined" grep -q 'mean ± t(0.975, n − 1) · std / √n' $D/ablation.md
check "ablation.csv: counts and status of a finished variant" \
  grep -q '^"attn_norm=l1,lr=1e-3",2,2,0,.*,"ok"$' $D/ablation.csv
check "ablation.md: exp() and MACs columns" grep -q '| train img/s | params | MMACs/img | exp()/img |' $D/ablation.md

# ---- sfvit compare on the grid's own result.json files: pairs by seed, diverged seeds counted ----
out=$("$SFVIT" compare "$D/attn_norm=l1,lr=1e-3" "$D/attn_norm=none,lr=1e-3" "$D/attn_norm=l1,lr=10" -o cmp.csv 2>&1); rc=$?
check "compare on the grid exits 0" test $rc -eq 0
check "compare: 2 pairs with the other finished variant" grep -q '^"grid/attn_norm=l1,lr=1e-3","grid/attn_norm=none,lr=1e-3","result.json","final_top1",0.5,2,2,0,0,2,0,0,' cmp.csv
check "compare: the diverged variant has no pair, 2/2 diverged, too few pairs" \
  grep -q '^| grid/attn_norm=l1,lr=10 | 0 | 2/2 | – | – | – | – | 0/0/0 | too few pairs |$' <<< "$out"

# ---- the same command again: nothing is re-run ----
sum_before=$(cat $D/*/seed*/log.jsonl | md5sum)
out=$("$SFVIT" ablate "$BASE" "${COMMON[@]}" train.name=grid "${GRID[@]}" 2>&1); rc=$?
check "re-run exits 0" test $rc -eq 0
check "re-run: 8 cells reported finished, none trained" \
  test "$(grep -c 'finished earlier, not run again' <<< "$out")" -eq 8 -a "$(grep -c '^epoch ' <<< "$out")" -eq 0
check "re-run: logs untouched" test "$(cat $D/*/seed*/log.jsonl | md5sum)" = "$sum_before"

# ---- a different study in the same folder is refused ----
out=$("$SFVIT" ablate "$BASE" "${COMMON[@]}" train.name=grid "${GRID[@]}" aug.hflip=0.5 2>&1); rc=$?
check "changed study refused" test $rc -ne 0
check "changed study: the message names the cell folder" grep -q "holds a run of another config" <<< "$out"
check "changed study: the tables are untouched" grep -q "2/2 diverged at step" $D/ablation.md

# ---- a run written before a key existed holds that key's default: the same study ----
cell_cfg="$D/attn_norm=l1,lr=1e-3/seed0/config.yaml"
cp "$cell_cfg" cell_cfg.keep
check "the cell's config holds model.num_landmarks at its default" grep -q '^  num_landmarks: 49$' "$cell_cfg"
sed -i '/^  num_landmarks: 49$/d' "$cell_cfg"
out=$("$SFVIT" ablate "$BASE" "${COMMON[@]}" train.name=grid "${GRID[@]}" 2>&1); rc=$?
check "a cell config without a later key's line (its default): accepted" test $rc -eq 0
check "... and nothing is trained again" test "$(grep -c 'finished earlier, not run again' <<< "$out")" -eq 8
sed 's/^  num_landmarks: 49$/  num_landmarks: 36/' cell_cfg.keep > "$cell_cfg"
out=$("$SFVIT" ablate "$BASE" "${COMMON[@]}" train.name=grid "${GRID[@]}" 2>&1); rc=$?
check "a cell config with another value of that key: refused" test $rc -ne 0
check "... naming the cell folder" grep -q "holds a run of another config" <<< "$out"
sed 's/^  num_landmarks: 49$/  no_such_key: 1/' cell_cfg.keep > "$cell_cfg"
out=$("$SFVIT" ablate "$BASE" "${COMMON[@]}" train.name=grid "${GRID[@]}" 2>&1); rc=$?
check "a cell config this build cannot read: refused, the key named" \
  test $rc -ne 0 -a "$(grep -c 'no_such_key' <<< "$out")" -ge 1
cp cell_cfg.keep "$cell_cfg"

# ---- killed mid-grid (SIGKILL), then resumed: finished cells are not trained again ----
KGRID=(model.attn_norm=l1,l2,none train.epochs=2 --seeds 2)
# Held before the third cell starts (SFVIT_TEST_HOLD, tests/lib.sh wait_held): two finished.
SFVIT_TEST_HOLD="cell 3" "$SFVIT" ablate "$BASE" "${COMMON[@]}" train.name=kill "${KGRID[@]}" > kill1.log 2>&1 &
pid=$!
wait_held kill1.log $pid "cell 3" || bad "kill mid-grid: the grid did not reach its third cell"
kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
done_before=$(ls runs/kill/*/seed*/result.json | sort)
n_before=$(echo "$done_before" | wc -l)
check "killed before the third cell: 2 of 6 cells finished ($n_before)" test "$n_before" -eq 2
stamp=$(for f in $done_before; do md5sum "$f" "$(dirname "$f")/log.jsonl"; done)
out=$("$SFVIT" ablate "$BASE" "${COMMON[@]}" train.name=kill "${KGRID[@]}" 2>&1); rc=$?
check "resumed ablation exits 0" test $rc -eq 0
check "resumed: the $n_before finished cells are not run again" \
  test "$(grep -c 'finished earlier, not run again' <<< "$out")" -eq "$n_before"
check "resumed: their results and logs untouched" \
  test "$(for f in $done_before; do md5sum "$f" "$(dirname "$f")/log.jsonl"; done)" = "$stamp"
check "resumed: all 6 cells finished" test "$(ls runs/kill/*/seed*/result.json | wc -l)" -eq 6
check "resumed: every cell ok with 2 epochs" test "$(grep -c ',ok,-1,2,' runs/kill/runs.csv)" -eq 6
check "resumed: 3 variants with 2/2 seeds" test "$(grep -c '| 2/2 |' runs/kill/ablation.md)" -eq 3

# ---- SIGTERM stops the grid after a checkpoint; the same command continues it ----
# The signal arrives during update 2 of the first cell.
SFVIT_TEST_HOLD="step 2" "$SFVIT" ablate "$BASE" "${COMMON[@]}" train.name=term model.attn_norm=l1,l2 train.epochs=3 > term1.log 2>&1 &
pid=$!
if wait_held term1.log $pid "step 2"; then kill -TERM $pid; else bad "SIGTERM: the grid did not reach update 2"; fi
wait $pid; rc=$?
check "SIGTERM: ablate exits 130" test $rc -eq 130
check "SIGTERM: says how to continue" grep -q "the same command continues it" term1.log
check "SIGTERM: the first cell stopped after update 2" grep -q "stopped by signal after step 2" term1.log
out=$("$SFVIT" ablate "$BASE" "${COMMON[@]}" train.name=term model.attn_norm=l1,l2 train.epochs=3 2>&1); rc=$?
check "SIGTERM: continued to the end" test $rc -eq 0 -a "$(grep -c ',ok,-1,3,' runs/term/runs.csv)" -eq 2

# ---- one config and no axis: a grid of one variant over seeds ----
out=$("$SFVIT" ablate "$BASE" "${COMMON[@]}" train.name=lone train.epochs=1 --seeds 2 2>&1); rc=$?
check "one config, --seeds 2: exits 0" test $rc -eq 0
check "one config: the variant is config=<stem>, both seeds finished" \
  test -s runs/lone/config=fmnist_tiny/seed0/result.json -a -s runs/lone/config=fmnist_tiny/seed1/result.json
check "one config: ablation.csv has one variant" test "$(tail -n +2 runs/lone/ablation.csv | wc -l)" -eq 1

# ---- argument errors ----
out=$("$SFVIT" ablate "$BASE" "${COMMON[@]}" train.name=lone1 2>&1); rc=$?
check "one config, no axis, one seed refused" test $rc -eq 2
check "the refusal says what is missing" grep -q -- "no axis with several values.*--seeds N" <<< "$out"
out=$("$SFVIT" ablate "$BASE" model.attn_norm=l1,l2 --seeds 0 2>&1); rc=$?
check "--seeds 0 refused" test $rc -eq 2
check "--seeds error names the option" grep -q -- "--seeds takes a number" <<< "$out"

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
