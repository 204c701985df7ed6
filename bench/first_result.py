"""Click to result on the Run page, driven headlessly (Streamlit's AppTest) as a participant would.

    python bench/first_result.py run --out bench/results/click-to-result-h100.jsonl --models hf:gpt2 resnet50 default
    python bench/first_result.py run --out R.jsonl --models hf:gpt2 --engine /path/to/older/checkout --spares on
    python bench/first_result.py render R.jsonl

For each model, in fresh app processes, one with spare workers off (COMPILE_LAB_SPARE_WORKERS=0: every worker
starts when its run does) and one with them on (the app's default), or only the one --spares names:
  1. open the Run page, choose the model and leave every other knob at its default (on the CPU: the tiny presets);
  2. with spares on, wait until the spare worker has done its imports (an idle room);
  3. click Run and rerun the page every 0.25 s until the result's Speedup metric is drawn: click to result. An engine
     that sends the headline before its profiling pass draws it then, from the live run (`result_drawn_from` says
     which); the record is saved a profile later (click to saved). The first figure the live view draws (the eager
     warm-up step, the compile's progress or the compile time, whichever the engine shows first) is click to first
     figure; the first power sample the run receives is click to first trace (the page's live chart draws it at its next
     refresh, every 1 s);
  4. click Run again the moment the result is drawn (a busy room: the next run queued behind, here possibly behind
     the previous run's profiling pass); each row is written once its run is saved.
Each row also has the run's compile time, its timeline (the phases from submit to saved, each in seconds, where the
engine keeps one), whether the run got a spare and when each phase began, so the gain is explained.
--engine DIR runs another checkout's app and engine (say the code before a change) under this same driver, so
"before" and "after" come from one sitting on one machine; each row names the engine's directory and commit.
The store and caches are fresh per process, so every compile is cold.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
# The checkout whose app and engine are driven: this one, or --engine's (passed to the `one` process this way).
ENGINE_ENV = "FIRST_RESULT_ENGINE"
REPO = Path(os.environ.get(ENGINE_ENV) or HERE).resolve()
sys.path.insert(0, str(REPO))
# What the live view draws before the result, by engine: the first of these metrics drawn is the first figure.
LIVE_FIGURES = ("Eager step (warm-up)", "Compiling", "Compile time", "Speedup so far")


def _commit(repo: Path) -> str | None:
    done = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or None


def one_process(model: str, spares: bool, attempts: int, out: Path) -> None:
    """In this process: the app, `attempts` runs of `model` clicked one after another."""
    from streamlit.testing.v1 import AppTest

    from tcore.lab.queue import spares
    from tcore.lab.run import registry

    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=120).run()
    if ":" in model:  # a real model, as a person finds it: its source, a search, then the name
        source, _, name = model.partition(":")
        next(r for r in at.radio if r.label == "Source").set_value(source).run()
        next(t for t in at.text_input if t.label == "Search names").set_value(name).run()
        next(b for b in at.selectbox if b.label == "Model").set_value(model).run()
        assert at.session_state["run_model"] == model, at.session_state["run_model"]
    elif model != "default":
        at.selectbox(key="run_builtin").set_value(model).run()
    label = next(c.value for c in at.caption if str(c.value).startswith("Will run"))
    if spares:
        deadline = time.time() + 120
        while not any(w.ready for w in spares.SPARES._spares.values()):
            assert time.time() < deadline, "no spare worker became ready in 120 s"
            time.sleep(0.2)
    pending = []  # (run, row so far): written once the run is saved, after the next click
    for attempt in range(attempts):
        before = {r.run_id for r in registry.active()} | {r.id for r in _store().list()}
        t0 = time.time()
        at.button(key="run_start").click().run()
        run = next(r for r in registry.active() if r.run_id not in before)
        first_power = first_figure = first_compile = None
        while not any(m.label == "Speedup" for m in at.metric):
            if first_power is None and run.snapshot()["power_samples"]:
                first_power = time.time() - t0
            live = [m.label for m in at.metric if m.label in LIVE_FIGURES] if not run.done else []
            if first_figure is None and live:
                first_figure = (time.time() - t0, live[0])
            if first_compile is None and "Compile time" in live:
                first_compile = time.time() - t0  # the live view draws the compile time before the rest
            assert not at.exception, at.exception
            assert time.time() - t0 < 600, "no result within 10 min"
            if run.done and run.record and run.record.status != "finished":
                raise SystemExit(f"the run failed: {run.record.error}")
            time.sleep(0.25)
            at.run()
        shown = time.time() - t0
        drawn_from = "saved record" if run.done else "headline (before the profiling pass)"
        pending.append((run, {"t0": t0, "shown": shown, "drawn_from": drawn_from, "first_power": first_power,
                              "first_figure": first_figure, "first_compile": first_compile, "attempt": attempt}))
    for run, seen in pending:
        _write_row(run, seen, model, spares, label, out)


def _write_row(run, seen: dict, model: str, spares: bool, label: str, out: Path) -> None:
    """One click's row, once its run is saved (its record has the compile time and the timeline)."""
    from tcore import figures

    t0, shown, first_figure = seen["t0"], seen["shown"], seen["first_figure"]
    first_power, first_compile, attempt = seen["first_power"], seen["first_compile"], seen["attempt"]
    if run.wait(600) is None or run.record.status != "finished":
        raise SystemExit(f"the run failed after its result was drawn: {run.record and run.record.error}")
    snap = run.snapshot()
    result = run.record.result
    saved_at = getattr(run.record, "finished_at", None)
    row = {"model": model, "spares": spares, "attempt": attempt + 1, "engine": str(REPO), "commit": _commit(REPO),
           "room": "idle" if attempt == 0 else "busy (clicked as the previous result was drawn)",
           "label": label, "click_to_result_s": round(shown, 2), "result_drawn_from": seen["drawn_from"],
           "click_to_saved_s": round(saved_at - t0, 2) if saved_at else None,
           "headline_at_s": result.get("headline_at_s"),
           "click_to_first_figure_s": round(first_figure[0], 2) if first_figure else None,
           "first_figure": first_figure[1] if first_figure else None,
           "click_to_compile_time_shown_s": round(first_compile, 2) if first_compile is not None else None,
           "click_to_first_power_s": round(first_power, 2) if first_power is not None else None,
           "queued_to_started_s": round(run.handle.started_at - run.queued_at, 2),
           "from_spare": run.from_spare,
           "phases_s": {p: round(t - t0, 2) for p, t in snap["phase_started_at"].items()},
           "worker_end_s": round(run.handle.finished_at - t0, 2),
           "speedup": result.get("speedup"), "speedup_pm_pct": result.get("speedup_pm_pct"),
           "noisy": figures.noise_reasons(result), "compile_s": result.get("compile_s"),
           # the run's own timeline (absent from engines before it kept one)
           "timeline_wall_s": result.get("timeline_wall_s"), "timeline_compile_s": result.get("timeline_compile_s"),
           "lab_overhead_s": result.get("lab_overhead_s"),
           "timeline": [[p["name"], p["kind"], p["s"]] for p in result.get("timeline") or []],
           "gpu": run.record.env.get("gpu"), "gpu_uuid": run.record.env.get("gpu_uuid"),
           "torch": run.record.env.get("torch")}
    print(json.dumps(row), flush=True)
    with open(out, "a") as f:
        f.write(json.dumps(row) + "\n")


