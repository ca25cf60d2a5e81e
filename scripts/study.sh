#!/usr/bin/env bash
# study.sh — the reproduction study of docs/results.md: the SimA and SOFT papers' claims on
# Fashion-MNIST, in stages that each resume where they stopped (a finished run is never trained
# again, a finished evaluation never repeated), so the study can be spread over several
# sittings of a 2-core machine:
#   data      data/fmnist_split: train = the first 50,000 Fashion-MNIST training images, val =
#             the last 10,000 (picks each arm's learning rate), test = the 10,000 test images
#             (evaluated once per finished run, for the reported numbers)
#   calib     every arm at lr 1e-3, 2e-3 and 4e-3, seed 0, 5 epochs, scored on val; an arm
#             best at an edge of its grid gets the next lr (x2 or /2) on that side, up to
#             4x beyond the first grid                                                 (~90 min)
#   main      every arm at its own lr (the best val top-1 of calib), seeds 0-4; seed 0 is the
#             calibration run at that lr (linked, not trained again)                 (~120 min)
#   ablate1   the papers' ablations at the arm's lr, 5 seeds each: l2 and no normalization of
#             SimA's Q/K, one head for SimA and for softmax attention                  (~95 min)
#   ablate2   ReLU for GELU, no LPI (5 seeds each); the lr ladder: l1 / l2 / none at 4x and
#             16x the SimA arm's lr, one seed each; the horizon check: ViT-SimA and XCiT-SimA
#             trained 15 epochs instead of 5 (seed 0), to see how far from levelled off the
#             5-epoch numbers are                                                      (~105 min)
#   evaluate  (also at the end of each training stage: checkpoints are not kept in git)
#             every finished run on the test split (test.json, test_preds.csv.gz); SOFT arms
#             with 1..40 Newton-Raphson iterations; ViT arms at test resolutions 28..56; the
#             token-norm saliency of the SimA arms, trained and at initialization     (~20 min)
#   sweep     `sfvit bench --token-sweep`: time and memory against the token count (wants an
#             otherwise idle machine)                                                   (~5 min)
#   report    the tables (`sfvit compare`: the arms and ablations on test top-1, and each
#             evaluation of the main grid's runs, summed up in report/evaluations.md) and the
#             figures (`sfvit plot`) of docs/results.md
# The minutes are for an idle 2-core machine running two single-thread runs at a time.
# Usage: bash scripts/study.sh [STAGE ...]        (default: every stage in order)
# Environment: JOBS (runs at a time, each on one thread; default 2), OUT (default results/study);
# for a quick rehearsal of the whole pipeline (tests/test_study.sh): SPLIT (the data folder,
# default data/fmnist_split, made by the data stage only when it is the default), SEEDS (5),
# LRS (1e-3,2e-3,4e-3), HORIZON_EPOCHS (15), FIGURES (default docs/figures), SFVIT (the binary), EXTRA (key=value overrides for every run and evaluation, e.g.
# "train.epochs=1"), SWEEP_ARGS (the sweep's options, default none).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${SFVIT:-}" ]; then [ -x build/sfvit ] || bash scripts/fmnist_data.sh; fi
sfvit=${SFVIT:-$PWD/build/sfvit}
figures=${FIGURES:-docs/figures}
out=${OUT:-results/study}
jobs=${JOBS:-2}
split=${SPLIT:-data/fmnist_split}
arms=(vit_sima vit_msa vit_soft vit_softpp xcit_sima xcit_xca cvt_sima cvt_msa)
lrs=${LRS:-1e-3,2e-3,4e-3}
seeds=${SEEDS:-5}
horizon=${HORIZON_EPOCHS:-15}
extra="data.root=$split ${EXTRA:-}"

# parallel CMD...: the lines of standard input, each a command, run JOBS at a time; fails if any failed.
# Runs the command lines of stdin, $jobs at a time; a command that fails is named (its log is
# the file it writes to) and, once the others have finished, stops the stage and the script.
parallel() {
  xargs -d '\n' -P "$jobs" -I{} bash -c 'eval "$1" || { rc=$?; echo "study: a job failed (status $rc): $1" >&2; exit $rc; }' _ {}
}

