#!/usr/bin/env bash
# A GPU sitting for the steady headline (issue 26): the GPU default (captioner small, batch 32, bf16) ten times
# through the command line, before and after paired rounds; ResNet-50 and Flux medium at their defaults; the
# round length on the launch-bound captioner; and a candidate default that is GPU-bound.
#   setsid bash bench/headline_sitting.sh /tmp/headline > /dev/null 2>&1 &       # detached, about 16 min with BEFORE
#   BEFORE=/path/to/engine-before setsid bash bench/headline_sitting.sh /tmp/headline > /dev/null 2>&1 &
#   bash bench/headline_sitting.sh --collect /tmp/headline $OUT                 # what is done so far
# BEFORE: a checkout of the engine before paired rounds (e.g. `git archive <base> | tar -x -C DIR`); without
# it the "before" rows are skipped, and each run's old headline (the ratio of median throughputs) is still
# recomputed from its blocks. Look for, in paired-*.log: "paired ... all within ±N%" with N <= 5 for the
# captioner, "flagged noisy: ... K now" with K <= 2 of 10; ResNet-50 and Flux paired medians within 2% of the
# old ones, and their "median run" seconds no longer than before.
set -uo pipefail
if [ "${1:-}" = "--collect" ]; then
    cp "$2"/*.log "$2"/*.json "$3"/ 2>/dev/null; tail -n 4 "$2"/*.log; exit 0
fi
out=$1; mkdir -p "$out"; cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,driver_version,power.limit,memory.total,clocks.sm --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"; nproc
} > "$out/machine.log" 2>&1
stab() { python3 bench/stability.py --device cuda "$@"; }
if [ -n "${BEFORE:-}" ]; then
    stab --runs ${BEFORE_RUNS:-5} --engine "$BEFORE" --out "$out/before-captioner.json" > "$out/before-captioner.log" 2>&1
fi
stab --runs 10 --out "$out/paired-captioner.json" > "$out/paired-captioner.log" 2>&1
for model in resnet50 flux; do
    preset=$([ $model = flux ] && echo "-- --model flux --preset medium" || echo "-- --model resnet50")
    if [ -n "${BEFORE:-}" ]; then
        stab --runs 1 --engine "$BEFORE" --out "$out/before-$model.json" $preset > "$out/before-$model.log" 2>&1
    fi
    stab --runs 2 --out "$out/paired-$model.json" $preset > "$out/paired-$model.log" 2>&1
done
# Round length on the launch-bound default, at a fixed budget (no early stop), warm caches: interval width.
for rs in 0.1 0.2 0.4; do
    stab --runs 1 --out "$out/rounds-$rs.json" -- --round-s $rs --target-pct 0 --cache warm > "$out/rounds-$rs.log" 2>&1
done
# A candidate default whose figure holds still: the same captioner at a batch that keeps the GPU busy.
stab --runs 3 --out "$out/paired-captioner-b256.json" -- --batch-size 256 > "$out/paired-captioner-b256.log" 2>&1
echo done >> "$out/machine.log"
