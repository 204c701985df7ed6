"""Every model and task a person can pick, swept: a figure or a one-line reason for each, with the run's wall time.

    python bench/model_sweep.py                  # the whole list of bench/model_sweep.toml on this machine
    python bench/model_sweep.py --quick          # a few of each kind (what fits a CPU in minutes)
    python bench/model_sweep.py --backend inductor --only hf:t5 timm:resnet18 --tasks inference training
    for k in 1 2 3 4; do python bench/model_sweep.py --quick --part $k/4 & done; wait   # four at a time

Models (bench/model_sweep.toml: transformers decoders, encoders and encoder-decoders, timm, torchvision, diffusers)
are crossed with tasks (inference, training, training with the compiled optimizer, dynamic, regional,
reduce-overhead). Each pair is one run through the same library calls as `python -m tcore run` (its flags, its
defaults for the device: the tiny preset on the CPU, real size on a GPU), in one process and one store, one at a
time. The backend defaults to aot_eager on the CPU (Dynamo and AOT autograd without Inductor's C++ compiles, which
take 20-35 s each on a small CPU) and inductor on a GPU; the output says which. reduce-overhead is Inductor's mode,
so that task runs under inductor whatever the sweep's backend (on the CPU it then behaves as the default mode).

--part K/N takes the K-th of N shares of the models, so N processes can sweep side by side (on one GPU, or one
GPU each with CUDA_VISIBLE_DEVICES): the question is whether each pair gives a figure or a reason, and side by side
that answer is the same while the speedups and compile times are not figures to quote (each row records how many
shared the machine). They append to the same results file, and the last to finish writes the whole table.

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
    return {"models": models, "quick": data["models"]["quick"], "tasks": data["tasks"], "machines": data["machines"]}


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
    """One model x task through the command line's own parser, defaults and queue; a figure or a reason.

    At the preset that fits the machine: where the lab refuses the default preset for memory (a 7 B model's AdamW
    state on one GPU), the pair runs at the next smaller preset the model has, and the row says which it was
    refused at and why. With no smaller preset, or a refusal of another kind, the refusal is the row's reason."""
    from tcore.cli import build_parser, experiment_from_args
    from tcore.lab import runs
    from tcore.lab.limits import TooBig
    from tcore.experiment.spec import SpecError

    argv = ["run", "--model", model, *flags, "--timeout", f"{timeout_s:g}"]
    row = {"model": model, "task": task, "command": "python -m tcore " + " ".join(argv)}
    t0 = time.perf_counter()
    try:
        args = build_parser().parse_args(argv)
        exp = experiment_from_args(args)
        while True:
            row.update(preset=exp.preset, batch_size=exp.batch_size, precision=exp.precision, backend=exp.backend)
            try:
                record = runs.start(exp, store, timeout_s=args.timeout).wait()
                break
            except TooBig as e:  # refused for memory (tcore.lab.limits): a smaller preset may fit
                smaller = smaller_preset(model, exp.preset)
                if smaller is None:
                    raise
                row.setdefault("refused_at", []).append({"preset": exp.preset, "reason": one_line(e)})
                exp = exp.replace(preset=smaller)
                row["command"] = "python -m tcore " + " ".join([*argv, "--preset", smaller])
    except (SpecError, ValueError) as e:  # refused before anything ran: the lab's own words
        row.update(status="refused", reason=one_line(e), wall_s=round(time.perf_counter() - t0, 1))
        return row
    row["wall_s"] = round(time.perf_counter() - t0, 1)  # from the call: the spec's checks, the queue, the run
    row["run_id"] = record.id
    if record.started_at and record.finished_at:  # from leaving the queue, as the time limit counts
        row["run_s"] = round(record.finished_at - record.started_at, 1)
    if record.status == "finished":
        r = record.result
        row.update(status="figure", speedup=r.get("speedup"), compile_s=r.get("compile_s"),
                   graphs=r.get("graph_count"), breaks=r.get("graph_break_count"), device=r.get("device"))
        return row
    err = record.error or {}
    message = err.get("message") or ""
    row.update(status=err.get("kind") or record.status, reason=one_line(message), phase=err.get("phase"),
               raw_trace_in_message=bool(RAW_TRACE.search(message)))
    return row


def smaller_preset(model: str, preset: str) -> str | None:
    """The model's next smaller preset (its presets run from smallest to largest), or None."""
    import sample_models

    names = list(sample_models.get(model).presets)
    i = names.index(preset) if preset in names else 0
    return names[i - 1] if i > 0 else None


def cell(row: dict) -> str:
    if row["status"] == "figure":
        speed = f"{row['speedup']:.2f}x" if row.get("speedup") is not None else "figure"
        fits = f" (at {row['preset']}: {row['refused_at'][0]['preset']} does not fit)" if row.get("refused_at") else ""
        return f"{speed} · {row['wall_s']:.0f} s{fits}"
    if row["status"] == "timeout" and row.get("run_s") is not None:
        return f"timeout at {row['run_s']:.0f} s · {row['wall_s']:.0f} s"
    return f"{row['status']} · {row['wall_s']:.0f} s"


