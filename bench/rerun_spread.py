"""How far the headline moves between fresh processes of one setting, and whether each run's stated interval holds the
median of them all.

    python bench/rerun_spread.py --setting captioner-cpu --runs 5
    python bench/rerun_spread.py --setting resnet50-gpu --runs 10
    python bench/rerun_spread.py --setting gpt2-gpu --runs 10
    python bench/rerun_spread.py --setting captioner-gpu --runs 10

Each run is `python -m tcore run` in a fresh process (cold compile caches), one after another, as a person pressing
Run again would get it. All runs share one store (a new one unless --db names one), so from the fourth run on the
interval learns the spread between processes from the runs before it, as it does in the lab; --store-each gives every
run a store of its own, so every interval rests on the default spread. Prints one line per run and a summary: the
headlines' spread, how many lie within ± 5% of their median, and how many stated intervals (the headline's, for a
rerun) and how many of the rounds' own intervals contain that median. Writes
bench/results/rerun-spread-<setting>-<machine>.json (or --out).
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from tcore.figures import paired  # noqa: E402

# The settings the lab's defaults name: the model and device; everything else is the command line's default for them
# (tcore.experiment.device.practical_defaults: on a GPU ResNet-50 full bs64 bf16 channels_last, the captioner small
# bs256 bf16, hf:gpt2 at its GPU default; on the CPU the tiny presets in fp32).
SETTINGS = {
    "captioner-cpu": ["--model", "captioner", "--device", "cpu"],
    "captioner-gpu": ["--model", "captioner", "--device", "cuda"],
    "resnet50-gpu": ["--model", "resnet50", "--device", "cuda"],
    "gpt2-gpu": ["--model", "hf:gpt2", "--device", "cuda"],
}
HOLD_PCT = 5.0  # a headline within ± this of the median of all runs holds still


def machine_name(record: dict) -> str:
    """'h100', 'h200' or '2-core-cpu', from the run's environment."""
    gpu = record.get("env", {}).get("gpu")
    if not gpu:
        return f"{record.get('env', {}).get('cpu_count', 'n')}-core-cpu"
    found = re.search(r"\b([A-Z]\d{2,4}[A-Z]?)\b", gpu)
    return (found.group(1) if found else re.sub(r"\W+", "-", gpu)).lower()


def one_run(db: Path, command: list[str], timeout_s: float) -> dict:
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "tcore", "run", *command, "--db", str(db), "--json", "--quiet",
                          "--timeout", str(timeout_s)], cwd=REPO, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"run failed ({out.returncode}):\n{out.stderr[-3000:]}\n{out.stdout[-2000:]}")
    record = json.loads(out.stdout)
    record["wall_s"] = time.perf_counter() - started
    return record


def row(record: dict) -> dict:
    """What the summary needs of one run."""
    r = record["result"]
    rounds = paired.from_record(r)
    return {"run_id": record["id"], "speedup": r["speedup"], "low": r["speedup_low"], "high": r["speedup_high"],
            "pm_pct": r["speedup_pm_pct"], "rounds_low": rounds.low if rounds else None,
            "rounds_high": rounds.high if rounds else None, "rounds_pm_pct": r.get("speedup_rounds_pm_pct"),
            "drift_pct": r.get("speedup_drift_pct"), "between_pct": r.get("speedup_between_pct"),
            "between_source": r.get("speedup_between_source"), "history_runs": r.get("speedup_history_runs"),
            "paired_rounds": r.get("paired_rounds"), "eager_samples_per_s": r.get("eager_samples_per_s"),
            "compiled_samples_per_s": r.get("compiled_samples_per_s"),
            "eager_gpu_busy_pct": r.get("eager_gpu_busy_pct"),
            "compiled_gpu_busy_pct": r.get("compiled_gpu_busy_pct"),
            "eager_gpu_time_samples_per_s": r.get("eager_gpu_time_samples_per_s"), "busy_cores": r.get("busy_cores"),
            "pinned_cpu": r.get("pinned_cpu"), "compile_s": r.get("compile_s"), "wall_s": round(record["wall_s"], 1)}