def _store():
    from tcore.store import RunStore

    return RunStore()


def run_all(out: Path, models: list[str], attempts: int, spares: str, engine: Path | None) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    for model in models:
        for on in {"off": (False,), "on": (True,), "both": (False, True)}[spares]:
            scratch = Path(tempfile.mkdtemp(prefix="first-result-"))
            env = dict(os.environ, COMPILE_LAB_DB=str(scratch / "runs.sqlite"),
                       COMPILE_LAB_CACHE_DIR=str(scratch / "cache"), COMPILE_LAB_SPARE_WORKERS="1" if on else "0",
                       PYTHONUNBUFFERED="1")
            env.pop(ENGINE_ENV, None)
            if engine is not None:
                env[ENGINE_ENV] = str(engine.resolve())
            subprocess.run([sys.executable, __file__, "one", "--model", model, "--attempts", str(attempts),
                            "--out", str(out.resolve())] + (["--spares"] if on else []), env=env, cwd=scratch,
                           check=False)
    return out


def render(path: Path) -> str:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    lines = ["| engine | model | spare workers | room | click to result | click to saved | click to first figure | "
             "compile | lab overhead (timeline) | speedup |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        first = (f"{_s(r.get('click_to_first_figure_s', r.get('click_to_compile_time_shown_s')))}"
                 f"{' (' + r['first_figure'] + ')' if r.get('first_figure') else ''}")
        lines.append(f"| {_engine(r)} | {r['label'].removeprefix('Will run: ').strip('*')} | "
                     f"{'on' if r['spares'] else 'off'} | {r['room']} | {r['click_to_result_s']:.1f} s | "
                     f"{_s(r.get('click_to_saved_s'))} | {first} | "
                     f"{r['compile_s']:.1f} s | {_s(r.get('lab_overhead_s'))} | {r['speedup']:.2f}x |")
    for r in rows:  # each run's timeline, phase by phase
        if r.get("timeline"):
            lines += ["", f"{_engine(r)} {r['model']} (spares {'on' if r['spares'] else 'off'}, attempt "
                          f"{r['attempt']}), timeline {r['timeline_wall_s']:.1f} s:"]
            lines += [f"- {name} ({kind}): {s:.2f} s" for name, kind, s in r["timeline"]]
    return "\n".join(lines)


