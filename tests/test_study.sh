#!/usr/bin/env bash
# A rehearsal of the reproduction study (scripts/study.sh) on a small real subset: every stage
# on every arm with one epoch and three seeds, then the checks that the long study relies on —
# each arm's lr is the best of its calibration, seed 0 of the main grid is the calibration run
# at that lr, every run is evaluated on the test split, the SOFT/ViT/saliency evaluations and
# the report's tables and figures exist, and running the script again trains nothing.
# Skipped (exit 77) in a sanitizer build: it repeats code paths the other tests cover there,
# at ten times the time.
# Usage: test_study.sh SFVIT_BINARY SOURCE_ROOT
set -uo pipefail
SFVIT=$(realpath "$1")
ROOT=$(realpath "$2")
if [ -n "${SFVIT_SANITIZED:-}" ]; then echo "skipped: sanitizer build (the rehearsal runs in the release stage)"; exit 77; fi
W=$(mktemp -d /tmp/sfvit-study-XXXXXX)
[ -n "${SFVIT_KEEP_TEST_DIR:-}" ] || trap 'rm -rf "$W"' EXIT; echo "work dir: $W"
cd "$W"
source "$ROOT/tests/lib.sh"

fmnist_subset "$SFVIT" "$ROOT" 256 128
cp -r fm/val fm/test
O=$W/study
export SFVIT OUT=$O SPLIT=$W/fm FIGURES=$W/fig SEEDS=3 LRS=1e-3,4e-3 HORIZON_EPOCHS=2 JOBS=2 SFVIT_THREADS=1 \
  EXTRA="train.epochs=1 data.workers=1 train.log_every=4 train.eval_batch_size=64" \
  SWEEP_ARGS="--tokens 16:64 --dh 4 --heads 1 --min-time 0 --steps 1 --warmup 0"
bash "$ROOT/scripts/study.sh" > study.log 2>&1; rc=$?
check "every stage exits 0" test $rc -eq 0
[ $rc -eq 0 ] || tail -30 study.log
check "the stages ran in order" test "$(grep -c '^== study: ' study.log)" -eq 8