def summary(rows: list[dict]) -> dict:
    """The spread of the headlines and how many intervals contain their median."""
    speedups = [r["speedup"] for r in rows]
    median = statistics.median(speedups)
    inside = [r["low"] is not None and r["low"] <= median <= r["high"] for r in rows]
    rounds_inside = [r["rounds_low"] is not None and r["rounds_low"] <= median <= r["rounds_high"] for r in rows]
    return {"runs": len(rows), "median": median, "min": min(speedups), "max": max(speedups),
            "spread_pct": 100 * (max(speedups) - min(speedups)) / median,
            "within_hold_pct": sum(abs(s / median - 1) * 100 <= HOLD_PCT for s in speedups), "hold_pct": HOLD_PCT,
            "intervals_containing_median": sum(inside), "rounds_intervals_containing_median": sum(rounds_inside),
            "median_pm_pct": statistics.median(r["pm_pct"] for r in rows)}


def write(out: Path, args: argparse.Namespace, command: list[str], machine: str, rows: list[dict]) -> dict:
    """The result file as it stands after the runs so far; returns their summary."""
    found = summary(rows)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"setting": args.setting, "command": ["python", "-m", "tcore", "run", *command],
                               "machine": machine, "shared_store": not args.store_each, "date": time.strftime(
                                   "%Y-%m-%d %H:%M UTC", time.gmtime()), "summary": found, "runs": rows}, indent=2))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--setting", choices=list(SETTINGS), default="captioner-cpu",
                        help="which setting to rerun (default: captioner-cpu, the lab's default on a CPU)")
    parser.add_argument("--runs", type=int, default=5, help="fresh processes, one after another (default 5)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds one run may take (default 900)")
    parser.add_argument("--db", type=Path, default=None, help="the store the runs share (default: a new one)")
    parser.add_argument("--store-each", action="store_true",
                        help="a new store for every run: no history, every interval on the default spread")
    parser.add_argument("--out", type=Path, default=None,
                        help="result file (default: bench/results/rerun-spread-<setting>-<machine>.json)")
    parser.add_argument("extra", nargs=argparse.REMAINDER,
                        help="after --, more options for `python -m tcore run` (e.g. -- --timed-s 2)")
    args = parser.parse_args()
    extra = [a for a in args.extra if a != "--"]
    command = SETTINGS[args.setting] + extra
    tmp = tempfile.TemporaryDirectory(prefix="rerun-spread-")
    rows, machine = [], None
    for i in range(args.runs):
        db = Path(tmp.name) / (f"runs-{i}.sqlite" if args.store_each else "runs.sqlite") if args.db is None else args.db
        record = one_run(db, command, args.timeout)
        machine = machine or machine_name(record)
        rows.append(row(record))
        r = rows[-1]
        print(f"run {i + 1}/{args.runs}: {r['speedup']:.3f}x, interval {r['low']:.3f}-{r['high']:.3f} "
              f"(± {r['pm_pct']:.1f}%; rounds ± {r['rounds_pm_pct'] or 0:.1f}%, drift {r['drift_pct'] or 0:.1f}%, "
              f"between σ {r['between_pct']:.1f}% from {r['between_source']}), eager {r['eager_samples_per_s']:.0f} "
              f"compiled {r['compiled_samples_per_s']:.0f} samples/s, {r['wall_s']:.0f} s", flush=True)
        # Written after every run, so a sitting cut short (a lent machine's call ends at 10 minutes) keeps the runs
        # that finished.
        out = args.out or REPO / "bench" / "results" / f"rerun-spread-{args.setting}-{machine}.json"
        found = write(out, args, command, machine, rows)
    print(f"{args.setting} on {machine}: {found['runs']} runs, median {found['median']:.3f}x, "
          f"{found['min']:.3f}-{found['max']:.3f}x (spread {found['spread_pct']:.1f}%), "
          f"{found['within_hold_pct']}/{found['runs']} within ± {HOLD_PCT:g}% of the median; stated intervals "
          f"containing the median: {found['intervals_containing_median']}/{found['runs']} (median ± "
          f"{found['median_pm_pct']:.1f}%); the rounds' own intervals: "
          f"{found['rounds_intervals_containing_median']}/{found['runs']}\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
