"""The start-up ladder: every way torch has to reach a model's first result, each in a fresh process.

    python -m tcore ladder --model captioner --preset tiny

Rungs, each a fresh Python process started here (tcore.worker.ladder_rung runs inside it):
  eager        no compile: the floor
  cold         torch.compile with fresh TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR: a first-ever start
  warm         torch.compile again with the cold rung's cache directories: a restart on the same machine (the
               Run page's cache=warm, whose shared folder a cold run fills once it has measured)
  mega_cache   fresh cache directories seeded with the compile artifacts the cold rung saved: the Mega-Cache
               (save_cache_artifacts, loaded with load_cache_artifacts) and, on the CPU, the C++ kernels it leaves
               out, the very bundle the Run page's runs save (tcore.worker.compile_artifacts): a new machine that
               ships its compile cache (the Run page's cache=artifacts, "artifacts loaded" on the Diagnose page)
  aot_compile  torch.compile(..., fullgraph=True).aot_compile(...) saved with save_compiled_function, loaded in a
               fresh process (fresh cache directories) with torch.compiler.load_compiled_function
  aoti         torch.export then an AOTInductor package (aoti_compile_and_package), loaded in a fresh process with
               aoti_load_package: inference only, where torch.export takes the model
The two artifact rungs build their artifact in a process of their own first (fresh caches too), so what making
it costs is shown beside what loading it saves. A rung this torch or this model cannot do says why.

A rung's "first result" is its whole start: the interpreter, the imports, the model's build, any artifact's load and
the first call. Its compile is the first call less one steady step: the figure the Run page calls compile time, which
leaves the imports and the build out (summary_words says both).
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

from tcore.host import processes
from tcore.lab.settings import private
from tcore.lab.settings.config import REPO_ROOT

# rung -> (title, its build step or None, its run step, which cache directories each gets)
# Cache directories are named: the same name is the same directories; "fresh" is new ones every time.
RUNGS: dict[str, dict[str, Any]] = {
    "eager": dict(title="eager first call", build=None, run="eager", caches="fresh"),
    "cold": dict(title="cold compile", build=None, run="cold", caches="local"),
    "warm": dict(title="warm local caches", build=None, run="warm", caches="local"),
    "mega_cache": dict(title="artifacts loaded (Mega-Cache)", build=None, run="mega_cache", caches="fresh"),
    "aot_compile": dict(title="aot_compile artifact loaded", build="aot_build", run="aot_load", caches="fresh"),
    "aoti": dict(title="AOTInductor package loaded", build="aoti_build", run="aoti_load", caches="fresh"),
}
# what a rung needs from an earlier one: warm reuses cold's caches, mega_cache loads what cold saved
NEEDS = {"warm": "cold", "mega_cache": "cold"}
LAUNCHED_AT = "COMPILE_LAB_LADDER_LAUNCHED_AT"


class LadderError(RuntimeError):
    """A step's process failed; the message has the end of its output."""


class Stopped(RuntimeError):
    """The person who started the climb stopped it; the step's process (and what it started) is gone."""


STOPPED_WORDS = "stopped by the person who started it"
POLL_S = 0.25  # how often a step's wait looks at its stop


def kill_group(proc: subprocess.Popen) -> None:
    """Kill a process started in a session of its own, with everything it started (Inductor's compile workers)."""
    processes.end_group(proc.pid)