ARMS="vit_sima vit_msa vit_soft vit_softpp xcit_sima xcit_xca cvt_sima cvt_msa"
for a in $ARMS; do
  # the best final val top-1 of the calibration, the smaller lr on a tie
  # over every lr its grid holds (the two given, and any the edge rule added)
  want=$(for d in "$O/calib/$a"/lr=*; do lr=${d##*/lr=}; echo "$lr $(python3 -c "import json; print(json.load(open('$d/seed0/result.json'))['final_top1'])")"; done |
         sort -k2,2gr -k1,1g | head -1 | cut -d' ' -f1)
  grid=$(ls -d "$O/calib/$a"/lr=* | sed 's/.*lr=//' | sort -g | tr '\n' ' ')
  lo=${grid%% *}; hi=$(echo $grid | awk '{ print $NF }')
  check "$a: the chosen lr ($want) is inside its grid ($grid) or at the 4x limit" \
    bash -c "[ '$want' != '$lo' ] && [ '$want' != '$hi' ] || awk 'BEGIN { exit !($want <= 2.5e-4 * 1.001 || $want >= 1.6e-2 * 0.999) }'"
  check "$a: lr/$a.yaml has the calibration's best lr ($want)" grep -qx "  lr: $want" "$O/lr/$a.yaml"
  check "$a: main seed 0 is the calibration run at that lr" \
    test "$(realpath "$O/main/$a/config=$a/seed0")" = "$(realpath "$O/calib/$a/lr=$want/seed0")"
  check "$a: main seeds 1 and 2 trained" test -s "$O/main/$a/config=$a/seed1/result.json" -a -s "$O/main/$a/config=$a/seed2/result.json"
done
base=$(sed -n 's/^base: //p' "$O/lr/vit_sima.yaml")
check "a generated config's base ($base) is a relative path that exists" \
  test "${base#/}" = "$base" -a -f "$O/lr/$base"
check "an ablation's config adds its model key" grep -qx "  attn_norm: none" "$O/lr/vit_sima_none.yaml"
for g in vit_sima_l2 vit_sima_none vit_sima_1head vit_msa_1head vit_sima_relu xcit_sima_nolpi; do
  check "ablate $g: 3 seeds" test "$(ls -d "$O/ablate/$g/config=$g"/seed*/result.json 2> /dev/null | wc -l)" -eq 3
done
check "lr ladder: l1/l2/none x 2 lrs" test "$(tail -n +2 "$O/ablate/lr_ladder/runs.csv" | wc -l)" -eq 6
check "horizon: ViT-SimA and XCiT-SimA trained HORIZON_EPOCHS (2) epochs" \
  test "$(grep -h '"epochs":' "$O"/ablate/horizon/config=*/seed0/result.json | grep -c '2,')" -eq 2

runs=$(find -L "$O/calib" "$O/main" "$O/ablate" -name result.json -path '*/seed*' -printf '%h\n' | xargs realpath | sort -u)
n_runs=$(wc -l <<< "$runs")
n_test=0
for r in $runs; do [ -s "$r/test.json" ] && [ -s "$r/test_preds.csv.gz" ] && n_test=$((n_test + 1)); done
check "every one of the $n_runs runs has test.json and test_preds.csv.gz ($n_test)" test "$n_test" -eq "$n_runs"
r=$(realpath "$O/main/vit_sima/config=vit_sima/seed1")
check "test.json: 128 test images" python3 -c "import json,sys; sys.exit(json.load(open('$r/test.json'))['images'] != 128)"
check "test_preds: a row per image" test "$(zcat "$r/test_preds.csv.gz" | tail -n +2 | wc -l)" -eq 128
for a in vit_soft vit_softpp; do
  check "$a: 7 Newton-Raphson evaluations per seed" \
    test "$(ls "$O/main/$a/config=$a"/seed*/nr_iters_*.json | wc -l)" -eq 21
done
for a in vit_sima vit_msa vit_soft vit_softpp; do
  check "$a: 3 test resolutions per seed, and 28 (the training one) linked to test.json" \
    test "$(ls "$O/main/$a/config=$a"/seed*/img_size_*.json | wc -l)" -eq 12 -a "$(readlink "$O/main/$a/config=$a/seed1/img_size_28.json")" = test.json
done
for a in vit_sima xcit_sima; do
  check "$a: saliency trained and at initialization" \
    test "$(ls "$O/main/$a/config=$a"/seed*/saliency.json "$O/main/$a/config=$a"/seed*/saliency_init.json | wc -l)" -eq 6
done
check "sweep: CSV" test -s "$O/sweep/sweep.csv"
for t in kinds_vit kinds_xcit kinds_cvt norm heads_sima heads_msa relu lpi soft_pp; do
  check "report: $t.md pairs 3 seeds" grep -q "| 3 |" "$O/report/$t.md"
done
for t in resolution_36 resolution_56 nr_iters_1 nr_iters_40; do
  check "report: $t.md pairs 3 seeds" grep -q "| 3 |" "$O/report/$t.md"
done
check "report: heads_drop.md pairs the two single-head drops over 3 seeds" grep -q '^| heads_drop/vit_sima | 3 |' "$O/report/heads_drop.md"
check "report: each drop is the arm's own paired difference (seed 1, SimA)" python3 -c "
import json, sys
m = json.load(open('$O/main/vit_sima/config=vit_sima/seed1/test.json'))['top1']
one = json.load(open('$O/ablate/vit_sima_1head/config=vit_sima_1head/seed1/test.json'))['top1']
d = json.load(open('$O/report/heads_drop/vit_sima/seed1/drop.json'))['top1_drop']
sys.exit(abs(d - (one - m)) > 1e-5)"
check "report: resolution_56.md names its file" grep -q "^# top1 of img_size_56.json, paired by seed" "$O/report/resolution_56.md"
for a in vit_sima xcit_sima; do
  check "report: $a's saliency trained against its initialization, 3 pairs, AUC to 3 decimals" \
    grep -Eq "^\| $a/config=$a: saliency.json \| 3 \| 0/3 \| 0\.[0-9]{3} \|" "$O/report/saliency_q_$a.md"
done
check "report: evaluations.md gathers the 15 evaluations" test "$(grep -c '^## ' "$O/report/evaluations.md")" -eq 15
check "report: the calibration table, every arm with its chosen lr in bold" test "$(grep -c ': \*\*' "$O/report/calib.md")" -eq 8
check "report: figures" test -s "$W/fig/study_arms.png" -a -s "$W/fig/study_curves.png" -a -s "$W/fig/study_scaling.png"
check "report: the evaluation curves" test -s "$W/fig/study_nr_iters.png" -a -s "$W/fig/study_resolution.png"
check "report: the ablations' dots and the horizon curves" test -s "$W/fig/study_ablations.png" -a -s "$W/fig/study_horizon.png"

# ---- the same command again: nothing is trained or evaluated twice ----
stamp=$(mktemp -p "$W"); touch "$stamp"
bash "$ROOT/scripts/study.sh" calib main ablate1 ablate2 evaluate > again.log 2>&1; rc=$?
check "again: exits 0" test $rc -eq 0
check "again: no run or evaluation file rewritten" test "$(find "$O" \( -name result.json -o -name 'test.json' -o -name 'nr_iters_*.json' -o -name 'saliency*.json' \) -newer "$stamp" | wc -l)" -eq 0
check "again: every cell finished earlier" test "$(grep -h "finished earlier, not run again" "$O"/logs/*.log | wc -l)" -ge "$n_runs"

check "a failing job is named, and the script stops with an error" bash -c "! OUT='$W/failing' SFVIT=/bin/false \
  bash '$ROOT/scripts/study.sh' calib main > fail.txt 2>&1 && grep -q 'study: a job failed (status 1): ./bin/false. ablate configs/study/vit_sima.yaml' fail.txt && ! grep -q '== study: main' fail.txt"
check "an unknown stage is refused" bash -c "! bash '$ROOT/scripts/study.sh' bogus 2> err.txt && grep -q \"unknown stage 'bogus'\" err.txt"

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