def table(rows: list[dict], machine: str, header: str) -> str:
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    models = list(dict.fromkeys(r["model"] for r in rows))
    by = {(r["model"], r["task"]): r for r in rows}
    figures = sum(r["status"] == "figure" for r in rows)
    raw = sum(bool(r.get("raw_trace_in_message")) for r in rows)
    shared = max((r.get("side_by_side", 1) for r in rows), default=1)
    out = [f"# Model sweep: {machine}", "", header, "",
           f"{len(rows)} runs: {figures} gave a figure ({100 * figures / max(len(rows), 1):.0f}%), "
           f"{len(rows) - figures} a reason; {raw} with a raw traceback in the message. A cell is the speedup (or why "
           "not) and the run's wall time from the call to its record; a blank cell was not run."
           + (f" Up to {shared} runs shared the machine at once (--part): the speedups and times are not figures "
              "to quote." if shared > 1 else ""), "",
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
    parser.add_argument("--quick", action="store_true", help="only the models listed under quick in the data file")
    parser.add_argument("--only", nargs="+", metavar="MODEL", help="these models (SOURCE:NAME) instead of the list")
    parser.add_argument("--tasks", nargs="+", choices=list(data["tasks"]), help="these tasks (default: all)")
    parser.add_argument("--backend", choices=["inductor", "aot_eager", "eager"],
                        help="the compiler backend (default: aot_eager on the CPU, inductor on a GPU)")
    parser.add_argument("--timeout", type=float, default=None,
                        help="each run's time limit in seconds (default: 180 on the CPU, 600 on a GPU)")
    parser.add_argument("--max-runs", type=int, default=None, help="stop after this many new runs")
    parser.add_argument("--fresh", action="store_true", help="start the results file over instead of resuming")
    parser.add_argument("--part", default="1/1", metavar="K/N",
                        help="sweep the K-th of N shares of the models (default 1/1: all), for N processes side by side")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the .jsonl and .md go (bench/results)")
    args = parser.parse_args(argv)

    import torch

    from tcore.store import RunStore

    machine = machine_name()
    kind = "cuda" if torch.cuda.is_available() else "cpu"
    backend = args.backend or ("inductor" if kind == "cuda" else "aot_eager")
    timeout_s = args.timeout or (600.0 if kind == "cuda" else 180.0)
    flags = [*data["machines"][kind], "--backend", backend]
    models = args.only or (data["quick"] if args.quick else data["models"])
    k, n = (int(x) for x in args.part.split("/"))
    if not 1 <= k <= n:
        parser.error(f"--part {args.part}: K must be between 1 and N")
    models = models[k - 1::n]
    tasks = args.tasks or list(data["tasks"])
    args.out.mkdir(parents=True, exist_ok=True)
    jsonl, md = args.out / f"model-sweep-{machine}.jsonl", args.out / f"model-sweep-{machine}.md"
    if args.fresh and jsonl.exists():
        jsonl.unlink()
    done = [json.loads(line) for line in jsonl.read_text().splitlines()] if jsonl.exists() else []
    seen = {(r["model"], r["task"], r.get("sweep_backend")) for r in done}
    header = (f"{machine}, torch {torch.__version__}, backend {backend}"
              f"{' (aot_eager: Dynamo and AOT autograd without Inductor code generation, to keep a CPU sweep affordable; speedups near 1x are expected; reduce-overhead runs under inductor)' if backend == 'aot_eager' else ''}; "
              f"the lab's {kind} defaults (preset, batch size, precision); flags `{' '.join(flags)}`, each run "
              f"limited to {timeout_s:g} s; {time.strftime('%Y-%m-%d')}. Reproduce: `python bench/model_sweep.py"
              f"{' --quick' if args.quick else ''}{' --tasks ' + ' '.join(args.tasks) if args.tasks else ''}"
              f"{' --backend ' + backend if args.backend else ''}` (the table holds every row of the results file "
              f"for this backend; a rerun resumes it).")
    print(header, file=sys.stderr)
    store = RunStore(Path(tempfile.mkdtemp(prefix="model-sweep-")) / "runs.sqlite")
    new = 0
    for model in models:
        for task in tasks:
            if (model, task, backend) in seen:
                continue
            if args.max_runs is not None and new >= args.max_runs:
                break
            row = run_pair(model, task, [*flags, *data["tasks"][task]], store, timeout_s)
            row["sweep_backend"] = backend
            row["side_by_side"] = n  # processes sharing the machine: n > 1 makes the timings not figures to quote
            new += 1
            done.append(row)
            with jsonl.open("a") as f:
                f.write(json.dumps(row) + "\n")
            what = (f"{row['speedup']:.2f}x compile {row['compile_s']:.1f} s" if row["status"] == "figure"
                    and row.get("speedup") is not None else f"{row['status']}: {row.get('reason', '')}")
            print(f"{model:36} {task:18} {row['wall_s']:6.1f} s  {what}", flush=True)
    # Read back: other parts append to the same file, and the table holds all of them.
    done = [json.loads(line) for line in jsonl.read_text().splitlines()] if jsonl.exists() else []
    rows = [r for r in done if r.get("sweep_backend") == backend]
    md.write_text(table(rows, machine, header))
    print(f"{jsonl}\n{md}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