def wait_or_stop(proc: subprocess.Popen, timeout_s: float | None,
                 stop: threading.Event | None) -> tuple[str, str]:
    """proc's (stdout, stderr) once it ends; its process group killed and Stopped raised as soon as `stop` is set,
    subprocess.TimeoutExpired past `timeout_s`."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        try:
            return proc.communicate(timeout=POLL_S)
        except subprocess.TimeoutExpired:
            stopped = stop is not None and stop.is_set()
            if stopped or (deadline is not None and time.monotonic() > deadline):
                kill_group(proc)
                proc.communicate()
                if stopped:
                    raise Stopped(STOPPED_WORDS) from None
                raise subprocess.TimeoutExpired(proc.args, timeout_s) from None


def run_step(step: str, spec_json: str, workdir: Path, cache_dir: Path, timeout_s: float | None, *,
             python: str | None = None, stop: threading.Event | None = None) -> dict[str, Any]:
    """One step in a fresh Python process (`python`, this one's interpreter unless given) whose Inductor and Triton
    caches live under `cache_dir`; `stop` set ends it at once (Stopped), its compile workers with it."""
    # PYTHONFAULTHANDLER: a step that dies of a signal (a segfault in a compiled artifact's loader, say) still says
    # where, as the Python stack faulthandler prints on its stderr, which the error below ends with.
    env = {**private.without_private(os.environ), "TORCHINDUCTOR_CACHE_DIR": str(cache_dir / "inductor"),
           "TRITON_CACHE_DIR": str(cache_dir / "triton"), LAUNCHED_AT: repr(time.time()), "PYTHONFAULTHANDLER": "1"}
    env.pop("TORCHINDUCTOR_FORCE_DISABLE_CACHES", None)  # the warm and artifact rungs are made of caches
    t0 = time.perf_counter()
    proc = subprocess.Popen([python or sys.executable, "-m", "tcore.worker.ladder_rung", step, spec_json, str(workdir)],
                            cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # its own group: a stop kills Inductor's compile workers too
    stdout, stderr = wait_or_stop(proc, timeout_s, stop)
    wall_s = time.perf_counter() - t0
    line = next((ln for ln in reversed(stdout.splitlines()) if ln.startswith("LADDER ")), None)
    if proc.returncode != 0 or line is None:
        tail = "\n".join((stdout + stderr).strip().splitlines()[-25:])
        raise LadderError(f"ladder step {step} {exit_words(proc.returncode)}:\n{tail}")
    return {**json.loads(line.removeprefix("LADDER ")), "process_wall_s": round(wall_s, 3)}


def exit_words(returncode: int) -> str:
    """How a step's process ended, in words: a signal by its name (-11 is a segmentation fault)."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"was killed by {name}" + (" (a segmentation fault: a crash in native code)" if name == "SIGSEGV"
                                          else "")
    return f"exited with {returncode}"


def climb(spec_json: str, rungs: list[str] | None = None, *, timeout_s: float | None = None,
          on_step: Callable[[str, dict[str, Any]], None] | None = None,
          step_runner: Callable[..., dict[str, Any]] = run_step,
          stop: threading.Event | None = None) -> dict[str, Any]:
    """Run the rungs in order (eager first: the others compare their output with its); return their steps' reports.
    `stop` set: the step under way ends at once, says so, and no later step starts."""
    rungs = rungs or list(RUNGS)
    unknown = [r for r in rungs if r not in RUNGS]
    if unknown:
        raise ValueError(f"unknown rung(s) {', '.join(unknown)}; choose from: {', '.join(RUNGS)}")
    order = ["eager"] + [r for r in RUNGS if r != "eager" and (r in rungs or any(NEEDS.get(x) == r for x in rungs))]
    steps: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="compile-lab-ladder-") as tmp:
        workdir, caches = Path(tmp), Path(tmp) / "caches"
        for i, rung in enumerate(order):
            how = RUNGS[rung]
            for step in filter(None, (how["build"], how["run"])):
                cache = caches / (how["caches"] if how["caches"] != "fresh" else f"fresh-{step}")
                if stop is not None and stop.is_set():
                    break
                try:
                    steps[step] = step_runner(step, spec_json, workdir, cache, timeout_s,
                                              **({"stop": stop} if stop is not None else {}))
                except Stopped:
                    steps[step] = {"step": step, "failed": STOPPED_WORDS}
                except subprocess.TimeoutExpired:
                    steps[step] = {"step": step, "failed": f"ran past the ladder's {timeout_s:.0f} s limit per step"}
                except LadderError as e:
                    steps[step] = {"step": step, "failed": str(e)}
                if on_step:
                    on_step(step, steps[step])
                if "unavailable" in steps[step] or "failed" in steps[step]:
                    break  # a rung whose build could not run has nothing to load
    return {"steps": steps, "rungs": summarize(steps, [r for r in order if r in rungs])}


