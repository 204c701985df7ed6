"""Every model and task a person can pick, swept: a figure or a one-line reason for each, with the run's wall time.

    python bench/model_sweep.py --quick          # the `quick` list of bench/model_sweep.toml: 47 pairs (GPU sitting)
    python bench/model_sweep.py --quick --backend aot_eager --timeout 240   # its dry run on a CPU, tiny presets
    python bench/model_sweep.py                  # every model of the toml crossed with its `crossed` tasks
    python bench/model_sweep.py --backend inductor --only hf:t5 timm:resnet18 --tasks inference training
    for k in 1 2 3 4; do python bench/model_sweep.py --quick --part $k/4 & done; wait   # four processes

The pairs: a named list of "MODEL TASK" pairs ([lists] in the toml; --quick runs `quick`, --list NAME another), or
models (transformers decoders, encoders and encoder-decoders, timm, torchvision, diffusers) crossed with tasks
(inference, training, generate, the compiled optimizer, dynamic, regional, the modes reduce-overhead and
max-autotune-no-cudagraphs). Each pair is one run through the same library calls as `python -m tcore run` (its flags,
its defaults for the device: the tiny preset on the CPU, real size on a GPU), in one process and one store. The
backend defaults to aot_eager on the CPU (Dynamo and AOT autograd without Inductor's C++ compiles, which take 20-35 s
each on a small CPU) and inductor on a GPU; the output says which. A mode is Inductor's, so a mode's task runs under
inductor whatever the sweep's backend (on the CPU reduce-overhead then behaves as the default mode).

--at-once N keeps N pairs in the lab's queue at once (default: as many as the lab's room runs on this machine's
GPUs, tcore.lab.queue.room; one on a CPU, where runs take turns whole anyway): on a shared GPU they compile side by side
and each holds the GPU alone to measure, as a room of people clicking Run does. A row then counts its time from leaving
the queue. --part K/N takes the K-th of N shares of the pairs, so N processes can sweep side by side (each row records
how many shared the machine: then the speedups and compile times are not figures to quote). They append to the same
results file, and the last to finish writes the whole table.

A reason that is one of the lab's own limits names the knob that lifts it: the time limit (this sweep's --timeout, up
to the lab's max_run_s), the memory estimate (a smaller preset, which the sweep tries itself, or --batch-size), a GPU
held by the room's other runs (--at-once).

Writes bench/results/model-sweep-<machine>.jsonl (one line per run, appended: a rerun skips pairs already there for
the same backend; --fresh starts over) and model-sweep-<machine>.md (the table), and prints one line per run.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
import tomllib
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

DATA = Path(__file__).with_suffix(".toml")
RESULTS = REPO / "bench" / "results"
SOURCE_KEYS = {"hf_decoders": "hf", "hf_encoders": "hf", "hf_encoder_decoders": "hf", "timm": "timm",
               "torchvision": "torchvision", "diffusers": "diffusers"}
RAW_TRACE = re.compile(r"Traceback \(most recent call last\)|^\s*File \".*\", line \d+", re.M)


def load(path: Path = DATA) -> dict:
    data = tomllib.loads(path.read_text())
    models = [f"{SOURCE_KEYS[group]}:{name}" for group, names in data["models"].items() if group in SOURCE_KEYS
              for name in names]
    lists = {name: [tuple(pair.split()) for pair in pairs] for name, pairs in data.get("lists", {}).items()}
    for name, pairs in lists.items():
        for pair in pairs:
            if len(pair) != 2 or pair[1] not in data["tasks"]:
                raise ValueError(f"{path}: [lists] {name}: {' '.join(pair)!r} is not \"MODEL TASK\" with a TASK of "
                                 f"[tasks] ({', '.join(data['tasks'])})")
    return {"models": models, "lists": lists, "quick": lists["quick"], "tasks": data["tasks"],
            "crossed": data["crossed"], "machines": data["machines"]}


def machine_name() -> str:
    """cpu, or the GPU's model in lower case (h100, h200): the results file is named after it."""
    import torch

    if not torch.cuda.is_available():
        return "cpu"
    name = torch.cuda.get_device_name(0)
    found = re.search(r"\b([A-Z]\d{2,4})\b", name)
    return (found.group(1) if found else name.split()[-1]).lower()


