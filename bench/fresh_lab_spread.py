"""Does a fresh lab's headline interval hold its reruns, and stay narrow where they agree? Six settings x three fresh
processes on a fresh store, as a room clicks them through one lab process, each round after the one before, so later
runs learn from earlier ones as the lab does.

    python bench/fresh_lab_spread.py --out bench/results/fresh-lab-spread-h100.json      # 3 rounds of 6, ~6-7 min
    python bench/fresh_lab_spread.py --idle-s 240 --out R.json   # the lab calibrates itself while idle for 240 s first
    python bench/fresh_lab_spread.py --idle-s 360 --rounds 1 --store S.sqlite --out A.json     # over two calls:
    python bench/fresh_lab_spread.py --store S.sqlite --first-round 2 --rounds 2 --after A.json --out B.json
    python bench/fresh_lab_spread.py --device cpu --backend eager --rounds 1 --mix default resnet50   # a dry run

Each run is a fresh worker process with cold compile caches, submitted as a page submits it (tcore.lab.run.runs.start,
its own person), with the Run page's defaults for its model. With --idle-s the lab's idle-time calibration (tcore.lab.
calibrate.keep_calibrated) runs for that long before the first click, starting at once; anything of it still under
way is cancelled by the first click, as a person's run cancels it. Prints each run's headline and stated interval as it
ends, then per setting: the headlines, their half-range, the stated ± range, how many intervals hold the setting's
median, how many half-widths are within max(3%, 3x the half-range), how many are Noisy; and the three checks:
>= 90% of intervals hold their median; every half-width within its allowance; no setting whose reruns agree within
± 2% flagged Noisy. Writes --out (JSON: every run with its interval's words, the table, the checks) after each run.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

# The settings a mix names: a model and what differs from the Run page's GPU defaults for it. "launch" is host-bound
# (the GPU waits on the host's launches at batch 1), "vit" keeps the GPU busy.
SETTINGS = {
    "default": dict(model="captioner"),
    "resnet50": dict(model="resnet50"),
    "gpt2": dict(model="hf:gpt2", batch_size=8),
    "convnext": dict(model="timm:convnext_tiny"),
    "launch": dict(model="captioner", preset="tiny", batch_size=1),
    "vit": dict(model="torchvision:vit_b_16"),
}
DEFAULT_MIX = list(SETTINGS)
HOLD_SHARE = 0.90      # of intervals that must hold their setting's median
FLOOR_PCT = 3.0        # a half-width is allowed max(FLOOR_PCT, RANGE_FACTOR x the setting's half-range)
RANGE_FACTOR = 3.0
AGREE_PCT = 2.0        # a setting whose reruns agree within ± this must not be flagged Noisy


def experiment(name: str, device: str, backend: str):
    from tcore.experiment.device import practical_defaults
    from tcore.experiment.spec import Experiment

    setting = dict(SETTINGS[name])
    if device == "cpu":  # the CPU's tiny presets: only the model comes from the setting
        setting = {"model": setting["model"]}
    return Experiment(**{**practical_defaults(setting["model"], device, "inference"), "device": device, **setting,
                         "backend": backend})


def table(rows: list[dict]) -> tuple[list[dict], dict]:
    """Per setting, what its reruns read and how their intervals did; and the three checks over every run."""
    per, held, counted = [], 0, 0
    within_all, quiet_ok = True, True
    for name in dict.fromkeys(r["setting"] for r in rows):
        done = [r for r in rows if r["setting"] == name and r.get("speedup")]
        if not done:
            continue
        speedups = [r["speedup"] for r in done]
        median = statistics.median(speedups)
        half_range = 100 * (max(speedups) - min(speedups)) / 2 / median
        allowed = max(FLOOR_PCT, RANGE_FACTOR * half_range)
        holds = [r["low"] is not None and r["low"] <= median <= r["high"] for r in done]
        within = [r["pm_pct"] is not None and r["pm_pct"] <= allowed for r in done]
        noisy = sum(bool(r["noisy"]) for r in done)
        agree = half_range <= AGREE_PCT
        held, counted = held + sum(holds), counted + len(done)
        within_all &= all(within)
        quiet_ok &= not (agree and noisy)
        stated = [r["pm_pct"] for r in done if r["pm_pct"] is not None]
        per.append({"setting": name, "runs": len(done), "headlines": [round(s, 3) for s in speedups],
                    "median": median, "half_range_pct": half_range, "allowed_pct": allowed,
                    "stated_pm_pct": [min(stated), max(stated)] if stated else None,
                    "hold_median": sum(holds), "within_allowed": sum(within), "noisy": noisy,
                    "agree_within_2pct": agree})
    checks = {"hold_share": held / counted if counted else None, "hold_ok": bool(counted) and held >= HOLD_SHARE *
              counted, "within_allowed_ok": within_all, "no_noisy_where_reruns_agree": quiet_ok}
    return per, checks


def print_table(per: list[dict], checks: dict) -> None:
    print("| setting | headlines | half-range | stated | hold median | within allowed | Noisy |")
    print("|---|---|---|---|---|---|---|")
    for p in per:
        stated = "n/a" if p["stated_pm_pct"] is None else f"±{p['stated_pm_pct'][0]:.1f}-{p['stated_pm_pct'][1]:.1f}%"
        print(f"| {p['setting']} | {min(p['headlines']):.3f}-{max(p['headlines']):.3f}x | ±{p['half_range_pct']:.1f}% "
              f"| {stated} | {p['hold_median']}/{p['runs']} | {p['within_allowed']}/{p['runs']} (≤ "
              f"±{p['allowed_pct']:.1f}%) | {p['noisy']}/{p['runs']} |")
    share = checks["hold_share"]
    if share is None:
        print("no finished run of a setting yet")
        return
    print(f"hold their median: {share:.0%} (≥ {HOLD_SHARE:.0%}: {'met' if checks['hold_ok'] else 'NOT met'}); "
          f"every half-width within max({FLOOR_PCT:g}%, {RANGE_FACTOR:g}x half-range): "
          f"{'met' if checks['within_allowed_ok'] else 'NOT met'}; no Noisy where reruns agree within ±{AGREE_PCT:g}%: "
          f"{'met' if checks['no_noisy_where_reruns_agree'] else 'NOT met'}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--mix", nargs="+", choices=list(SETTINGS), default=DEFAULT_MIX)
    ap.add_argument("--rounds", type=int, default=3, help="fresh processes of each setting, one round after another")
    ap.add_argument("--idle-s", type=float, default=0.0,
                    help="seconds the lab calibrates itself before the first click")
    ap.add_argument("--timeout", type=float, default=400.0, help="each run's time limit, s")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="cpu: a dry run of this benchmark")
    ap.add_argument("--backend", default="inductor", help="another backend for a dry run (eager: no Inductor)")
    ap.add_argument("--out", type=Path, default=None, help="the result (JSON)")
    ap.add_argument("--store", type=Path, default=None,
                    help="the lab's store (default: a fresh one); an existing one goes on where an earlier call ended")
    ap.add_argument("--first-round", type=int, default=1, help="the number of the first round (with --store)")
    ap.add_argument("--after", type=Path, default=None,
                    help="an earlier call's --out on the same store: its runs count in this one's table and checks")
    args = ap.parse_args()
    os.environ.setdefault("COMPILE_LAB_CACHE_DIR", tempfile.mkdtemp(prefix="fresh-lab-cache-"))  # cold compiles
    from tcore.figures import follows_host, noise_reasons
    from tcore.lab import calibrate
    from tcore.lab.run import runs
    from tcore.store import RunStore

    store = RunStore(args.store or Path(tempfile.mkdtemp(prefix="fresh-lab-")) / "runs.sqlite")
    runs.serve(store)
    earlier = json.loads(args.after.read_text()) if args.after else {}
    rows: list[dict] = list(earlier.get("runs", []))
    calibration: list[dict] = list(earlier.get("calibration", []))
    if args.idle_s > 0:
        os.environ[calibrate.SELF_CALIBRATE_ENV] = "1"
        cal = calibrate.keep_calibrated(store, args.device, idle_s=0.0)
        began = time.time()
        while time.time() < began + args.idle_s and not cal.done():
            time.sleep(2.0)
        cal.idle_s = float("inf")  # no new reference; the first click cancels the one under way
        calibration = [{"label": r.label, "status": r.status, "speedup": (r.result or {}).get("speedup"),
                        "pm_pct": (r.result or {}).get("speedup_pm_pct"), "kind": (r.result or {}).get("speedup_kind"),
                        "compile_s": (r.result or {}).get("compile_s")}
                       for r in store.list() if r.owner == calibrate.OWNER]
        print(f"idle calibration: {sum(c['status'] == 'finished' for c in calibration)} reference runs finished in "
              f"{time.time() - began:.0f} s{' (done)' if cal.done() else ''}")
        for s in calibrate.standing(store, args.device):
            print(f"  {s.words}")

    def write() -> None:
        if args.out:
            per, checks = table(rows)
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps({"mix": args.mix, "rounds": args.rounds, "idle_s": args.idle_s,
                                            "calibration": calibration, "runs": rows, "table": per,
                                            "checks": checks}, indent=1))

    for round_no in range(args.first_round, args.first_round + args.rounds):
        live = [(name, runs.start(experiment(name, args.device, args.backend), store, owner=f"person-{i}",
                                  timeout_s=args.timeout)) for i, name in enumerate(args.mix)]
        for name, run in live:
            rec = run.wait(args.timeout + 120)
            r = rec.result or {}
            rows.append({"round": round_no, "setting": name, "label": rec.label, "status": rec.status,
                         "error": (rec.error or {}).get("message"), "speedup": r.get("speedup"),
                         "low": r.get("speedup_low"), "high": r.get("speedup_high"), "pm_pct": r.get("speedup_pm_pct"),
                         "noisy": bool(r and noise_reasons(r)), "noise": noise_reasons(r) if r else [],
                         "kind": r.get("speedup_kind"), "follows_host": follows_host(r, args.device),
                         "gpu_busy_pct": [r.get(f"{v}_gpu_busy_pct") for v in ("eager", "compiled")],
                         "host_speed": (r.get("host_speed") or {}),
                         "rounds_pm_pct": r.get("speedup_rounds_pm_pct"), "between_pct": r.get("speedup_between_pct"),
                         "between_source": r.get("speedup_between_source"), "paired_rounds": r.get("paired_rounds"),
                         "eager_samples_per_s": r.get("eager_samples_per_s"), "compile_s": r.get("compile_s"),
                         "words": r.get("speedup_interval_words"), "notes": r.get("notes")})
            x = rows[-1]
            said = (f"{x['speedup']:.3f}x, interval {x['low']:.3f}-{x['high']:.3f} (±{x['pm_pct']:.1f}%; rounds "
                    f"±{x['rounds_pm_pct'] or 0:.1f}%, between σ {x['between_pct']:.1f}% from {x['between_source']}, "
                    f"{x['kind']}){' Noisy' if x['noisy'] else ''}" if x["low"] is not None else
                    f"{x['speedup']:.3f}x, no interval" if x["speedup"] else f"{x['status']}: {x['error']}")
            print(f"round {round_no} {name:9s} {said}", flush=True)
            write()
    per, checks = table(rows)
    print_table(per, checks)
    write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