stage_data() {
  [ -f $split/.complete ] || [ "$split" != data/fmnist_split ] && return 0
  local src=/usr/share/datasets/fashion-mnist names=configs/fmnist_classes.txt
  rm -rf $split && mkdir -p $split
  "$sfvit" data import-idx $src/train-images-idx3-ubyte.gz $src/train-labels-idx1-ubyte.gz $split/train --classes $names --range 0:50000
  "$sfvit" data import-idx $src/train-images-idx3-ubyte.gz $src/train-labels-idx1-ubyte.gz $split/val --classes $names --range 50000:
  "$sfvit" data import-idx $src/t10k-images-idx3-ubyte.gz $src/t10k-labels-idx1-ubyte.gz $split/test --classes $names
  touch $split/.complete
}

# Each arm's calibration is its own grid: calib/<arm>/lr=<lr>/seed0.
# The lrs an arm's calibration grid holds, ascending ("1e-3 2e-3 4e-3").
calib_lrs() { # ARM
  [ -f "$out/calib/$1/ablation.csv" ] || { echo "${lrs//,/ }"; return; }
  awk -F, 'NR > 1 { v = $1; gsub(/"/, "", v); sub(/^lr=/, "", v); print v }' "$out/calib/$1/ablation.csv" | sort -g | tr '\n' ' '
}

# A best lr at the edge of the grid is not a calibrated one: the grid grows by a factor 2 on
# that side until the best is inside it, at most to 4x beyond the first grid's ends (so the
# same command again adds nothing); a best still at the edge then is reported as such.
# calib_extension ARM: the lr to add to ARM's finished grid, or nothing.
calib_extension() {
  local grid best lo hi first_lo first_hi
  grid=$(calib_lrs "$1")
  best=$(best_lr "$1") || return 0
  lo=${grid%% *}; hi=$(echo $grid | awk '{ print $NF }')
  first_lo=$(tr ',' '\n' <<< "$lrs" | sort -g | head -1)
  first_hi=$(tr ',' '\n' <<< "$lrs" | sort -g | tail -1)
  if [ "$best" = "$hi" ]; then awk -v l="$hi" -v f="$first_hi" 'BEGIN { if (2 * l <= 4 * f * 1.001) printf "%g\n", 2 * l }'
  elif [ "$best" = "$lo" ]; then awk -v l="$lo" -v f="$first_lo" 'BEGIN { if (l / 2 >= f / 4 * 0.999) printf "%g\n", l / 2 }'; fi
}

stage_calib() {
  for a in "${arms[@]}"; do
    echo "'$sfvit' ablate configs/study/$a.yaml optim.lr=$lrs $extra train.out=$out/calib train.name=$a --seeds 1 > $out/logs/calib_$a.log 2>&1"
  done | parallel
  local round a new
  for round in 1 2; do
    for a in "${arms[@]}"; do
      new=$(calib_extension "$a")
      [ -n "$new" ] || continue
      echo "study: calib: $a is best at the edge of its grid (lr $(best_lr "$a")): adding lr $new" >&2
      echo "'$sfvit' ablate configs/study/$a.yaml optim.lr=$(echo $(calib_lrs "$a") $new | tr ' ' '\n' | sort -g | paste -sd,) $extra train.out=$out/calib train.name=$a --seeds 1 > $out/logs/calib_$a.log 2>&1"
    done | parallel
  done
  stage_evaluate
}

# The lr of an arm: the best final val top-1 of its calibration (the smaller lr on a tie);
# fails while a calibration run is unfinished, so no arm goes on with a partial choice.
best_lr() { # ARM
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) { if ($i == "final_top1_mean") col = i; if ($i == "status") st = i }; next }
           { v = $1; gsub(/"/, "", v); sub(/^lr=/, "", v); s = $st; gsub(/"/, "", s)
             if (s == "pending") { pending = 1; next }
             if ($col !~ /^[0-9.]+$/) next
             t = $col + 0
             if (!seen || t > best || (t == best && v + 0 < lr + 0)) { best = t; lr = v; seen = 1 } }
           END { if (pending || !seen) exit 1; print lr }' "$out/calib/$1/ablation.csv"
}

