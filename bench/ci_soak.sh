#!/usr/bin/env bash
# Is CI green every time on a fresh clone, quiet or loaded? Clones a branch afresh for each run, runs CI's own
# command in it (`CI=true bash .ci/run`), some runs beside Python spin loops in other processes (every core kept busy),
# and appends one line per run (pass/fail, minutes, quiet/loaded) to a result file named after the machine.
set -euo pipefail

HERE="$(cd "$(dirname "$0")/.." && pwd)"
usage() {
    cat <<EOF
Usage: bash bench/ci_soak.sh [options]

Clones BRANCH of REPO into a fresh temporary folder for every run and runs CI's command there
(CI=true bash .ci/run), RUNS times in a row. The runs named by --loaded run beside SPIN plain Python
spin loops in other processes for the whole run (other users of the machine, say).
One line per run goes to stdout and is appended to the result file; the clone's output goes to a
log beside it. Exits 1 if any run failed. Each line also says the machine's pace just before its run,
on idle cores: the seconds a fixed single-core Python loop took (a virtual machine's pace drifts
by a third over a day, and the suite's minutes with it). Before each run the default Inductor cache
(TMPDIR/torchinductor_USER) is removed, as a fresh machine has none. Stopping the script (SIGTERM, Ctrl-C) stops
the run in progress, every process it started, and the spin loops.

Options:
  --repo PATH|URL    the repository to clone (default: the one this script lives in, $HERE)
  --branch NAME      the branch to clone (default: main)
  --runs N           how many runs (default: 5)
  --loaded LIST      which runs, 1-based and comma-separated, run beside the spin loops (default: 2,4)
  --spin N           how many spin loops a loaded run has beside it (default: 1; two per core, \$(( 2 * \$(nproc) )),
                     keeps every core busy whatever the suite does)
  --venv PATH        reuse this virtual environment: it is symlinked as the clone's .venv, so make
                     test does not reinstall several GB per run (default: REPO/.venv when REPO is a
                     folder that has one; "none" installs afresh in every clone, as a new user would).
                     The clone's requirements files are dated back so that make sees the venv as
                     up to date: it must already hold what the branch's requirements ask for.
  --command CMD      run CMD in each clone instead of CI's (check the script itself with a tiny one)
  --dry-run          the same as --command "true": clone, link the venv, time, record; no tests
  --out FILE         the result file (default: bench/results/ci-soak-cpu-<N>core.txt, N this machine's cores)
  -h, --help         this text

Examples:
  bash bench/ci_soak.sh                                  # the proof: 5 runs, the 2nd and 4th loaded
  bash bench/ci_soak.sh --runs 6 --loaded 1,3,5 --spin 4  # three loaded (two loops per core here), three quiet
  bash bench/ci_soak.sh --runs 2 --loaded 2 --dry-run    # checks the script in seconds
EOF
}

REPO="$HERE"
BRANCH=main
RUNS=5
LOADED=2,4
SPIN=1
VENV=""
COMMAND="CI=true bash .ci/run"
OUT=""
while [ $# -gt 0 ]; do
    case "$1" in
        --repo) REPO="$2"; shift 2 ;;
        --branch) BRANCH="$2"; shift 2 ;;
        --runs) RUNS="$2"; shift 2 ;;
        --loaded) LOADED="$2"; shift 2 ;;
        --spin) SPIN="$2"; shift 2 ;;
        --venv) VENV="$2"; shift 2 ;;
        --command) COMMAND="$2"; shift 2 ;;
        --dry-run) COMMAND="true"; shift ;;
        --out) OUT="$2"; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "unknown option: $1 (see --help)" >&2; exit 2 ;;
    esac
done
if [ -z "$VENV" ] && [ -d "$REPO/.venv" ]; then VENV="$REPO/.venv"; fi
[ "$VENV" = none ] && VENV=""
if [ -n "$VENV" ] && [ ! -x "$VENV/bin/python" ]; then echo "no virtual environment at $VENV" >&2; exit 2; fi
OUT="${OUT:-$HERE/bench/results/ci-soak-cpu-$(nproc)core.txt}"
mkdir -p "$(dirname "$OUT")"
LOG="${OUT%.txt}.log"

spinners=""
stop_spinners() {
    for pid in $spinners; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
    spinners=""
}
work=""
running=""  # the clone's command, in a session (process group) of its own
stop_run() {
    if [ -n "$running" ]; then kill -TERM -- "-$running" 2>/dev/null || true; sleep 5
        kill -KILL -- "-$running" 2>/dev/null || true; fi
    running=""
}
trap 'stop_run; stop_spinners; [ -n "$work" ] && rm -rf "$work"' EXIT
trap 'echo "stopped by hand: $(date -u +%H:%M:%S)" >> "$LOG"; exit 130' INT TERM