def summarize(steps: dict[str, dict[str, Any]], rungs: list[str]) -> list[dict[str, Any]]:
    """One row per rung from its steps' reports: time to first result by phase, artifact, throughput against cold's.

    Pure arithmetic on what the steps measured (tested with made-up reports).
    """
    cold = steps.get("cold", {}).get("samples_per_s")
    rows = []
    for rung in rungs:
        how = RUNGS[rung]
        built, ran = steps.get(how["build"] or "", {}), steps.get(how["run"], {})
        row: dict[str, Any] = {"rung": rung, "title": how["title"]}
        why = next((s.get(k) for s in (built, ran) for k in ("unavailable", "failed") if s.get(k)), None)
        if why or not ran:
            row["unavailable"] = why or f"not run: it needs the {NEEDS.get(rung, 'eager')} rung"
            rows.append(row)
            continue
        phases = ran["phases"]
        row.update(first_result_s=phases.get("first_result_s"), phases=phases,
                   process_wall_s=ran.get("process_wall_s"), samples_per_s=ran.get("samples_per_s"),
                   step_ms=ran.get("step_ms"),
                   throughput_vs_cold=(round(ran["samples_per_s"] / cold, 4) if cold and ran.get("samples_per_s")
                                       else None),
                   artifact_bytes=ran.get("artifact_bytes") or ran.get("mega_cache_bytes"),
                   correctness_ok=ran.get("correctness_ok"),
                   correctness_max_abs_diff=ran.get("correctness_max_abs_diff"), notes=ran.get("notes", []),
                   compile_s=phases.get("first_call_extra_s"), cpp_kernels_built=ran.get("cpp_kernels_built"),
                   cpp_kernels_loaded=ran.get("cpp_kernels_loaded"))
        if built:
            row["build"] = {"phases": built["phases"], "process_wall_s": built.get("process_wall_s"),
                            "artifact_bytes": built.get("artifact_bytes")}
        rows.append(row)
    cold_first = next((r.get("first_result_s") for r in rows if r["rung"] == "cold"), None)
    for row in rows:
        if cold_first and row.get("first_result_s"):
            row["first_result_vs_cold"] = round(row["first_result_s"] / cold_first, 4)
    return rows


def machine_slug(device_name: str) -> str:
    """A short name for results files: h100, h200, a100 for those GPUs, else the device's name made file-safe."""
    found = re.search(r"\b([A-Z]\d{2,3})\b", device_name)
    if device_name != "cpu" and found:
        return found.group(1).lower()
    return re.sub(r"[^a-z0-9]+", "-", device_name.lower()).strip("-") or "unknown"


def text_table(result: dict[str, Any]) -> str:
    """The ladder as a plain table: one line per rung, then the reasons for the rungs that could not run."""
    lines = [f"{'rung':30} {'first result':>12} {'vs cold':>8} {'samples/s':>10} {'vs cold':>8} {'artifact':>10}  "
             "phases (s)"]
    for r in result["rungs"]:
        if "unavailable" in r:
            lines.append(f"{r['title']:30} {'-':>12}  {r['unavailable'].splitlines()[0]}")
            continue
        phases = phase_split(r["phases"], compiled=r["rung"] != "eager")
        size = f"{r['artifact_bytes'] / 1e6:.2f} MB" if r.get("artifact_bytes") else "-"
        ok = "" if r.get("correctness_ok") in (None, True) else "  OUTPUT DIFFERS FROM EAGER"
        lines.append(f"{r['title']:30} {r['first_result_s']:>10.2f} s {_x(r.get('first_result_vs_cold')):>8} "
                     f"{r['samples_per_s']:>10.1f} {_x(r.get('throughput_vs_cold')):>8} {size:>10}  {phases}{ok}")
        if r.get("build"):
            b = r["build"]["phases"]
            lines.append(f"{'  (making the artifact)':30} {r['build']['process_wall_s'] or 0:>10.2f} s  "
                         + phase_split(b))
    return "\n".join(lines)


# A step's phases (tcore.worker.ladder_rung) in words, in the order they happen. first_result_s, their sum, is said
# apart; first_call_extra_s is not a phase of its own but the part of the first call beyond one steady step.
PHASE_WORDS = {"interpreter_s": "interpreter", "imports_s": "imports", "build_s": "model build",
               "load_s": "loading the artifact", "export_s": "torch.export", "compile_s": "compiling",
               "first_call_s": "first call", "save_s": "saving the artifacts"}
COMPILE_WORDS = "compiling (the first call less one steady step)"


