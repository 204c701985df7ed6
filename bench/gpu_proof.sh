#!/usr/bin/env bash
# Issue 31's GPU sitting on the final code, sized for what device time is left (about 20 min on one H100):
#   1. the GPU default (captioner small, now batch 256) ten times through the command line, each headline paired
#      and recomputed unpaired from the same blocks;
#   2. five Run-page runs of the default (AppTest, spares on: the first in an idle room, then busy);
#   3. the same run through a local Ray cluster and through local workers, alternating;
#   4. pytest -m gpu in full: the knob matrix on 4 xdist workers (compiles are CPU-bound and the runs tiny), then
#      the tests that time, sample power or start a second GPU process, one at a time on a quiet GPU.
# Wheels the GPU image lacks: .whl/ (streamlit, plotly, tlparse, diffusers, pytest-xdist) and .ray/, one call each.
#   bash bench/gpu_proof.sh install .whl ; bash bench/gpu_proof.sh install .ray
#   setsid bash bench/gpu_proof.sh run /tmp/proof > /dev/null 2>&1 < /dev/null &
#   bash bench/gpu_proof.sh collect /tmp/proof $OUT
# What the first sitting on the final code left (the next session's lease), in the same way:
#   setsid bash bench/gpu_proof.sh rest /tmp/rest .runs/before > /dev/null 2>&1 < /dev/null &
#     a. ResNet-50 and Flux medium at their defaults from the engine before paired rounds (DIR: `git archive e13fca1`)
#        and from this one, alternating new old old new, each run cold in a fresh process (issue 26);
#     b. click to result for ResNet-50 on the Run page, spares on, idle then busy (issue 26);
#     c. the GPU tests that time, one at a time (issue 31).
#   setsid bash bench/gpu_proof.sh more /tmp/more 4 > /dev/null 2>&1 < /dev/null &   # on a second lease:
#     the real models at published size (issues 27, 31), then the same run through Ray and local workers in more
#     pairs (issue 29).
#   bash bench/gpu_proof.sh tests /tmp/t "another_gpu_process or torch_trace" two   # some GPU tests again
#   bash bench/gpu_proof.sh ray /tmp/ray 4                                            # Ray pairs alone
#   setsid bash bench/gpu_proof.sh final /tmp/final 3 ...    # two GPU tests, bench/ray_env_diff.py, 3 Ray pairs
#   Each leaves more files than a call brings back: tar czf $OUT/rest.tgz -C /tmp rest
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 RAY_USAGE_STATS_ENABLED=0 PATH=/tmp/site/bin:$PATH  # tlparse
TIMING="warm_start or power_and_energy or another_gpu_process or breakdown_adds_up or physical_gpu or torch_trace"
machine_log() {  # OUT MODULE...: the GPU, the versions of the modules named, the commit, the cores, the time
    local out=$1; shift
    { nvidia-smi --query-gpu=name,driver_version,power.limit,memory.total --format=csv
      python3 -c "import importlib, sys
print(' '.join(f'{m} {importlib.import_module(m).__version__}' for m in sys.argv[1:]))" "$@"
      git log -1 --format='commit %H' 2>/dev/null; nproc; date -u; } > "$out/machine.log" 2>&1
}
case "$1" in
install)  # the same wheels into the same place as the first sittings' script
    exec bash bench/third_edition.sh install "$2" ;;
run)
    # In order of what the issues need most, so that a lease that ends early still leaves the first parts whole.
    out=$2; mkdir -p "$out"
    machine_log "$out" torch triton
    python3 bench/stability.py --device cuda --runs 10 --out "$out/stability-b256.json" > "$out/stability-b256.log" 2>&1
    scratch=$(mktemp -d)
    COMPILE_LAB_DB=$scratch/runs.sqlite COMPILE_LAB_CACHE_DIR=$scratch/cache COMPILE_LAB_SPARE_WORKERS=1 \
        python3 bench/first_result.py one --model default --attempts 5 --spares --out "$out/run-page.jsonl" \
        > "$out/run-page.log" 2>&1
    for i in $(seq 1 60); do [ -f /tmp/site/ray/__init__.py ] && break; sleep 5; done
    python3 bench/ray_sitting.py --out "$out/ray" --pairs 2 > "$out/ray.log" 2>&1
    python3 -m pytest -m gpu tests/test_gpu.py -q -p no:cacheprovider -n 4 -k "not ($TIMING)" --durations=0 \
        > "$out/pytest-gpu-matrix.log" 2>&1
    python3 -m pytest -m gpu tests/test_gpu.py -q -p no:cacheprovider -k "$TIMING" --durations=0 \
        > "$out/pytest-gpu-timing.log" 2>&1
    echo done >> "$out/machine.log" ;;
