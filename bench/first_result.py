"""Click to result on the Run page, driven headlessly (Streamlit's AppTest) as a participant would.

    python bench/first_result.py run --out /tmp/first --models default resnet50
    python bench/first_result.py render /tmp/first/first_result.jsonl

For each model, in two fresh app processes, one with spare workers off (COMPILE_LAB_SPARE_WORKERS=0:
every worker starts when its run does) and one with them on (the app's default):
  1. open the Run page, choose the model and leave every other knob at its default;
  2. with spares on, wait until the spare worker has done its imports (an idle room);
  3. click Run and rerun the page every 0.25 s until the result's Speedup metric is drawn: click to
     result; the first power sample the run receives is click to first trace (the page's live chart
     draws it at its next refresh, every 1 s); the live view's compile time, the first figure of the
     result it shows, is click to first figure;
  4. click Run again the moment the result is drawn (a busy room: the next run queued behind).
Each row also says whether the run got a spare and when each phase began, so the gain is explained.
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def one_process(model: str, spares: bool, attempts: int, out: Path) -> None:
    """In this process: the app, `attempts` runs of `model` clicked one after another."""
    from streamlit.testing.v1 import AppTest

    from tcore import figures
    from tcore.lab import runs

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
        while not any(w.ready for w in runs.SPARES._spares.values()):
            assert time.time() < deadline, "no spare worker became ready in 120 s"
            time.sleep(0.2)
    for attempt in range(attempts):
        before = {r.run_id for r in runs.active()} | {r.id for r in _store().list()}
        t0 = time.time()
        at.button(key="run_start").click().run()
        run = next(r for r in runs.active() if r.run_id not in before)
        first_power = first_figure = None
        while not any(m.label == "Speedup" for m in at.metric):
            if first_power is None and run.snapshot()["power_samples"]:
                first_power = time.time() - t0
            if first_figure is None and not run.done and any(m.label == "Compile time" for m in at.metric):
                first_figure = time.time() - t0  # the live view draws the compile time before the rest
            assert not at.exception, at.exception
            assert time.time() - t0 < 600, "no result within 10 min"
            if run.done and run.record and run.record.status != "finished":
                raise SystemExit(f"the run failed: {run.record.error}")
            time.sleep(0.25)
            at.run()
        shown = time.time() - t0
        snap = run.snapshot()
        record = run.record
        row = {"model": model, "spares": spares, "attempt": attempt + 1,
               "room": "idle" if attempt == 0 else "busy (clicked as the previous result was drawn)",
               "label": label, "click_to_result_s": round(shown, 2),
               "click_to_first_power_s": round(first_power, 2) if first_power is not None else None,
               "click_to_compile_time_shown_s": round(first_figure, 2) if first_figure is not None else None,
               "queued_to_started_s": round(run.handle.started_at - run.queued_at, 2),
               "from_spare": run.from_spare,
               "phases_s": {p: round(t - t0, 2) for p, t in snap["phase_started_at"].items()},
               "worker_end_s": round(run.handle.finished_at - t0, 2),
               "speedup": record.result.get("speedup"), "speedup_pm_pct": record.result.get("speedup_pm_pct"),
               "noisy": figures.noise_reasons(record.result), "compile_s": record.result.get("compile_s"),
               "gpu": record.env.get("gpu"), "gpu_uuid": record.env.get("gpu_uuid"), "torch": record.env.get("torch")}
        print(json.dumps(row), flush=True)
        with open(out, "a") as f:
            f.write(json.dumps(row) + "\n")


def _store():
    from tcore.store import RunStore

    return RunStore()


def run_all(out_dir: Path, models: list[str], attempts: int) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / "first_result.jsonl"
    for model in models:
        for spares in (False, True):
            scratch = Path(tempfile.mkdtemp(prefix="first-result-"))
            env = dict(os.environ, COMPILE_LAB_DB=str(scratch / "runs.sqlite"),
                       COMPILE_LAB_CACHE_DIR=str(scratch / "cache"), COMPILE_LAB_SPARE_WORKERS="1" if spares else "0",
                       PYTHONUNBUFFERED="1")
            subprocess.run([sys.executable, __file__, "one", "--model", model, "--attempts", str(attempts),
                            "--out", str(out)] + (["--spares"] if spares else []), env=env, cwd=scratch, check=False)
    return out


def render(path: Path) -> str:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    lines = ["| model | spare workers | room | click to whole result | click to first figure (compile time) | "
             "click to first power sample | got a spare | compile | speedup |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['label'].removeprefix('Will run: ').strip('*')} | {'on' if r['spares'] else 'off'} | {r['room']} | "
                     f"{r['click_to_result_s']:.1f} s | {_s(r.get('click_to_compile_time_shown_s'))} | "
                     f"{_s(r['click_to_first_power_s'])} | {r['from_spare'] or 'no'} | {r['compile_s']:.1f} s | "
                     f"{r['speedup']:.2f}x |")
    return "\n".join(lines)


def _s(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds:.1f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run")
    run.add_argument("--out", type=Path, required=True)
    run.add_argument("--models", nargs="+", default=["resnet50", "default"])
    run.add_argument("--attempts", type=int, default=2)
    one = sub.add_parser("one")
    one.add_argument("--model", required=True)
    one.add_argument("--attempts", type=int, default=2)
    one.add_argument("--spares", action="store_true")
    one.add_argument("--out", type=Path, required=True)
    show = sub.add_parser("render")
    show.add_argument("path", type=Path)
    args = parser.parse_args()
    if args.command == "run":
        print(render(run_all(args.out, args.models, args.attempts)))
    elif args.command == "one":
        one_process(args.model, args.spares, args.attempts, args.out)
    else:
        print(render(args.path))


if __name__ == "__main__":
    main()
