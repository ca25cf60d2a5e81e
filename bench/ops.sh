#!/bin/bash
# ops.sh — attention op benchmark: sfvit (bench/ops) against the same compositions in PyTorch
# (bench/ops_torch.py), same thread count, one table: op, shape, sfvit ms, torch ms and
# torch/sfvit (above 1: sfvit is faster). Times are medians of forward + backward.
#
# Usage: bench/ops.sh [BUILD_DIR] [REPS]   (BUILD_DIR default: build; REPS default 9;
#        ROUNDS=n alternations of the two sides, default 2)
# Threads: SFVIT_THREADS (default 2) for both sides. OMP_WAIT_POLICY as in bench/compare: a
# user's setting applies to both sides, otherwise sfvit runs with the runtime default and
# PyTorch with passive (each side's faster policy). OPENBLAS_CORETYPE is printed as found and
# left as it is.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-build}"
reps="${2:-9}"
case "$build" in /*) ;; *) build="$root/$build" ;; esac
bin="$build/bench/ops"
if [ ! -x "$bin" ]; then
    echo "ops.sh: $bin not found; build it first: ninja -C $build bench/ops" >&2
    exit 1
fi
if ! /usr/bin/python3 -c 'import torch' 2> /dev/null; then
    bash "$root/scripts/install_deps.sh" python3-torch >&2 \
        || { echo "ops.sh: PyTorch is needed for the reference side: apt-get install python3-torch" >&2; exit 1; }
fi
export SFVIT_THREADS="${SFVIT_THREADS:-2}"
torch_wait="${OMP_WAIT_POLICY:-passive}"
echo "threads: $SFVIT_THREADS   OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-(unset)}   OMP_WAIT_POLICY: sfvit ${OMP_WAIT_POLICY:-(unset)}, torch $torch_wait"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# The two sides alternate for ROUNDS rounds and each entry keeps its best median, so a
# burst of load from other processes does not land on one side only.
rounds="${ROUNDS:-2}"
for r in $(seq "$rounds"); do
    "$bin" "$reps" >> "$tmp/sfvit.txt"
    OMP_WAIT_POLICY="$torch_wait" /usr/bin/python3 "$root/bench/ops_torch.py" "$reps" >> "$tmp/torch.txt"
done
grep -h '^#' "$tmp/sfvit.txt" "$tmp/torch.txt" | sort -u
echo "# median of $reps runs per round, best of $rounds rounds; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
awk -F'\t' '
    FNR == NR { if ($0 !~ /^#/) { k = $1 "\t" $2; if (!(k in sf) || $3 < sf[k]) sf[k] = $3 }; next }
    $0 !~ /^#/ {
        key = $1 "\t" $2
        if (!(key in sf)) next
        if (!(key in t)) order[++n] = key
        if (!(key in t) || $3 < t[key]) t[key] = $3
    }
    END {
        printf "%-12s %-20s %10s %10s %12s\n", "op", "shape", "sfvit ms", "torch ms", "torch/sfvit"
        for (i = 1; i <= n; i++) {
            k = order[i]; split(k, p, "\t")
            printf "%-12s %-20s %10.2f %10.2f %12.2f\n", p[1], p[2], sf[k], t[k], t[k] / sf[k]
        }
    }' "$tmp/sfvit.txt" "$tmp/torch.txt"
