"""A room's runs restated under the lab's rules of today, from the timed blocks each row of its result carries.

    python bench/restate_room.py bench/results/rerun-room-settled-h100.json            # the spread each run used
    python bench/restate_room.py R.json --between learned      # the spread learned again from the room's own runs

Each run's headline and interval again, in the order the runs finished, from its rounds as
tcore.figures.paired.undisturbed takes them (those the host disturbed left out, or the interval stretched to the
fastest blocks' ratio). The spread between processes each interval adds is, by default, the one the lab stated for
that run (learned from the store then: the calibration's runs, whose blocks stayed in the store, and the room's), so
the two tables differ by the rounds alone. --between learned learns it again from the room's earlier runs, restated:
without the calibration the earliest runs of each setting lean on the documented default, which only widens them.
Prints the sure-figures table (bench/room.py's reruns()) as stated then and as restated, on the same blocks.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.room import reruns  # noqa: E402
from tcore.analysis.history import machine_spread  # noqa: E402
from tcore.figures import paired, rerun  # noqa: E402


class _Stated:
    """The spread between processes a run's interval used, as a learned machine spread that its history cannot move."""

    def __init__(self, pct: float):
        self.sigma_log = self.scatter = math.log1p(pct / 100)
        self.within_log, self.dof, self.runs, self.settings = 0.0, 10 ** 6, 0, 0


def restate(rows: list[dict], between: str = "stated") -> list[dict]:
    """The round rows with speedup, low, high, pm_pct and noisy as the lab's rules of today state them."""
    env = {"gpu_name": "the room's GPU"}
    done: list[dict] = []
    for row in rows:
        blocks = row.get("blocks") or {}
        if row["part"] != "round" or not row.get("speedup") or not blocks.get("eager") or not blocks.get("compiled"):
            done.append(dict(row))
            continue
        kind, bound = row.get("kind") or "cuda", row.get("kind") == "cuda-host-bound"
        mine = [r for r in done if r["setting"] == row["setting"] and r.get("speedup")]
        others = [({"model": r["setting"]}, env, r["speedup"], r.get("kind"), r.get("within_pct"))
                  for r in done if r.get("speedup") and r["setting"] != row["setting"]]
        rounds = paired.undisturbed(blocks["eager"], blocks["compiled"])
        if between == "stated":
            r = rerun.interval(rounds.ratios, device="cuda", host_bound=bound, machine=_Stated(row["between_pct"]),
                               left_out=rounds.left_out, floor=rounds.floor)
        else:
            spread = machine_spread(others, env, "cuda", kind)
            r = rerun.interval(rounds.ratios, device="cuda", host_bound=bound, history=[x["speedup"] for x in mine],
                               machine=spread, history_within=[rerun.within_sigma(x.get("within_pct")) for x in mine],
                               left_out=rounds.left_out, floor=rounds.floor)
        done.append({**row, "speedup": r.speedup, "low": r.low, "high": r.high, "pm_pct": r.pm_pct,
                     "noisy": r.pm_pct > paired.WIDE_PCT, "within_pct": r.within_pct, "left_out": rounds.left_out,
                     "floor": rounds.floor, "between_pct": r.between_pct, "between_source": r.between_source})
    return done


def table(rows: list[dict]) -> str:
    out = []
    for name, t in reruns(rows).items():
        out.append(f"  {name:15s} {t['runs']} runs {min(t['headlines']):.3f}-{max(t['headlines']):.3f}x (±"
                   f"{t['half_range_pct']:.1f}%), stated ±{min(x for x in t['stated_pm_pct'] if x):.1f}-"
                   f"{max(x for x in t['stated_pm_pct'] if x):.1f}%, hold {t['hold_median']}/{t['runs']}, within "
                   f"allowed (±{t['allowed_pm_pct']:.1f}%) {t['within_allowed']}/{t['runs']}, Noisy {t['noisy']}")
    total = {k: sum(t[k] for t in reruns(rows).values()) for k in ("runs", "hold_median", "within_allowed")}
    quiet = sum(t["noisy"] == 0 for t in reruns(rows).values())
    share = 100 * total["hold_median"] / max(total["runs"], 1)
    out.append(f"  all: {total['hold_median']}/{total['runs']} hold the median ({share:.0f}%), "
               f"{total['within_allowed']} within allowed, {quiet} of {len(reruns(rows))} settings not Noisy")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("result", type=Path, help="a bench/room.py result whose rows carry their blocks")
    ap.add_argument("--between", choices=["stated", "learned"], default="stated",
                    help="the spread between processes: each run's as stated, or learned again from the room's runs")
    ap.add_argument("--out", type=Path, default=None, help="the restated rows and both tables (JSON)")
    args = ap.parse_args()
    rows = [r for r in json.loads(args.result.read_text())["rows"] if r["part"] == "round"]
    again = restate(rows, args.between)
    print("as stated:\n" + table(rows) + f"\nrestated (undisturbed rounds, the spread between processes "
          f"{'as each run stated it' if args.between == 'stated' else 'learned from the room'}):\n" + table(again))
    for before, after in zip(rows, again):
        if after.get("left_out") or after.get("floor"):
            print(f"  {after['setting']:15s} {before['speedup']:.3f}x ±{before['pm_pct']:.1f}% -> "
                  f"{after['speedup']:.3f}x ±{after['pm_pct']:.1f}% ({after['left_out']} of "
                  f"{len(after['blocks']['eager'])} rounds left out"
                  + (f", reaching {after['floor']:.3f}x" if after.get("floor") else "") + ")")
    if args.out:
        args.out.write_text(json.dumps({"stated": reruns(rows), "restated": reruns(again),
                                        "rows": [{k: v for k, v in r.items() if k not in ("blocks", "phases")}
                                                 for r in again]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
