"""A room on one machine: N people click Run at once; how long the round takes, and whether the room moved a figure.

    python bench/room.py --parts solo round --runs 20 --out bench/results/room-h100.json
    python bench/room.py --parts round --runs 8 --engine /path/to/older/checkout --out R.json   # before, same sitting
    python bench/room.py --parts pair --out R.json       # two clicks at once: the second's result over its compile
    python bench/room.py --parts round --solo-from S.json --out R.json   # against the solo runs of an earlier call
    python bench/room.py --parts round --runs 30 --mix default resnet50 gpt2 bert-train llama-generate convnext
    python bench/room.py --parts round --runs 18 --mix ... --db S --rounds-from A.json --out B.json  # a second call
    python bench/room.py --parts round --runs 20 --processes --solo-from A.json --out C.json  # 20 command lines

Each part runs in a lab process of its own, as the app's server is one (tcore.lab.run.runs.serve: its queue, its spare
workers), on a fresh store and fresh compile caches, so every compile is cold. A run is submitted as a page submits
it (tcore.lab.run.runs.start under its own person's id), with the Run page's defaults for its model on the GPU.
    solo    each setting of the mix alone, one after another, each click once the spare worker is ready
    round   --runs runs at once, the mix repeated in turn (as a room clicks within a second)
    pair    two clicks of hf:gpt2 at once, spares ready
Per run it reports click to result (the speedup shown: the headline, before the profiling pass, where the engine
sends one), click to saved, the compile time, the headline and its interval, and eager throughput; per round, the wall
time from the first click to the last result. With solo and round in one call, each room run is compared with its
setting's solo run: headline inside the solo interval, eager throughput within 5%, interval no more than 1.5x wider.
--engine drives another checkout (the code before a change) under this same driver, in the same sitting.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ENGINE_ENV = "ROOM_BENCH_ENGINE"  # the checkout a part's lab process imports (this one by default)

# The settings a mix names: a model and what differs from the Run page's GPU defaults for it.
SETTINGS = {
    "default": dict(model="captioner"),
    "resnet50": dict(model="resnet50"),
    "gpt2": dict(model="hf:gpt2", batch_size=8),
    "bert-train": dict(model="hf:bert", task="training"),
    "llama-generate": dict(model="hf:llama", preset="3.2-1b", task="generate", mode="reduce-overhead"),
    "convnext": dict(model="timm:convnext_tiny"),
    "vit": dict(model="torchvision:vit_b_16"),
}
DEFAULT_MIX = ["default", "resnet50", "gpt2", "convnext", "vit"]
HOLD_PCT, WIDTH_RATIO = 5.0, 1.5  # the room's targets against solo: eager within 5%, an interval at most 1.5x as wide


def experiment(name: str, device: str = "cuda", backend: str = "inductor"):
    """The setting as the Run page gives it on `device`: the page's defaults there, what the setting changes, and
    (for a dry run of this benchmark on a CPU) another backend."""
    from tcore.experiment.device import practical_defaults
    from tcore.experiment.spec import Experiment

    setting = dict(SETTINGS[name])
    task = setting.get("task", "inference")
    if device == "cpu":  # the CPU's tiny presets: only the model and the task come from the setting
        setting = {k: v for k, v in setting.items() if k in ("model", "task")}
    return Experiment(**{**practical_defaults(setting["model"], device, task), "device": device, **setting,
                         "backend": backend})


def wait_for_spares(timeout_s: float = 120.0) -> None:
    """Until the spare workers of the lab process's slots have done their imports (a room that has been open)."""
    from tcore.lab.queue import spares

    deadline = time.time() + timeout_s
    while time.time() < deadline:
        kept = getattr(spares.SPARES, "_spares", {})
        workers = [w for v in kept.values() for w in (v if isinstance(v, list) else [v])]
        if workers and all(w.ready for w in workers):
            return
        time.sleep(0.25)


# One click from a command line of its own: a lab process that queues one run on the shared store, says its id, and
# waits for it (and for any run it took over from a process that ended), as `python -m tcore run` does.
CLICK = """
import sys
from tcore.experiment.spec import Experiment
from tcore.lab.run import runs
from tcore.store import RunStore
live = runs.start(Experiment.from_json(sys.argv[2]), RunStore(sys.argv[1]), owner=sys.argv[3],
                  timeout_s=float(sys.argv[4]))
print(live.run_id, flush=True)
live.wait()
runs.run_adopted()
"""