rest)
    out=$2; before=$3; mkdir -p "$out"
    machine_log "$out" torch triton
    resnet="--model resnet50 --preset full --batch-size 64 --precision bf16 --channels-last"
    flux="--model flux --preset medium --precision bf16"
    for model in resnet "flux"; do
        i=0
        for engine in . "$before" "$before" .; do
            i=$((i + 1)); name=$([ "$engine" = . ] && echo new || echo old)
            python3 bench/stability.py --device cuda --runs 1 --engine "$engine" --out "$out/engines-$model-$i-$name.json" \
                -- ${!model} > "$out/engines-$model-$i-$name.log" 2>&1
        done
    done
    scratch=$(mktemp -d)
    COMPILE_LAB_DB=$scratch/runs.sqlite COMPILE_LAB_CACHE_DIR=$scratch/cache COMPILE_LAB_SPARE_WORKERS=1 \
        python3 bench/first_result.py one --model resnet50 --attempts 2 --spares --out "$out/click-resnet50.jsonl" \
        > "$out/click-resnet50.log" 2>&1
    python3 -m pytest -m gpu tests/test_gpu.py -q -p no:cacheprovider -k "$TIMING" --durations=0 \
        > "$out/pytest-gpu-timing.log" 2>&1
    echo done >> "$out/machine.log" ;;
tests)  # tests named by -k, one at a time
    out=$2; mkdir -p "$out"
    python3 -m pytest -m gpu tests/test_gpu.py -q -p no:cacheprovider -k "$3" --durations=0 > "$out/pytest-gpu-$4.log" 2>&1
    echo done >> "$out/pytest-gpu-$4.log" ;;
final)  # after the Ray worker's niceness fix: two GPU tests on the final code, the env diff, then N Ray pairs
    out=$2; mkdir -p "$out"
    bash "$0" tests "$out" "power_and_energy or physical_gpu" final
    for i in $(seq 1 60); do [ -f /tmp/site/ray/__init__.py ] && break; sleep 5; done
    python3 bench/ray_env_diff.py > "$out/ray-env-diff.log" 2>&1
    bash "$0" ray "$out" "${3:-3}" ;;
ray)  # the same run through Ray and local workers, N pairs
    out=$2; mkdir -p "$out"
    for i in $(seq 1 60); do [ -f /tmp/site/ray/__init__.py ] && break; sleep 5; done
    python3 bench/ray_sitting.py --out "$out/ray" --pairs "${3:-4}" > "$out/ray.log" 2>&1
    echo done >> "$out/ray.log" ;;
more)
    out=$2; mkdir -p "$out"
    machine_log "$out" torch triton torchvision timm transformers diffusers
    python3 bench/real_models.py run --out "$out/real" > "$out/real.log" 2>&1
    for i in $(seq 1 60); do [ -f /tmp/site/ray/__init__.py ] && break; sleep 5; done
    python3 bench/ray_sitting.py --out "$out/ray" --pairs "${3:-4}" > "$out/ray.log" 2>&1
    echo done >> "$out/machine.log" ;;
collect)
    mkdir -p "$3"; cp "$2"/*.log "$2"/*.json "$2"/*.jsonl "$3"/ 2>/dev/null; cp "$2"/ray/*.json "$3"/ 2>/dev/null
    cp "$2"/real/*.jsonl "$3"/ 2>/dev/null
    tail -n 3 "$2"/*.log ;;
esac
