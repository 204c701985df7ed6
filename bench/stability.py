"""Does the headline hold still? The default run, N times through the command line on one store, old and new headline.

    python bench/stability.py --runs 5 --out bench/results/default-run-stability-cpu.json
    python bench/stability.py --runs 5 --engine /tmp/before --out /tmp/default-run-stability-before-cpu.json
    python bench/stability.py --device cuda --runs 10 --out bench/results/default-run-stability-h200.json
    python bench/stability.py --device cuda --runs 3 -- --model resnet50 --preset full --batch-size 64 \
--precision bf16 --channels-last

Each run is what a newcomer gets by pressing Run (the captioner at the device's preset, cold compile
caches), started with `python -m tcore run` from `--engine` (this checkout by default; any version of the
engine that has the command line works, so before and after are one command each). For every run it
prints, recomputed here from the run's stored blocks (each round an eager and a compiled block, back to
back):
  - the old headline: compiled's median throughput over eager's, the rounds unpaired;
  - the paired headline: the median of the rounds' ratios, with its order-statistics interval (tcore.figures.paired);
  - whether the run flagged itself noisy by the old rule (a variant's rounds over 10% apart, slow steps,
    a busy machine) and by today's (tcore.figures.noise_reasons: the interval's width, slow steps, a busy machine);
then the spread of each headline across the runs: min-max, and the largest distance from their median.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from tcore import figures  # noqa: E402  (this checkout's estimator, whatever engine ran)
from tcore.figures import paired

# The Run page's timing defaults per device (ui/panels/knobs.py), for an engine with adaptive rounds and for one
# without.
TIMING_NEW = {"cpu": ["--timed-s", "2.0", "--rounds", "6", "--round-s", "0.2"],
              "cuda": ["--timed-s", "4.0", "--rounds", "6", "--round-s", "0.2"]}
TIMING_OLD = {"cpu": ["--timed-s", "2.0", "--rounds", "3"], "cuda": ["--timed-s", "4.0", "--rounds", "5"]}


def has_adaptive_rounds(engine: Path) -> bool:
    out = subprocess.run([sys.executable, "-m", "tcore", "run", "--help"], cwd=engine, capture_output=True, text=True,
                         check=True)
    return "--round-s" in out.stdout


def one_run(engine: Path, db: Path, command: list[str]) -> dict:
    out = subprocess.run([sys.executable, "-m", "tcore", "run", *command, "--db", str(db), "--json", "--quiet"],
                         cwd=engine, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"the run failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return json.loads(out.stdout)


def old_headline(blocks: dict) -> float:
    """Compiled's median block throughput over eager's: the headline before paired rounds."""
    rate = {v: statistics.median(steps / wall for steps, wall in b) for v, b in blocks.items()}
    return rate["compiled"] / rate["eager"]


def old_noisy(r: dict) -> bool:
    """The old Noisy rule: a variant's rounds >10% apart, slow steps >5% of the time, or >0.5 busy cores."""
    return any((r.get(f"{v}_spread_pct") or 0) > 10 or (r.get(f"{v}_slow_time_pct") or 0) > 5
               for v in ("eager", "compiled")) or (r.get("busy_cores") or 0) > 0.5


def band(values: list[float]) -> dict:
    mid = statistics.median(values)
    return {"median": mid, "min": min(values), "max": max(values),
            "within_pct": 100 * max(abs(v / mid - 1) for v in values)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--engine", type=Path, default=REPO, help="the checkout whose `python -m tcore` runs")
    parser.add_argument("--out", type=Path, default=None, help="write every run's figures here as JSON")
    parser.add_argument("extra", nargs="*", help="more options for `python -m tcore run` (after --)")
    args = parser.parse_args()
    adaptive = has_adaptive_rounds(args.engine)
    command = ["--model", "captioner", "--device", args.device, "--cache", "cold",
               *(TIMING_NEW if adaptive else TIMING_OLD)[args.device], *args.extra]
    db = Path(tempfile.mkdtemp(prefix="stability-")) / "runs.sqlite"
    print(f"engine {args.engine} ({'adaptive paired rounds' if adaptive else 'fixed rounds'}): "
          f"python -m tcore run {' '.join(command)}", flush=True)
    rows = []
    for i in range(args.runs):
        t0 = time.time()
        r = one_run(args.engine, db, command)["result"]
        est = paired.estimate(paired.round_ratios(r["blocks"]["eager"], r["blocks"]["compiled"]))
        today = figures.upgrade_result(dict(r))
        rows.append({"old_headline": old_headline(r["blocks"]), "paired": est.speedup, "low": est.low,
                     "high": est.high, "pm_pct": est.half_width_pct, "rounds": est.rounds,
                     "noisy_old_rule": old_noisy(r), "noisy_now": figures.noise_reasons(today),
                     "busy_cores": r.get("busy_cores"), "compile_s": r.get("compile_s"),
                     "timed_s": {v: round(sum(w for _, w in b), 2) for v, b in r["blocks"].items()},
                     "timed_stop": r.get("timed_stop_words"), "wall_s": round(time.time() - t0, 1)})
        row = rows[-1]
        interval = f"{row['low']:.2f}-{row['high']:.2f} (±{row['pm_pct']:.1f}%)" if row["low"] else "no interval"
        print(f"run {i + 1}: old {row['old_headline']:.2f}x | paired {row['paired']:.2f}x {interval}, "
              f"{row['rounds']} rounds | noisy old rule {'yes' if row['noisy_old_rule'] else 'no'}, now "
              f"{'yes' if row['noisy_now'] else 'no'} | busy {row['busy_cores'] or 0:.2f} cores | "
              f"timed {row['timed_s']} s | {row['wall_s']:.0f} s in all", flush=True)
    summary = {"old_headline": band([r["old_headline"] for r in rows]), "paired": band([r["paired"] for r in rows]),
               "noisy_old_rule": sum(r["noisy_old_rule"] for r in rows),
               "noisy_now": sum(bool(r["noisy_now"]) for r in rows), "runs": len(rows),
               "median_pm_pct": statistics.median(r["pm_pct"] or 0 for r in rows),
               "wall_s_median": statistics.median(r["wall_s"] for r in rows)}
    for name in ("old_headline", "paired"):
        b = summary[name]
        print(f"{name:12}: {b['min']:.2f}-{b['max']:.2f}x, median {b['median']:.2f}x, "
              f"all within ±{b['within_pct']:.1f}% of it")
    print(f"flagged noisy: {summary['noisy_old_rule']} of {len(rows)} by the old rule, {summary['noisy_now']} now; "
          f"median interval ±{summary['median_pm_pct']:.1f}%; median run {summary['wall_s_median']:.0f} s")
    if args.out:
        args.out.write_text(json.dumps({"command": command, "engine_adaptive": adaptive, "runs": rows,
                                        "summary": summary}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