def run_part(part: str, names: list[str], n: int, timeout_s: float, device: str, backend: str,
             db: str | None, processes: bool = False) -> list[dict]:
    """In a lab process: submit the part's runs as pages do and wait for them; one row per run. processes: the round's
    runs each from a command line of its own on the same store (this process runs no queue then)."""
    from tcore.lab.policy import memory
    from tcore.lab.run import runs
    from tcore.store import RunStore

    store = RunStore(db or Path(tempfile.mkdtemp(prefix="room-")) / "runs.sqlite")
    separate = processes and part == "round"
    if not separate:
        runs.serve(store)
    rows = []
    if part == "solo":
        batches = [[name] for name in names]
    elif part == "pair":
        batches = [["gpt2", "gpt2"]]
    else:
        batches = [[names[i % len(names)] for i in range(n)]]
    for batch in batches:
        for name in set(batch):  # what the Run page works out as a person picks the model, before the click
            with contextlib.suppress(Exception):
                memory.estimate_memory_gib(experiment(name, device, backend))
        if separate:
            clicked = time.time()
            clicks = [subprocess.Popen([sys.executable, "-c", CLICK, str(store.path),
                                        experiment(name, device, backend).to_json(), f"person-{i}", str(timeout_s)],
                                       stdout=subprocess.PIPE, text=True) for i, name in enumerate(batch)]
            ids = [c.stdout.readline().strip() for c in clicks]
            for name, run_id, click in zip(batch, ids, clicks):
                click.wait(timeout_s + 300)
                rows.append(_row(part, name, store.get(run_id), clicked, store))
                print("ROW " + json.dumps(rows[-1]), flush=True)
            continue
        wait_for_spares()
        clicked = time.time()
        live = [runs.start(experiment(name, device, backend), store, owner=f"person-{i}", timeout_s=timeout_s)
                for i, name in enumerate(batch)]
        for name, run in zip(batch, live):
            rows.append(_row(part, name, run.wait(timeout_s + 120), clicked, store))
            print("ROW " + json.dumps(rows[-1]), flush=True)
    return rows


def _row(part: str, name: str, rec, clicked: float, store) -> dict:
    """One run of the room as the tables read it."""
    from tcore.figures import noise_reasons

    result = rec.result or {}
    shown = result.get("headline_at_s") or ((rec.finished_at or time.time()) - rec.queued_at)
    return {"part": part, "setting": name, "label": rec.label, "status": rec.status,
            "error": (rec.error or {}).get("message"), "clicked_at": clicked,
            "click_to_result_s": round(rec.queued_at - clicked + shown, 2),
            "click_to_saved_s": round((rec.finished_at or time.time()) - clicked, 2),
            "compile_s": result.get("compile_s"), "speedup": result.get("speedup"),
            "low": result.get("speedup_low"), "high": result.get("speedup_high"),
            "pm_pct": result.get("speedup_pm_pct"), "noisy": bool(result and noise_reasons(result)),
            "rounds_pm_pct": result.get("speedup_rounds_pm_pct"),
            "drift_pct": result.get("speedup_drift_pct"), "rounds": result.get("paired_rounds"),
            "timed_stop": result.get("timed_stop"), "neighbours_held": result.get("neighbours_held"),
            "within_pct": result.get("speedup_within_pct"),
            "between_pct": result.get("speedup_between_pct"),
            "between_source": result.get("speedup_between_source"),
            "kind": result.get("speedup_kind"),
            "eager_samples_per_s": result.get("eager_samples_per_s"),
            "compiled_samples_per_s": result.get("compiled_samples_per_s"),
            "device_wait_s": result.get("device_wait_s"), "wait_s": result.get("timeline_wait_s"),
            "busy_cores": result.get("busy_cores"), "gpu_processes": result.get("gpu_processes"),
            # each timed block [steps, seconds] and what settling did: the rounds' drift, block by
            # block, comes back with the result (the store, with its compile artifacts, may not)
            "blocks": result.get("blocks"), "settle": result.get("settle"),
            # how much slower than at rest the host ran while its rounds were timed (worker.hostspeed)
            "host_speed": result.get("host_speed"),
            # where its time went: the timeline's longer phases, and how long it held the GPU for what
            "phases": [[p["name"][:40], round(p["s"], 1)] for p in result.get("timeline") or []
                       if p["s"] >= 0.5],
            "held_s": _held(store, rec.id)}


def _held(store, run_id: str) -> dict[str, float]:
    """Seconds the run held its GPU, by purpose (an engine without the device lease: none)."""
    out: dict[str, float] = {}
    devices = getattr(store, "devices", store)  # the store's part; an older engine kept it on the store itself
    for span in getattr(devices, "device_spans", lambda _: [])(run_id):
        if span.released_at is not None:
            out[span.purpose] = round(out.get(span.purpose, 0.0) + span.released_at - span.taken_at, 2)
    return out


