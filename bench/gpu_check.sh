#!/usr/bin/env bash
# A short GPU sitting for the engine's figures: the Run page's default run repeated (block durations,
# energy notes, spread), the bare-loop agreement on ResNet-50, then the GPU test suite.
#   setsid bash bench/gpu_check.sh /tmp/gpu-check > /dev/null 2>&1 &   # detached
#   bash bench/gpu_check.sh --collect /tmp/gpu-check $OUT                # what is done so far
set -uo pipefail
if [ "${1:-}" = "--collect" ]; then
    cp "$2"/*.log "$2"/*.json "$3"/ 2>/dev/null; tail -n 5 "$2"/*.log; exit 0
fi
out=$1; mkdir -p "$out"; cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,driver_version,power.limit,memory.total --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.version.cuda)"
} > "$out/machine.log" 2>&1
python3 bench/repeat_default.py --device cuda --runs 3 --out "$out/gpu-repeat-default.json" > "$out/repeat.log" 2>&1
python3 bench/bare_loop.py --out "$out/bare-loop.json" > "$out/bare-loop.log" 2>&1
python3 -m pytest -m gpu tests/test_gpu.py -v -p no:cacheprovider > "$out/tests.log" 2>&1
echo done >> "$out/tests.log"