# results/study/lr/<arm>.yaml: the arm at its calibrated lr, the base of main and ablate.
write_lr_config() { # ARM [NAME key: value ...]: NAME.yaml with extra model keys
  local arm=$1 name=${2:-$1} lr; shift; [ $# -gt 0 ] && shift
  if ! lr=$(best_lr "$arm") || [ -n "$(calib_extension "$arm")" ]; then
    echo "study: the calibration of $arm has not finished (run the calib stage)"; return 1
  fi
  mkdir -p "$out/lr"
  {
    echo "# written by scripts/study.sh: configs/study/$arm.yaml at the lr its calibration chose"
    echo "base: $(realpath --relative-to="$out/lr" configs/study/$arm.yaml)"
    echo "optim:"
    echo "  lr: $lr"
    if [ $# -gt 0 ]; then echo "model:"; for kv in "$@"; do echo "  $kv"; done; fi
  } > "$out/lr/$name.yaml"
}

# Seeds 1.. are trained here; seed 0 is a link to the calibration run at the chosen lr (the
# same config: ablate's own cells are seeds 1.., and `sfvit compare` reads every seed folder).
stage_main() {
  local a lr cmds=() missing=0
  for a in "${arms[@]}"; do
    if ! lr=$(best_lr "$a") || [ -n "$(calib_extension "$a")" ]; then
      echo "study: main: $a waits for its calibration (run the calib stage)"; missing=1; continue
    fi
    write_lr_config "$a"
    local cell=$out/main/$a/config=$a
    mkdir -p "$cell"
    [ -e "$cell/seed0" ] || ln -s "../../../calib/$a/lr=$lr/seed0" "$cell/seed0"
    cmds+=("'$sfvit' ablate $out/lr/$a.yaml $extra train.out=$out/main train.name=$a train.seed=1 --seeds $((seeds - 1)) > $out/logs/main_$a.log 2>&1")
  done
  [ ${#cmds[@]} -eq 0 ] || printf '%s\n' "${cmds[@]}" | parallel
  stage_evaluate
  return $missing
}

# The ablations, in two stages of under two hours each; every ablation at its arm's lr.
ablation_cmd() { # NAME: a 5-seed grid of the generated config NAME.yaml
  echo "'$sfvit' ablate $out/lr/$1.yaml $extra train.out=$out/ablate train.name=$1 --seeds $seeds > $out/logs/ablate_$1.log 2>&1"
}

stage_ablate1() {  # normalization and heads
  write_lr_config vit_sima vit_sima_l2 "attn_norm: l2"
  write_lr_config vit_sima vit_sima_none "attn_norm: none"
  write_lr_config vit_sima vit_sima_1head "num_heads: 1"
  write_lr_config vit_msa vit_msa_1head "num_heads: 1"
  for v in vit_sima_l2 vit_sima_none vit_sima_1head vit_msa_1head; do ablation_cmd $v; done | parallel
  stage_evaluate
}

stage_ablate2() {  # ReLU, LPI, the lr ladder, the horizon check
  write_lr_config vit_sima vit_sima_relu "act: relu"
  write_lr_config xcit_sima xcit_sima_nolpi "lpi: false"
  local lr x4 x16
  lr=$(best_lr vit_sima)
  x4=$(awk -v l="$lr" 'BEGIN { printf "%g", 4 * l }')
  x16=$(awk -v l="$lr" 'BEGIN { printf "%g", 16 * l }')
  {
    ablation_cmd vit_sima_relu
    ablation_cmd xcit_sima_nolpi
    echo "'$sfvit' ablate $out/lr/vit_sima.yaml model.attn_norm=l1,l2,none optim.lr=$x4,$x16 $extra train.out=$out/ablate train.name=lr_ladder --seeds 1 > $out/logs/ablate_lr_ladder.log 2>&1"
    echo "'$sfvit' ablate $out/lr/vit_sima.yaml,$out/lr/xcit_sima.yaml $extra train.epochs=$horizon train.out=$out/ablate train.name=horizon --seeds 1 > $out/logs/ablate_horizon.log 2>&1"
  } | parallel
  stage_evaluate
}

# Every finished run folder (result.json, not diverged) under DIR...
# (seed 0 of a main arm is a link to its calibration run: followed, and each run listed once;
# paths relative to the repository, as the evaluation files record them).
finished_runs() { find -L "$@" -name result.json -path '*/seed*' -printf '%h\n' 2> /dev/null | xargs -r realpath --relative-base=. | sort -u; }

# Checkpoints stay on the machine that trained them (results/study/.gitignore), so every
# training stage ends with this stage, and a sitting stopped in the middle of one runs it
# before it ends; the calibration runs get the SOFT/resolution/saliency evaluations too, since
# one of them becomes seed 0 of its arm.
stage_evaluate() {
  local r
  # test top-1 and per-image predictions of every finished run
  for r in $(finished_runs "$out/main" "$out/ablate" "$out/calib"); do
    [ -f "$r/test.json" ] || [ ! -f "$r/last.safetensors" ] && continue
    echo "SFVIT_THREADS=1 '$sfvit' eval $r/last.safetensors --data $split --split test --json $r/test.json --save-preds $r/test_preds.csv > /dev/null && gzip -f $r/test_preds.csv"
  done | parallel
  # Newton-Raphson iterations at evaluation (SOFT arms), test resolutions (ViT arms)
  for a in vit_soft vit_softpp; do
    for r in $(finished_runs "$out/main/$a" "$out/calib/$a"); do
      for it in 1 2 3 5 10 20 40; do
        [ -f "$r/nr_iters_$it.json" ] || echo "SFVIT_THREADS=1 '$sfvit' eval $r/last.safetensors --data $split --split test model.nr_iters=$it --json $r/nr_iters_$it.json > /dev/null"
      done
    done
  done | parallel
  for a in vit_sima vit_msa vit_soft vit_softpp; do
    for r in $(finished_runs "$out/main/$a" "$out/calib/$a"); do
      # the training resolution's evaluation is the test evaluation itself
      [ ! -f "$r/test.json" ] || ln -sfn test.json "$r/img_size_28.json"
      for side in 36 44 56; do
        [ -f "$r/img_size_$side.json" ] || echo "SFVIT_THREADS=1 '$sfvit' eval $r/last.safetensors --data $split --split test model.img_size=$side --json $r/img_size_$side.json > /dev/null"
      done
    done
  done | parallel
  # token-norm saliency of the SimA arms: trained, and the same config at initialization
  for a in vit_sima xcit_sima; do
    for r in $(finished_runs "$out/main/$a" "$out/calib/$a"); do
      [ -f "$r/saliency.json" ] || echo "SFVIT_THREADS=1 '$sfvit' viz $r/last.safetensors --score $split --split test --json $r/saliency.json > /dev/null"
      [ -f "$r/saliency_init.json" ] || echo "SFVIT_THREADS=1 '$sfvit' viz $r/last.safetensors --score $split --split test --random-init --json $r/saliency_init.json > /dev/null"
    done
  done | parallel
}

stage_sweep() {
  mkdir -p "$out/sweep"
  [ -f "$out/sweep/sweep.csv" ] || SFVIT_THREADS=1 "$sfvit" bench --token-sweep ${SWEEP_ARGS:-} -o "$out/sweep/sweep.csv" | tee "$out/sweep/sweep.txt"
  # SimA's order crossover at N = D_h: both forced orders and auto around 64 tokens
  [ -f "$out/sweep/crossover.csv" ] || SFVIT_THREADS=1 "$sfvit" bench --token-sweep ${SWEEP_ARGS:---tokens 8:512} \
    --kinds sima_qk_first,sima_kv_first,sima_auto -o "$out/sweep/crossover.csv" | tee "$out/sweep/crossover.txt"
}

# Claim 6 asks whether one head costs SimA less than softmax: per seed, the drop of each arm
# (1 head − 4 heads, test top-1) is written as a seed folder's drop.json under
# REP/heads_drop/<arm>/, and `sfvit compare` pairs the two drops by seed (REP/heads_drop.md),
# so the interval and verdict come from the same statistics as every other table.
# drop_files REP ARM BASE ONE: ARM's per-seed drop, ONE − BASE in test top-1, from the
# per-seed column of `sfvit compare`'s CSV ("seed0:-0.880000;seed1:...").
drop_files() {
  local csv=$1/.heads_$2.csv s d
  "$sfvit" compare "$3" "$4" --file test.json --metric top1 -o "$csv" > /dev/null 2>&1 || { rm -f "$csv"; return 1; }
  rm -rf "$1/heads_drop/$2"
  tail -n 1 "$csv" | sed 's/.*,"\([^"]*\)"$/\1/' | tr ';' '\n' | while IFS=: read -r s d; do
    mkdir -p "$1/heads_drop/$2/$s"
    printf '{"top1_drop": %s}\n' "$d" > "$1/heads_drop/$2/$s/drop.json"
  done
  rm -f "$csv"
}
heads_drop() { # REP SIMA SIMA_1HEAD MSA MSA_1HEAD
  if drop_files "$1" vit_sima "$2" "$3" && drop_files "$1" vit_msa "$4" "$5"; then
    "$sfvit" compare "$1/heads_drop/vit_msa" "$1/heads_drop/vit_sima" --file drop.json --metric top1_drop -o "$1/heads_drop.md" > /dev/null
  else
    echo "study: report: heads_drop not yet"
  fi
}

stage_report() {
  local rep=$out/report fig=$figures
  mkdir -p "$rep" "$fig"
  local m=$out/main a=$out/ablate
  # the calibration: val top-1 per arm and lr, the chosen lr in bold (once all its runs finished)
  {
    echo "| arm | val top-1 (%) at each lr | chosen lr |"
    echo "|---|---|---|"
    local x lr
    for x in "${arms[@]}"; do
      local chosen cells=""
      local next
      chosen=$(best_lr "$x" 2> /dev/null) || chosen=""
      next=$(calib_extension "$x")
      [ -z "$next" ] || chosen=""
      for lr in $(calib_lrs "$x"); do
        local f=$out/calib/$x/lr=$lr/seed0/result.json v="–"
        [ -f "$f" ] && v=$(sed -n 's/.*"final_top1":[[:space:]]*\([^,]*\),*/\1/p' "$f")
        [ "$lr" = "$chosen" ] && v="**$v**"
        cells+="${cells:+, }$lr: $v"
      done
      echo "| $x | $cells | ${chosen:-not yet${next:+ (best at the edge: lr $next to run)}} |"
    done
  } > "$rep/calib.md"
  cmp() { # NAME FILE METRIC MARGIN BASE OTHER...: paired differences of FILE's METRIC, when their runs exist
    local name=$1 file=$2 metric=$3 margin=$4; shift 4
    "$sfvit" compare "$@" --file "$file" --metric "$metric" --margin "$margin" -o "$rep/$name.md" > /dev/null 2>&1 ||
      echo "study: report: $name not yet (its runs or $file files are missing)"
  }
  acc() { cmp "$1" test.json top1 0.5 "${@:2}"; }  # test top-1, the ±0.5-point margin of the design
  local soft=$m/vit_soft/config=vit_soft softpp=$m/vit_softpp/config=vit_softpp
  local vsima=$m/vit_sima/config=vit_sima vmsa=$m/vit_msa/config=vit_msa xsima=$m/xcit_sima/config=xcit_sima
  acc kinds_vit $vmsa $vsima $soft $softpp
  acc kinds_xcit $m/xcit_xca/config=xcit_xca $xsima
  acc kinds_cvt $m/cvt_msa/config=cvt_msa $m/cvt_sima/config=cvt_sima
  acc norm $vsima $a/vit_sima_l2/config=vit_sima_l2 $a/vit_sima_none/config=vit_sima_none
  acc heads_sima $vsima $a/vit_sima_1head/config=vit_sima_1head
  acc heads_msa $vmsa $a/vit_msa_1head/config=vit_msa_1head
  heads_drop "$rep" $vsima $a/vit_sima_1head/config=vit_sima_1head $vmsa $a/vit_msa_1head/config=vit_msa_1head
  acc relu $vsima $a/vit_sima_relu/config=vit_sima_relu
  acc lpi $xsima $a/xcit_sima_nolpi/config=xcit_sima_nolpi
  acc soft_pp $soft $softpp
  # vit_sima's 5 seeds trained again by a later build (docs/results.md, Design: builds), when run
  [ -d $a/vit_sima_newbuild ] && acc build_check $vsima $a/vit_sima_newbuild/config=vit_sima
  # the evaluations of the same runs (claims 10-12): one table per evaluation, SOFT the base
  local side it
  for side in 36 44 56; do cmp resolution_$side img_size_$side.json top1 0.5 $soft $softpp $vsima $vmsa; done
  cmp resolution_28 test.json top1 0.5 $soft $softpp $vsima $vmsa  # the training resolution, for reference
  for it in 1 2 3 5 10 20 40; do cmp nr_iters_$it nr_iters_$it.json top1 0.5 $soft $softpp; done
  # token-norm ROC AUC (0..1) of each SimA arm trained, against the same seeds' configs at
  # initialization; the margin only sets the decimals
  local arm qk
  for arm in vit_sima xcit_sima; do
    for qk in q k; do
      cmp saliency_${qk}_$arm saliency.json auc_$qk 0.01 $m/$arm/config=$arm --base-file saliency_init.json
    done
  done
  {
    echo "# The evaluations of the main grid's runs, one table per evaluation"
    echo
    echo "Made by \`scripts/study.sh report\` from the tables beside this file (\`sfvit compare\`)."
    local t
    for t in resolution_28 resolution_36 resolution_44 resolution_56 nr_iters_1 nr_iters_2 nr_iters_3 nr_iters_5 nr_iters_10 \
             nr_iters_20 nr_iters_40 saliency_q_vit_sima saliency_k_vit_sima saliency_q_xcit_sima saliency_k_xcit_sima; do
      [ -f "$rep/$t.md" ] || continue
      echo
      echo "## $t"
      echo
      sed -n '/^| folder |/,/^$/p' "$rep/$t.md"
      sed -n '/^| variant | pairs |/,/^$/p' "$rep/$t.md" | sed '/^$/d'
    done
  } > "$rep/evaluations.md"
  local dirs=()
  for x in "${arms[@]}"; do dirs+=("$m/$x/config=$x"); done
  if [ -d "$m" ]; then
    "$sfvit" plot --dots --file test.json --metric top1 "${dirs[@]}" -o $fig/study_arms.png
    "$sfvit" plot "${dirs[@]}" -o $fig/study_curves.png
    # the evaluations as curves over their setting (claims 10 and 11), where every arm has a value
    "$sfvit" plot --series 'nr_iters_{x}.json' --x 1,2,3,5,10,20,40 --logx --xlabel "Newton-Raphson iterations at evaluation" \
      $soft $softpp -o $fig/study_nr_iters.png > /dev/null 2>&1 || echo "study: report: study_nr_iters.png not yet"
    "$sfvit" plot --series 'img_size_{x}.json' --x 28,36,44,56 --xlabel "test resolution (px; trained at 28)" \
      $soft $softpp $vsima $vmsa -o $fig/study_resolution.png > /dev/null 2>&1 || echo "study: report: study_resolution.png not yet"
  fi
  # the ablations on test top-1 beside their base arms (dots: mean, 95 % interval, every seed),
  # (drawn once every ablation has a tested seed; the title counts the seeds)
  "$sfvit" plot --dots --file test.json --metric top1 $vsima $a/vit_sima_l2/config=vit_sima_l2 \
    $a/vit_sima_none/config=vit_sima_none $a/vit_sima_1head/config=vit_sima_1head $a/vit_sima_relu/config=vit_sima_relu \
    $vmsa $a/vit_msa_1head/config=vit_msa_1head $xsima $a/xcit_sima_nolpi/config=xcit_sima_nolpi \
    -o $fig/study_ablations.png > /dev/null 2>&1 || echo "study: report: study_ablations.png not yet"
  # the horizon check: the 15-epoch runs (lines) over the 5-epoch arms (mean and band of 5 seeds)
  "$sfvit" plot $a/horizon/config=vit_sima/seed0 $a/horizon/config=xcit_sima/seed0 $vsima $xsima \
    -o $fig/study_horizon.png > /dev/null 2>&1 || echo "study: report: study_horizon.png not yet"
  [ -f "$out/sweep/sweep.csv" ] && "$sfvit" plot "$out/sweep/sweep.csv" -o $fig/study_scaling.png
  [ -f "$out/sweep/crossover.csv" ] && "$sfvit" plot "$out/sweep/crossover.csv" -o $fig/study_crossover.png
  return 0
}

stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(data calib main ablate1 ablate2 evaluate sweep report)
mkdir -p "$out/logs"
for s in "${stages[@]}"; do
  case $s in
    data|calib|main|ablate1|ablate2|evaluate|sweep|report) echo "== study: $s ($(date -u +%H:%M:%S))"; "stage_$s" ;;
    *) echo "study.sh: unknown stage '$s' (data calib main ablate1 ablate2 evaluate sweep report)" >&2; exit 2 ;;
  esac
done