def phase_split(phases: dict[str, float], *, compiled: bool = True) -> str:
    """A step's phases in seconds, as it reported them when its process ended, in words: 'interpreter 0.05, imports
    3.10, model build 0.41, first call 25.02 (of it compiling 24.90)'. compiled=False (the eager rung): the first
    call's part beyond a steady step is its one-time set-up, not a compile (it read "of it compiling" for eager)."""
    extra = "compiling" if compiled else "one-time set-up"
    said = []
    for key, value in phases.items():
        if key in ("first_result_s", "first_call_extra_s") or not value:
            continue
        said.append(f"{PHASE_WORDS.get(key, key.removesuffix('_s').replace('_', ' '))} {value:.2f}")
        if key == "first_call_s" and phases.get("first_call_extra_s"):
            said[-1] += f" (of it {extra} {phases['first_call_extra_s']:.2f})"
    return ", ".join(said)


def summary_words(result: dict[str, Any]) -> list[str]:
    """A sentence per rung that ran, against the cold compile where there is one, each saying both figures: the whole
    first result (what a restarted service waits for) and the compile in it (the Run page's compile time); for the
    artifact rungs, what making and loading the artifact cost; and why a rung did not run."""
    rows = result.get("rungs", [])
    cold = next((r for r in rows if r["rung"] == "cold" and r.get("first_result_s")), None)
    said = [f"First result: from the process's start to the first output (interpreter, imports, model build, any "
            f"artifact's load and the first call). Compiling: the first call less one steady step, what the Run "
            f"page calls compile time; the imports and the build ({_imports_build(rows)}) come on top of it."]
    for r in rows:
        title = f"**{r['title']}**"
        if "unavailable" in r:
            said.append(f"{title} did not run: {r['unavailable'].splitlines()[0]}")
            continue
        first = r.get("first_result_s")
        if first is None:
            continue
        line = f"{title} reached its first result in {first:.1f} s"
        if r["rung"] == "eager":
            said.append(line + ", with nothing to compile: the floor every compiled start is measured against.")
            continue
        if cold is not None and r is not cold:
            cold_first = cold["first_result_s"]
            line += f" against the cold compile's {cold_first:.1f} s ({first / cold_first:.2f}x)"
        parts = []
        if r.get("compile_s") is not None:
            parts.append(f"compiling took {r['compile_s']:.1f} s" + (
                f" against cold's {cold['compile_s']:.1f} s" if cold is not None and r is not cold and
                cold.get("compile_s") is not None else ""))
        if r.get("phases", {}).get("load_s") is not None:
            size = f" {r['artifact_bytes'] / 1e6:.2f} MB" if r.get("artifact_bytes") else ""
            parts.append(f"loading its{size} artifact {r['phases']['load_s']:.1f} s")
        if r.get("cpp_kernels_built") is not None:
            n = r["cpp_kernels_built"]
            parts.append("no C++ kernel had to be built" if n == 0 else
                         f"{n} C++ kernel{'s' if n != 1 else ''} had to be built with the compiler")
        if r.get("build"):
            made = r["build"].get("process_wall_s")
            if made is not None:
                parts.append(f"making the artifact took {made:.1f} s in a process of its own, paid once")
        if cold is not None and r is not cold and r.get("throughput_vs_cold") is not None:
            parts.append(f"it then runs at {r['throughput_vs_cold']:.2f}x the cold compile's throughput")
        said.append(line + (": " + "; ".join(parts) if parts else "") + ".")
    return said


def _imports_build(rows: list[dict[str, Any]]) -> str:
    """The imports and build of the eager rung (else the first that ran), in seconds: 'about 4.2 s here'."""
    ran = [r for r in rows if r.get("phases")]
    if not ran:
        return "a few seconds"
    phases = next((r for r in ran if r["rung"] == "eager"), ran[0])["phases"]
    return f"about {sum(phases.get(k, 0.0) for k in ('interpreter_s', 'imports_s', 'build_s')):.1f} s here"


def _x(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}x"


