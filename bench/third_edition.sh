#!/usr/bin/env bash
# Third edition's GPU sitting (one lease): real models at their published sizes, the same run through Ray and
# through local workers, and click to result on the Run page. Wheels the GPU image lacks come in .whl/ (streamlit,
# plotly, tlparse, diffusers) and .ray/ (ray without its Java jar), each in its own call (one transfer is 64 MiB).
#   bash bench/third_edition.sh install .whl           # once per machine, into /tmp/site
#   setsid bash bench/third_edition.sh run /tmp/third > /dev/null 2>&1 < /dev/null &
#   bash bench/third_edition.sh collect /tmp/third $OUT
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 RAY_USAGE_STATS_ENABLED=0
case "$1" in
install)  # into a folder of its own, then merged: pip --target --upgrade replaces /tmp/site/bin whole, which lost
          # the first call's tlparse when the second installed Ray
    fresh=$(mktemp -d)
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$fresh" "$2"/*.whl &&
        mkdir -p /tmp/site && cp -a "$fresh"/. /tmp/site/ ;;
run)
    out=$2; mkdir -p "$out"
    { nvidia-smi --query-gpu=name,driver_version,power.limit,memory.total --format=csv
      python3 -c "import torch, triton, torchvision, timm, transformers, diffusers; print('torch', torch.__version__, 'triton', triton.__version__, 'torchvision', torchvision.__version__, 'timm', timm.__version__, 'transformers', transformers.__version__, 'diffusers', diffusers.__version__)"
      git log -1 --format='commit %H' 2>/dev/null; nproc; } > "$out/machine.log" 2>&1
    python3 bench/real_models.py run --out "$out/real" > "$out/real.log" 2>&1
    for i in $(seq 1 60); do [ -f /tmp/site/ray/__init__.py ] && break; sleep 5; done
    python3 bench/ray_sitting.py --out "$out/ray" --pairs 2 > "$out/ray.log" 2>&1
    python3 bench/first_result.py run --out "$out/first" --models default --attempts 2 > "$out/first.log" 2>&1
    echo done >> "$out/machine.log" ;;
collect)
    mkdir -p "$3"; cp "$2"/*.log "$3"/ 2>/dev/null; cp "$2"/real/*.jsonl "$2"/ray/*.json "$2"/first/*.jsonl "$3"/ 2>/dev/null
    tail -n 3 "$2"/*.log ;;
esac