def one_line(text: str, limit: int = 220) -> str:
    line = next((ln.strip() for ln in str(text).splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[:limit - 3] + "..."


def run_pair(model: str, task: str, flags: list[str], store, timeout_s: float) -> dict:
    """One model x task through the command line's own parser, defaults and queue; a figure or a reason."""
    row, run = submit_pair(model, task, flags, store, timeout_s)
    return row if run is None else finish_pair(row, run.wait(), timeout_s)


def submit_pair(model: str, task: str, flags: list[str], store, timeout_s: float) -> tuple[dict, object]:
    """Queue one model x task as `python -m tcore run` would; (the row so far, its LiveRun), or (the row with the
    refusal, None) where the lab refused it before anything ran.

    At the preset that fits the machine: where the lab refuses the default preset for memory (a 7 B model's AdamW
    state on one GPU), the pair runs at the next smaller preset the model has, and the row says which it was
    refused at and why. With no smaller preset, or a refusal of another kind, the refusal is the row's reason."""
    from tcore.cli import build_parser
    from tcore.experiment.spec import SpecError
    from tcore.lab.policy.limits import TooBig
    from tcore.lab.run import runs
    from tcore.lab.run.flags import experiment_from_args

    argv = ["run", "--model", model, *flags, "--timeout", f"{timeout_s:g}"]
    row = {"model": model, "task": task, "command": "python -m tcore " + " ".join(argv), "t0": time.perf_counter()}
    try:
        args = build_parser().parse_args(argv)
        exp = experiment_from_args(args)
        while True:
            row.update(preset=exp.preset, batch_size=exp.batch_size, precision=exp.precision, backend=exp.backend)
            try:
                return row, runs.start(exp, store, timeout_s=args.timeout)
            except TooBig as e:  # refused for memory (tcore.lab.policy.limits): a smaller preset may fit
                smaller = smaller_preset(model, exp.preset)
                if smaller is None:
                    raise
                row.setdefault("refused_at", []).append({"preset": exp.preset, "reason": one_line(e)})
                exp = exp.replace(preset=smaller)
                row["command"] = "python -m tcore " + " ".join([*argv, "--preset", smaller])
    except (SpecError, ValueError) as e:  # refused before anything ran: the lab's own words
        row.update(status="refused", reason=one_line(e), wall_s=round(time.perf_counter() - row.pop("t0"), 1))
        return row, None
    except Exception as e:  # noqa: BLE001 (a check that raised: what the sweep looks for, kept in the row and counted)
        row.update(status="raised", reason=one_line(f"{type(e).__name__}: {e}"), raw_trace_in_message=True,
                   traceback=traceback.format_exc(), wall_s=round(time.perf_counter() - row.pop("t0"), 1))
        return row, None


def finish_pair(row: dict, record, timeout_s: float) -> dict:
    """The row of a run that ended: its figure, or its reason (with the knob, where the reason is the lab's limit)."""
    row["wall_s"] = round(time.perf_counter() - row.pop("t0"), 1)  # from the call: checks, the queue, the run
    row["run_id"] = record.id
    if record.started_at and record.finished_at:  # from leaving the queue, as the time limit counts
        row["run_s"] = round(record.finished_at - record.started_at, 1)
    if record.status == "finished":
        r = record.result
        row.update(status="figure", speedup=r.get("speedup"), compile_s=r.get("compile_s"),
                   graphs=r.get("graph_count"), breaks=r.get("graph_break_count"), device=r.get("device"))
        if r.get("compiled_decode_tokens_per_s") is not None:  # task=generate: decode speed, tokens/s per sequence
            row["tokens_per_s"] = r["compiled_decode_tokens_per_s"]
        return row
    err = record.error or {}
    message = err.get("message") or ""
    status = err.get("kind") or record.status
    knob = limit_knob(status, message, timeout_s)
    row.update(status=status, reason=one_line(message, 220 - len(knob)) + knob, phase=err.get("phase"),
               raw_trace_in_message=bool(RAW_TRACE.search(message)))
    return row


def limit_knob(status: str, message: str, timeout_s: float) -> str:
    """What lifts a reason that is the lab's own limit, in words to append to it ("" for any other reason)."""
    if status == "timeout":
        held = " or fewer pairs at once (--at-once)" if "waiting for the GPU" in message else ""
        return (f"; lifted by a larger --timeout (now {timeout_s:g} s; the lab caps it at its max_run_s, "
                f"COMPILE_LAB_MAX_RUN_S){held}")
    if status == "oom":
        return "; lifted by a smaller --batch-size or --preset (the pair's task flags), or fewer pairs at once"
    return ""


def smaller_preset(model: str, preset: str) -> str | None:
    """The model's next smaller preset (its presets run from smallest to largest), or None."""
    import sample_models

    names = list(sample_models.get(model).presets)
    i = names.index(preset) if preset in names else 0
    return names[i - 1] if i > 0 else None


def cell(row: dict) -> str:
    # queued beside others (--at-once), a run's own time starts as it leaves the queue
    took = row["run_s"] if row.get("at_once", 1) > 1 and row.get("run_s") is not None else row["wall_s"]
    if row["status"] == "figure":
        speed = f"{row['speedup']:.2f}x" if row.get("speedup") is not None else "figure"
        fits = f" (at {row['preset']}: {row['refused_at'][0]['preset']} does not fit)" if row.get("refused_at") else ""
        return f"{speed} · {took:.0f} s{fits}"
    if row["status"] == "timeout" and row.get("run_s") is not None:
        return f"timeout at {row['run_s']:.0f} s · {took:.0f} s"
    return f"{row['status']} · {took:.0f} s"


def table(rows: list[dict], machine: str, header: str) -> str:
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    models = list(dict.fromkeys(r["model"] for r in rows))
    by = {(r["model"], r["task"]): r for r in rows}
    figures = sum(r["status"] == "figure" for r in rows)
    raw = sum(bool(r.get("raw_trace_in_message")) for r in rows)
    shared = max((r.get("side_by_side", 1) for r in rows), default=1)
    at_once = max((r.get("at_once", 1) for r in rows), default=1)
    out = [f"# Model sweep: {machine}", "", header, "",
           f"{len(rows)} runs: {figures} gave a figure ({100 * figures / max(len(rows), 1):.0f}%), "
           f"{len(rows) - figures} a reason; {raw} with a raw traceback in the message. A cell is the speedup (or why "
           "not) and the run's wall time from the call to its record; a blank cell was not run."
           + (f" Up to {shared} runs shared the machine at once (--part): the speedups and times are not figures "
              "to quote." if shared > 1 else "")
           + (f" Up to {at_once} pairs were in the lab's queue at once (--at-once): they compiled side by side and "
              "each held the GPU alone to measure; a cell's time starts as its run leaves the queue."
              if at_once > 1 else ""),
           "",
           "| model | " + " | ".join(tasks) + " |", "|---|" + "---|" * len(tasks)]
    for m in models:
        out.append(f"| {m} | " + " | ".join(cell(by[(m, t)]) if (m, t) in by else "" for t in tasks) + " |")
    reasons = [r for r in rows if r["status"] != "figure"]
    if reasons:
        out += ["", "Reasons:", ""]
        out += [f"- {r['model']} {r['task']}: **{r['status']}**"
                + (f" (phase {r['phase']})" if r.get("phase") else "") + f": {r.get('reason', '')}" for r in reasons]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    data = load()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--quick", action="store_true",
                       help=f"the `quick` list of pairs in the data file ({len(data['quick'])} pairs)")
    which.add_argument("--list", choices=list(data["lists"]), help="a named list of pairs in the data file")
    which.add_argument("--only", nargs="+", metavar="MODEL", help="these models (SOURCE:NAME), crossed with --tasks")
    parser.add_argument("--tasks", nargs="+", choices=list(data["tasks"]),
                        help=f"the tasks models are crossed with (default: {' '.join(data['crossed'])})")
    parser.add_argument("--backend", choices=["inductor", "aot_eager", "eager"],
                        help="the compiler backend (default: aot_eager on the CPU, inductor on a GPU)")
    parser.add_argument("--timeout", type=float, default=None,
                        help="each run's time limit in seconds (default: 180 on the CPU, 600 on a GPU)")
    parser.add_argument("--at-once", type=int, default=None, metavar="N",
                        help="pairs kept in the lab's queue at once (default: the runs the lab's room takes at once "
                             "on this machine's GPUs; 1 on a CPU)")
    parser.add_argument("--max-runs", type=int, default=None, help="stop after this many new runs")
    parser.add_argument("--fresh", action="store_true", help="start the results file over instead of resuming")
    parser.add_argument("--part", default="1/1", metavar="K/N",
                        help="sweep the K-th of N shares of the pairs (default 1/1: all), for N processes side by side")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the .jsonl and .md go (bench/results)")
    args = parser.parse_args(argv)
    if args.tasks and (args.quick or args.list):
        parser.error("--tasks crosses models (the whole list, or --only): a named list already names its tasks")

    import torch

    from tcore.store import RunStore

    machine = machine_name()
    kind = "cuda" if torch.cuda.is_available() else "cpu"
    backend = args.backend or ("inductor" if kind == "cuda" else "aot_eager")
    timeout_s = args.timeout or (600.0 if kind == "cuda" else 180.0)
    at_once = args.at_once or room_width(kind)
    flags = [*data["machines"][kind], "--backend", backend]
    named = "quick" if args.quick else args.list
    pairs = data["lists"][named] if named else [(m, t) for m in (args.only or data["models"])
                                                  for t in (args.tasks or data["crossed"])]
    k, n = (int(x) for x in args.part.split("/"))
    if not 1 <= k <= n:
        parser.error(f"--part {args.part}: K must be between 1 and N")
    pairs = pairs[k - 1::n]
    args.out.mkdir(parents=True, exist_ok=True)
    jsonl, md = args.out / f"model-sweep-{machine}.jsonl", args.out / f"model-sweep-{machine}.md"
    if args.fresh and jsonl.exists():
        jsonl.unlink()
    done = [json.loads(line) for line in jsonl.read_text().splitlines()] if jsonl.exists() else []
    seen = {(r["model"], r["task"], r.get("sweep_backend")) for r in done}
    header = (f"{machine}, torch {torch.__version__}, backend {backend}"
              f"""{' (aot_eager: Dynamo and AOT autograd without Inductor code generation, to keep a CPU sweep '
                   'affordable; speedups near 1x are expected; the modes run under inductor)'
                   if backend == 'aot_eager' else ''}; """
              f"the lab's {kind} defaults (preset, batch size, precision); flags `{' '.join(flags)}`, each run "
              f"limited to {timeout_s:g} s, {at_once} pair(s) in the queue at once; {time.strftime('%Y-%m-%d')}. "
              f"Reproduce: `python bench/model_sweep.py"
              f"{' --quick' if args.quick else f' --list {args.list}' if args.list else ''}"
              f"{' --tasks ' + ' '.join(args.tasks) if args.tasks else ''}"
              f"{' --backend ' + backend if args.backend else ''}{f' --timeout {timeout_s:g}' if args.timeout else ''}"
              f"{f' --at-once {at_once}' if args.at_once else ''}` (the table holds every row of the results file "
              f"for this backend; a rerun resumes it).")
    print(header, file=sys.stderr)
    store = RunStore(Path(tempfile.mkdtemp(prefix="model-sweep-")) / "runs.sqlite")
    todo = [(m, t) for m, t in pairs if (m, t, backend) not in seen][:args.max_runs]
    for row in sweep(todo, data, flags, store, timeout_s, at_once):
        row.update(sweep_backend=backend, at_once=at_once,
                   side_by_side=n)  # processes sharing the machine: n > 1 makes the timings not figures to quote
        done.append(row)
        with jsonl.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(f"{row['model']:36} {row['task']:24} {row['wall_s']:6.1f} s  {summary(row)}", flush=True)
    # Read back: other parts append to the same file, and the table holds all of them.
    done = [json.loads(line) for line in jsonl.read_text().splitlines()] if jsonl.exists() else []
    rows = [r for r in done if r.get("sweep_backend") == backend]
    md.write_text(table(rows, machine, header))
    print(f"{jsonl}\n{md}", file=sys.stderr)
    return 0


def sweep(pairs: list[tuple[str, str]], data: dict, flags: list[str], store, timeout_s: float, at_once: int):
    """The rows of `pairs`, as each ends, with at most `at_once` of them in the lab's queue at a time."""
    waiting, running = list(pairs), []
    while waiting or running:
        while waiting and len(running) < at_once:
            model, task = waiting.pop(0)
            row, run = submit_pair(model, task, [*flags, *data["tasks"][task]], store, timeout_s)
            if run is None:
                yield row
            else:
                running.append((row, run))
        for row, run in list(running):
            run.wait(timeout=0.5 / len(running))
            if run.done:
                running.remove((row, run))
                yield finish_pair(row, run.record, timeout_s)


def room_width(kind: str) -> int:
    """How many runs the lab's queue runs at once on this machine's `kind` device: its room (tcore.lab.queue.room)."""
    if kind != "cuda":
        return 1  # on the CPU runs take turns whole
    from tcore.lab.queue import scheduler

    return len(scheduler.device_slots("cuda")) * scheduler.room_plan("cuda").runs_per_slot


def summary(row: dict) -> str:
    if row["status"] != "figure":
        return f"{row['status']}: {row.get('reason', '')}"
    speed = f"{row['speedup']:.2f}x" if row.get("speedup") is not None else "no speedup"
    return speed + (f" compile {row['compile_s']:.1f} s" if row.get("compile_s") is not None else "")


if __name__ == "__main__":
    sys.exit(main())