def _engine(row: dict) -> str:
    """The engine a row drove: its commit, else its directory's name (a copy without git)."""
    return row.get("commit") or Path(row.get("engine") or ".").name or "this checkout"


def _s(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds:.1f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="each model in fresh app processes (spares off, then on); rows to --out")
    run.add_argument("--out", type=Path, required=True, help="the JSON-lines file the rows are added to, e.g. "
                     "bench/results/click-to-result-MODEL-MACHINE.jsonl")
    run.add_argument("--models", nargs="+", default=["hf:gpt2", "resnet50", "default"],
                     help="Run-page models: 'default' is the page's own default (the captioner), a built-in name "
                          "picks it with its device's default preset, SOURCE:NAME is found as a person would")
    run.add_argument("--attempts", type=int, default=2, help="clicks per process: the first in an idle room, "
                     "each later one the moment the previous result is drawn")
    run.add_argument("--spares", choices=["both", "off", "on"], default="both", help="spare workers off, on, or a "
                     "process each way")
    run.add_argument("--engine", type=Path, default=None, help="another checkout (its app.py, tcore, sample_models) "
                     "to drive instead of this one, e.g. the code before a change, for a before/after in one sitting")
    one = sub.add_parser("one", help="one app process (what run starts per model and spare setting)")
    one.add_argument("--model", required=True)
    one.add_argument("--attempts", type=int, default=2)
    one.add_argument("--spares", action="store_true")
    one.add_argument("--out", type=Path, required=True)
    show = sub.add_parser("render", help="the rows as a Markdown table, then each run's timeline")
    show.add_argument("path", type=Path)
    args = parser.parse_args()
    if args.command == "run":
        print(render(run_all(args.out, args.models, args.attempts, args.spares, args.engine)))
    elif args.command == "one":
        one_process(args.model, args.spares, args.attempts, args.out)
    else:
        print(render(args.path))


if __name__ == "__main__":
    main()