def compare(rows: list[dict]) -> list[dict]:
    """Each round run beside its setting's solo run: inside the solo interval, eager within HOLD_PCT, width ratio."""
    solo = {r["setting"]: r for r in rows if r["part"] == "solo" and r["speedup"]}
    out = []
    for r in rows:
        s = solo.get(r["setting"])
        if r["part"] == "solo" or s is None or not r["speedup"]:
            continue
        inside = s["low"] <= r["speedup"] <= s["high"] if s["low"] else None
        eager = (100 * (r["eager_samples_per_s"] / s["eager_samples_per_s"] - 1)
                 if r["eager_samples_per_s"] and s["eager_samples_per_s"] else None)
        ratio = r["pm_pct"] / s["pm_pct"] if r["pm_pct"] and s["pm_pct"] else None
        out.append({"setting": r["setting"], "speedup": r["speedup"], "solo": s["speedup"], "inside_solo": inside,
                    "eager_vs_solo_pct": eager, "width_ratio": ratio,
                    "ok": bool(inside and eager is not None and abs(eager) <= HOLD_PCT
                               and ratio is not None and ratio <= WIDTH_RATIO)})
    return out


def reruns(rows: list[dict]) -> dict:
    """The round's runs of each setting as reruns of one another (the sure-figures table): their headlines, how far
    apart, how many stated intervals hold the median of them all, each interval's half-width against what the
    spread allows (max(5%, 3x the half-range, the half-range over the median)), and how many were flagged Noisy."""
    out = {}
    for name in dict.fromkeys(r["setting"] for r in rows if r["part"] == "round"):
        mine = [r for r in rows if r["part"] == "round" and r["setting"] == name and r["speedup"]]
        if len(mine) < 2:
            continue
        heads = [r["speedup"] for r in mine]
        median = statistics.median(heads)
        half_range_pct = 100 * (max(heads) - min(heads)) / 2 / median
        allowed = max(HOLD_PCT, 3 * half_range_pct)
        out[name] = {"runs": len(mine), "headlines": [round(h, 3) for h in heads], "median": round(median, 3),
                     "half_range_pct": round(half_range_pct, 2),
                     "stated_pm_pct": [round(r["pm_pct"], 1) if r["pm_pct"] else None for r in mine],
                     "hold_median": sum(bool(r["low"] and r["low"] <= median <= r["high"]) for r in mine),
                     "allowed_pm_pct": round(allowed, 2),
                     "within_allowed": sum(bool(r["pm_pct"] and r["pm_pct"] <= allowed) for r in mine),
                     "noisy": sum(r["noisy"] for r in mine)}
    return out


def summary(rows: list[dict]) -> dict:
    out = {}
    for part in ("solo", "round", "pair"):
        mine = [r for r in rows if r["part"] == part]
        if not mine:
            continue
        first = min(r["clicked_at"] for r in mine)
        out[part] = {"runs": len(mine), "finished": sum(r["status"] == "finished" for r in mine)}
        if part != "solo":
            out[part].update(wall_to_last_result_s=round(max(r["click_to_result_s"] for r in mine), 1),
                             wall_to_last_saved_s=round(max(r["clicked_at"] + r["click_to_saved_s"] for r in mine)
                                                        - first, 1))
        if part == "pair" and len(mine) == 2 and mine[1]["compile_s"] is not None:
            out[part]["second_over_its_compile_s"] = round(mine[1]["click_to_result_s"] - mine[1]["compile_s"], 1)
    table = reruns(rows)
    if table:
        out["reruns"] = table
        out["reruns_total"] = {"runs": sum(t["runs"] for t in table.values()),
                               "hold_median": sum(t["hold_median"] for t in table.values()),
                               "within_allowed": sum(t["within_allowed"] for t in table.values()),
                               "settings_not_noisy": sum(t["noisy"] == 0 for t in table.values()),
                               "settings": len(table)}
    checks = compare(rows)
    if checks:
        out["against_solo"] = {"runs": len(checks), "all_targets": sum(c["ok"] for c in checks),
                               "inside_solo_interval": sum(bool(c["inside_solo"]) for c in checks),
                               "eager_within_5pct": sum(c["eager_vs_solo_pct"] is not None
                                                        and abs(c["eager_vs_solo_pct"]) <= HOLD_PCT for c in checks),
                               "width_at_most_1_5x": sum(c["width_ratio"] is not None
                                                         and c["width_ratio"] <= WIDTH_RATIO for c in checks),
                               "worst_eager_pct": max((abs(c["eager_vs_solo_pct"]) for c in checks
                                                       if c["eager_vs_solo_pct"] is not None), default=None),
                               "widest_ratio": max((c["width_ratio"] for c in checks if c["width_ratio"]),
                                                   default=None)}
    return out


