"""The quiet-machine check: the Run page's default run, repeated, to see how far apart its speedups land.

    python bench/repeat_default.py --runs 5 --out bench/results/repeat-default-cpu.json
    python bench/repeat_default.py --device cuda --runs 3      # on a GPU machine

Runs what a newcomer gets by pressing Run without touching a knob (the captioner at its preset for
the device; on the CPU 2 s timed per variant in 3 rounds, on a GPU 4 s in 5; cold compile caches), one after another,
each through the engine's command line in a fresh process. Run it with nothing else running. Prints
each run's speedup, its rounds' range, and how long its timed blocks lasted against what was asked.
Works on any version of the engine that has the command line, so a before/after is one command each.
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
# The Run page's timing defaults per device (ui/panels/knobs.py): (timed seconds per variant, rounds).
TIMING = {"cpu": (2.0, 3), "cuda": (4.0, 5)}


def default_run(device: str) -> list[str]:
    timed_s, rounds = TIMING[device]
    return ["--model", "captioner", "--device", device, "--timed-s", str(timed_s), "--rounds", str(rounds),
            "--cache", "cold"]


def one_run(db: Path, command: list[str]) -> dict:
    out = subprocess.run([sys.executable, "-m", "tcore", "run", *command, "--db", str(db), "--json",
                          "--quiet"], cwd=REPO, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def blocks_s(result: dict) -> list[float]:
    """Every timed block's duration, where the record has them (older engines kept only the median)."""
    if result.get("blocks"):
        return [wall for blocks in result["blocks"].values() for _, wall in blocks]
    return [result[k] for k in ("eager_block_s", "compiled_block_s") if result.get(k) is not None]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--device", choices=list(TIMING), default="cpu")
    parser.add_argument("--out", type=Path, default=None, help="write the figures here as JSON")
    parser.add_argument("extra", nargs="*", help="more options for `python -m tcore run` (after --)")
    args = parser.parse_args()
    db = Path(tempfile.mkdtemp(prefix="repeat-default-")) / "runs.sqlite"
    timed_s, rounds = TIMING[args.device]
    asked_s, command = timed_s / rounds, default_run(args.device) + args.extra
    rows = []
    for i in range(args.runs):
        t0 = time.time()
        record = one_run(db, command)
        r = record["result"]
        walls = blocks_s(r)
        rows.append({"speedup": r.get("speedup"), "speedup_min": r.get("speedup_min"),
                     "speedup_max": r.get("speedup_max"), "compile_s": r.get("compile_s"),
                     "blocks_s": [round(w, 3) for w in walls], "busy_cores": r.get("busy_cores"),
                     "noisy": r.get("eager_spread_pct") is not None and max(
                         r.get(f"{v}_spread_pct") or 0 for v in ("eager", "compiled")) > 10,
                     "notes": r.get("notes"), "energy_j_per_step": [r.get(f"{v}_energy_j_per_step")
                                                                    for v in ("eager", "compiled")],
                     "wall_s": round(time.time() - t0, 1)})
        row = rows[-1]
        spread = (f" rounds {row['speedup_min']:.2f}-{row['speedup_max']:.2f}x" if row["speedup_min"] else "")
        print(f"run {i + 1}: speedup {row['speedup']:.2f}x{spread}, compile {row['compile_s']:.1f} s, "
              f"blocks {min(walls):.3f}-{max(walls):.3f} s (asked {asked_s:.3f} s), {row['wall_s']:.0f} s in all",
              flush=True)
    speedups = [r["speedup"] for r in rows]
    all_blocks = [w for r in rows for w in r["blocks_s"]]
    summary = {"speedup_median": statistics.median(speedups), "speedup_min": min(speedups),
               "speedup_max": max(speedups), "block_s_min": min(all_blocks), "block_s_max": max(all_blocks),
               "block_asked_s": asked_s,
               "blocks_within_25pct": sum(abs(w / asked_s - 1) <= 0.25 for w in all_blocks) / len(all_blocks)}
    print(json.dumps(summary, indent=2))
    if args.out:
        args.out.write_text(json.dumps({"command": command, "runs": rows, "summary": summary},
                                       indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
