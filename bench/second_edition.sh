#!/usr/bin/env bash
# BENCHMARKS.md's second edition (issue 19) in two GPU sittings, each within one 30-minute lease:
#   setsid bash bench/second_edition.sh A /tmp/se > /dev/null 2>&1 &   # ResNet-50, captioner, click-to-result
#   setsid bash bench/second_edition.sh B /tmp/se > /dev/null 2>&1 &   # Flux medium and full, then pytest -m gpu
#   bash bench/second_edition.sh --collect /tmp/se $OUT                  # what is done so far
# Each sitting writes its machine (GPU, driver, versions) beside its rows, so a section can name its sitting.
set -uo pipefail
if [ "${1:-}" = "--collect" ]; then
    mkdir -p "$3"; cp -r "$2"/* "$3"/ 2>/dev/null; rm -f "$3"/*/runs.sqlite
    tail -n 4 "$2"/*.log 2>/dev/null; exit 0
fi
sitting=$1; out=$2/$1; mkdir -p "$out"; cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,driver_version,power.limit,memory.total --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.version.cuda)"
} > "$out/machine.txt" 2>&1
if [ "$sitting" = A ]; then
    python3 bench/trust_sitting.py run --out "$out/rows" --only resnet50 captioner "first run" > "$out/rows.log" 2>&1
    python3 bench/first_result.py run --out "$out/first" --models default --attempts 2 > "$out/first.log" 2>&1
else
    python3 bench/trust_sitting.py run --out "$out/rows" --only flux > "$out/rows.log" 2>&1
    python3 -m pytest -m gpu tests/test_gpu.py -v -p no:cacheprovider > "$out/tests.log" 2>&1
fi
echo done >> "$out/rows.log"