def write(out: Path | None, engine: str, rows: list[dict]) -> None:
    """The result so far (rows, checks, summary) to --out, where one was given."""
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"engine": engine, "rows": rows, "checks": compare(rows), "summary": summary(rows)},
                                  indent=1))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--parts", nargs="+", choices=["solo", "round", "pair"], default=["solo", "round"])
    ap.add_argument("--runs", type=int, default=20, help="runs submitted at once in the round")
    ap.add_argument("--mix", nargs="+", choices=sorted(SETTINGS), default=DEFAULT_MIX)
    ap.add_argument("--timeout", type=float, default=600.0, help="each run's time limit, s")
    ap.add_argument("--engine", type=Path, default=None, help="another checkout to drive (before a change)")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="cpu: a dry run of this benchmark")
    ap.add_argument("--backend", default="inductor", help="another backend for a dry run (eager: no Inductor)")
    ap.add_argument("--db", default=None, help="the run store (default: a fresh one per part); a store that holds a "
                                               "calibration (python -m tcore calibrate) gives intervals from it")
    ap.add_argument("--out", type=Path, default=None, help="the result (JSON): rows, checks and the summary")
    ap.add_argument("--solo-from", type=Path, default=None,
                    help="an earlier result of this machine whose solo runs the room's runs are held against (a round "
                         "too long to share a call with its solo part: the two calls one after the other on one "
                         "machine)")
    ap.add_argument("--rounds-from", type=Path, default=None,
                    help="an earlier result of this sitting, on the same --db, whose round runs count with this call's "
                         "as reruns (the six-by-five table in two calls of one machine)")
    ap.add_argument("--processes", action="store_true",
                    help="the round's runs each clicked from a command line of its own on one store (a lab process "
                         "each), not from one lab process")
    ap.add_argument("--part", help=argparse.SUPPRESS)  # how the parent runs one part in a lab process of its own
    args = ap.parse_args()
    if args.part:
        sys.path.insert(0, os.environ.get(ENGINE_ENV) or str(REPO))
        run_part(args.part, args.mix, args.runs, args.timeout, args.device, args.backend, args.db, args.processes)
        return 0
    engine = str((args.engine or REPO).resolve())
    rows = [r for r in json.loads(args.solo_from.read_text())["rows"] if r["part"] == "solo"] if args.solo_from else []
    if args.rounds_from:
        rows += [r for r in json.loads(args.rounds_from.read_text())["rows"] if r["part"] == "round"]
    for part in args.parts:
        env = dict(os.environ, **{ENGINE_ENV: engine}, PYTHONPATH=engine, PYTHONUNBUFFERED="1",
                   COMPILE_LAB_CACHE_DIR=tempfile.mkdtemp(prefix="room-cache-"))
        cmd = [sys.executable, __file__, "--part", part, "--runs", str(args.runs), "--timeout", str(args.timeout),
               "--device", args.device, "--backend", args.backend, "--mix", *args.mix] + (
                   ["--db", str(Path(args.db).resolve())] if args.db else []) + ["--processes"] * args.processes
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env, cwd=engine)
        for line in proc.stdout:
            if line.startswith("ROW "):
                row = json.loads(line[4:])
                rows.append(row)
                print(f"{row['part']:5s} {row['setting']:14s} {row['status']:8s} click->result "
                      f"{row['click_to_result_s']:6.1f} s, compile {row['compile_s'] or 0:5.1f} s, "
                      f"{row['speedup'] or 0:.3f}x ±{row['pm_pct'] or 0:.1f}%, eager "
                      f"{row['eager_samples_per_s'] or 0:.0f}/s, GPU wait {row['device_wait_s'] or 0:.1f} s"
                      + (f" (rounds ±{row['rounds_pm_pct'] or 0:.1f}% over {row.get('rounds')}, drift "
                         f"{row.get('drift_pct') or 0:.1f}%, between σ {row['between_pct'] or 0:.1f}% "
                         f"[{row['between_source']}], {row.get('neighbours_held')} held still, host "
                         f"{(row.get('host_speed') or {}).get('slow_pct')}% slow)"
                         if row["speedup"] else "")
                      + (f" [{row['error'][:120]}]" if row["error"] else ""), flush=True)
                write(args.out, engine, rows)  # after each run: a call cut short keeps the runs that finished
        proc.wait()
        write(args.out, engine, rows)
    print(json.dumps(summary(rows), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