# --- the command line: `python -m tcore ladder` ---------------------------------------------------------------------
def add_command(sub, parents, open_store) -> None:
    """The `ladder` subcommand of python -m tcore (tcore.cli adds it here, so its options live beside the code).
    `open_store(path)` is the command line's way to its store: the lab is handed one, never opens one itself."""
    p = sub.add_parser("ladder", parents=parents, help="time every way to a model's first result (start-up ladder)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    p.set_defaults(func=functools.partial(cmd_ladder, open_store=open_store))


def add_arguments(p, many_models: bool = False) -> None:
    if many_models:  # a benchmark sitting: one ladder per model
        p.add_argument("--model", action="append", dest="models", default=None,
                       help="a built-in model or SOURCE:NAME, as for `run`; repeat it for several (default: captioner)")
    else:
        p.add_argument("--model", default="captioner", help="a built-in model or SOURCE:NAME, as for `run`")
    p.add_argument("--preset", default=None, help="default: what a practitioner would pick for the device")
    p.add_argument("--batch-size", type=int, default=None, help="default: the model's default for the device")
    p.add_argument("--precision", default=None, help="default: bf16 on a GPU, fp32 on the CPU")
    p.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"])
    p.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument("--rungs", default=",".join(RUNGS), help=f"comma-separated, from: {', '.join(RUNGS)}")
    p.add_argument("--timed-s", type=float, default=2.0, help="seconds of steady-state steps timed per rung")
    p.add_argument("--timeout", type=float, default=1800.0, help="the most seconds one step's process may take")
    if not many_models:  # a sitting writes one file per model itself
        p.add_argument("--json", dest="json_out", default=None, help="also write the whole result to this file")


def spec_from_args(args) -> str:
    from tcore.experiment.device import practical_defaults
    from tcore.experiment.spec import Experiment
    from tcore.lab.run.runs import preflight

    base = Experiment(model=args.model, device=args.device)
    device, _ = preflight(base)
    picked = practical_defaults(args.model, device, "inference")
    given = {"preset": args.preset, "batch_size": args.batch_size, "precision": args.precision,
             "channels_last": args.channels_last}
    values = {**picked, **{k: v for k, v in given.items() if v is not None}}
    return Experiment(model=args.model, device=device, task="inference", timed_s=args.timed_s, **values).to_json()


def cmd_ladder(args, open_store) -> int:
    from tcore.experiment.spec import SpecError

    if args.model.startswith("file:"):  # the command line always takes a model file, as `run` does
        from sample_models.sources import file_model
        from tcore.lab.outputs import model_files

        args.model = file_model(args.model)  # the rungs run in the lab's folder, not this one
        model_files.install(open_store(args.db), files_allowed=lambda: True, time_limit_s=args.timeout)
    try:
        spec_json = spec_from_args(args)
    except SpecError as e:
        print(f"invalid experiment: {e}", file=sys.stderr)
        return 2
    result = ladder(spec_json, [r for r in args.rungs.split(",") if r], timeout_s=args.timeout)
    print(text_table(result))
    print("\n".join(line.replace("**", "") for line in summary_words(result)))
    if args.json_out:
        Path(args.json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_out).write_text(json.dumps(result, indent=2))
        print(f"written: {args.json_out}", file=sys.stderr)
    return 0 if all("failed" not in s for s in result["steps"].values()) else 1


def ladder(spec_json: str, rungs: list[str] | None = None, *, timeout_s: float | None = None,
           on_step: Callable[[str, dict[str, Any]], None] | None = None,
           stop: threading.Event | None = None) -> dict[str, Any]:
    """climb() with a progress line per step (on stderr, unless on_step takes each step's report instead: the
    Diagnose page's, tcore.lab.probes), and what the result was measured with."""
    def said(step: str, report: dict[str, Any]) -> None:
        why = report.get("unavailable") or report.get("failed")
        what = why.splitlines()[0] if why else f"{report.get('process_wall_s', 0):.1f} s"
        print(f"  {step}: {what}", file=sys.stderr, flush=True)

    spec = json.loads(spec_json)
    if on_step is None:
        print(f"start-up ladder: {spec['model']}/{spec['preset']} bs{spec['batch_size']} {spec['precision']}",
              file=sys.stderr, flush=True)
    result = climb(spec_json, rungs, timeout_s=timeout_s, on_step=on_step or said, stop=stop)
    first = next((s for s in result["steps"].values() if "device" in s), {})
    device_name = first.get("device_name", "cpu")
    return {"spec": spec, "device": first.get("device"), "device_name": device_name, "torch": first.get("torch"),
            "machine": machine_slug(device_name), "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            **result}