# The machine's pace: seconds for a fixed single-core loop, read while no run is going (lower is faster)
pace() {
    python3 -c 'import time; t = time.perf_counter(); sum(i * i for i in range(10_000_000)); print(f"{time.perf_counter() - t:.2f}")'
}

echo "# $(date -u '+%Y-%m-%d %H:%M UTC') $(hostname), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo);" \
     "$BRANCH of $REPO; command: $COMMAND; venv: ${VENV:-installed in each clone}" | tee -a "$OUT"
failed=0
for i in $(seq 1 "$RUNS"); do
    # A fresh machine has no Inductor cache in its temporary folder: what an earlier run (or anything else here)
    # compiled into the default one would make a test that does not choose its own cache folder warm, and its run
    # shorter than on a machine that CI starts afresh.
    rm -rf "${TMPDIR:-/tmp}/torchinductor_$(id -un)"
    work="$(mktemp -d -t ci-soak.XXXXXX)"
    git clone --quiet --branch "$BRANCH" "$REPO" "$work/repo"
    commit="$(git -C "$work/repo" rev-parse --short HEAD)"
    if [ -n "$VENV" ]; then
        ln -s "$VENV" "$work/repo/.venv"
        touch -d '2000-01-01' "$work"/repo/requirements*.txt  # older than the venv's markers: make installs nothing
    fi
    loop_s="$(pace)"
    load=quiet
    if [[ ",$LOADED," == *",$i,"* ]]; then
        load="loaded ($SPIN spin loop$([ "$SPIN" = 1 ] || echo s) on $(nproc) cores)"
        for _ in $(seq 1 "$SPIN"); do
            python3 -c 'while True: pass' &
            spinners="$spinners $!"
        done
    fi
    echo "=== run $i of $RUNS, $commit, $load: $(date -u '+%H:%M:%S')" >> "$LOG"
    start=$(date +%s)
    cpu_before="$(head -1 /proc/stat)"
    # a line a minute in the log: the cores' busy share over that minute, to see which part of the run left them idle
    (prev="$cpu_before"; while sleep 60; do now="$(head -1 /proc/stat)"
        printf '%s\n%s\n' "$prev" "$now" | awk -v t="$(date -u +%H:%M)" '{idle[NR] = $5 + $6; total[NR] = 0;
            for (i = 2; i <= NF; i++) total[NR] += $i}
            END {printf "cpu %s %.0f%% busy\n", t, 100 * (1 - (idle[2] - idle[1]) / (total[2] - total[1]))}'
        prev="$now"; done) > "$work/cpu" &
    sampler=$!
    (cd "$work/repo" && exec setsid bash -c "$COMMAND") > "$work/output" 2>&1 &
    running=$!
    if wait "$running"; then verdict=pass; else verdict=FAIL; failed=1; fi
    running=""
    seconds=$(( $(date +%s) - start ))
    kill "$sampler" 2>/dev/null || true
    wait "$sampler" 2>/dev/null || true
    # how busy the machine's cores were over the run (all processes, spin loops included): where a quiet run's cores
    # idle, more test workers would finish sooner; where they are busy, only less work would
    busy="$(printf '%s\n%s\n' "$cpu_before" "$(head -1 /proc/stat)" | awk '{idle[NR] = $5 + $6; total[NR] = 0;
        for (i = 2; i <= NF; i++) total[NR] += $i} END {printf "%.0f", 100 * (1 - (idle[2] - idle[1]) / (total[2] - total[1]))}')"
    stop_spinners
    cat "$work/output" "$work/cpu" >> "$LOG"
    # pytest's closing lines, one per part of make test: "=== 480 passed, 27 skipped in 370.1s ==="
    parts="$(grep -E '^(=+ )?[0-9]+ (passed|failed|errors?|skipped|deselected).* in [0-9.]+s' "$work/output" | tr -d '=' \
             | sed 's/^ *//; s/ *$//' | paste -sd ';' - || true)"
    printf '%s  run %d/%d  %s  %s  %d:%02d min  %s, cores %s%% busy, pace loop %s s%s\n' "$(date -u '+%Y-%m-%d %H:%M')" \
        "$i" "$RUNS" "$commit" "$verdict" $((seconds / 60)) $((seconds % 60)) "$load" "$busy" "$loop_s" \
        "${parts:+  ($parts)}" | tee -a "$OUT"
    rm -rf "$work"
    work=""
done
exit "$failed"
