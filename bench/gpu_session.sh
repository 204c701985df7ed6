#!/usr/bin/env bash
# One sitting on a GPU machine: the GPU test suite, then the benchmark table.
#   setsid bash bench/gpu_session.sh /tmp/gpu-session &     # detached: survives the calling command
#   setsid bash bench/gpu_session.sh --table-only /tmp/gpu-session &  # the table alone (about 21 min on
#                                                           # an H200): a lent machine goes back after 30
#                                                           # min held, and tests + table together take ~31
#   bash bench/gpu_session.sh --collect /tmp/gpu-session $OUT # copies what is done so far
set -uo pipefail
if [ "${1:-}" = "--collect" ]; then
    cp "$2"/*.log "$3"/ 2>/dev/null; cp "$2"/bench/results.jsonl "$3"/ 2>/dev/null
    cp "$2"/bench/runs.sqlite "$3"/bench-runs.sqlite 2>/dev/null
    tail -n 3 "$2"/tests.log 2>/dev/null; cat "$2"/bench.log 2>/dev/null; exit 0
fi
tests=1
if [ "${1:-}" = "--table-only" ]; then tests=0; shift; fi
out=$1; mkdir -p "$out"; cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,power.limit,memory.total --format=csv > "$out/machine.log"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.version.cuda)" >> "$out/machine.log"
if [ "$tests" = 1 ]; then python3 -m pytest -m gpu tests/test_gpu.py -v -p no:cacheprovider > "$out/tests.log" 2>&1; fi
python3 bench/run_benchmarks.py run --out "$out/bench" > "$out/bench.log" 2>&1
echo done >> "$out/bench.log"
