"""The worker process: imports torch and the engine, then reads one experiment on stdin, runs it, writes events.

Started by tcore.lab.launch.launcher as `python -m tcore.worker`, or on the CPU forked from the fork server
(tcore.worker.forkserver), which has done the imports below once. Events go to the stdout it was started
with; everything else that writes to stdout (torch, g++, user prints) is sent to stderr, the log.

It imports first and reads second, so the lab side can start one ahead of time as a spare
(tcore.lab.launch.launcher.SparePool): the imports are paid while nobody waits, nothing is compiled, and
the compile it later times is as cold as ever. What it reads (protocol.envelope) is the experiment
and the environment the run needs beyond what the process started with (its artifact and profiler
trace paths, the shared caches of a warm run), one line; where other runs share the device, the lab's grants of
it follow on the same stdin (tcore.worker.device_lease). Empty stdin means the spare was not needed: it exits quietly.
"""
from __future__ import annotations

import os
import select
import shutil
import sys
import time
import traceback
from collections.abc import Callable


def _event_stream():
    """Keep the real stdout for events and point file descriptor 1 at stderr for everything else."""
    events_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    return os.fdopen(events_fd, "w", buffering=1)


def classify(exc: BaseException) -> str:
    """The error kind of an exception raised inside the worker (see tcore.experiment.protocol.ERROR_KINDS)."""
    import torch

    from tcore.experiment.spec import SpecError
    from tcore.worker.build import CompilePhaseError

    if isinstance(exc, SpecError):
        return "invalid_spec"
    if isinstance(exc, (torch.OutOfMemoryError, MemoryError)):
        return "oom"
    if isinstance(exc, CompilePhaseError):
        return "compile_error"
    return "crashed"


def compile_phase(exc: BaseException) -> str:
    """Which part of torch.compile failed: "tracing" (Dynamo, including a graph break under fullgraph)
    or "backend" (AOT autograd or Inductor's code generation, which Dynamo wraps as BackendCompilerFailed)."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & {"BackendCompilerFailed", "InductorError", "LoweringException", "CppCompileError"}:
        return "backend"
    return "tracing"


def prepare_for_fork() -> None:
    """The imports every run pays before its model is built: torch, the engine, the models, and the Inductor
    modules that the compile diagnostics hook into. Nothing here compiles or touches CUDA, so a process that has
    done them may fork workers (tcore.worker.forkserver) whose compiles stay cold."""
    import torch  # noqa: F401
    from torch._inductor.graph import GraphLowering  # noqa: F401  (imported by diagnostics.generated_code)

    import sample_models
    from tcore.worker import measurement  # noqa: F401

    sample_models.sources.go_offline()  # said here too: a worker never reaches for the Hugging Face hub


def prepare() -> None:
    """What every run pays before its model is built, done before the experiment arrives: the imports, and
    CUDA's start on the slot's GPU. All of it comes before the first timed phase in any case, so doing it early
    changes no figure."""
    import torch

    prepare_for_fork()
    if torch.cuda.is_available():
        torch.cuda.init()


def while_idle(run_waiting: Callable[[], bool]) -> None:
    """What a spare does with its wait before it says it is ready, so that its run need not: start the profiler
    once (CPU) and import the model libraries the real models are built with. Neither compiles anything, so the
    run's compile stays as cold as ever. Each step is a second or two; a run that arrives stops what is left
    (`run_waiting()`), so it waits for one step at most. What they print (kineto's lines, import warnings) goes to
    /dev/null: the log's first line says whether the imports are done (tcore.lab.launch.launcher.Worker.ready)."""
    saved = [os.dup(1), os.dup(2)]
    null = os.open(os.devnull, os.O_WRONLY)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(null, 1)
    os.dup2(null, 2)
    try:
        for step in (warm_profiler, *[lambda name=name: _import_quietly(name) for name in MODEL_LIBRARIES]):
            if run_waiting():
                return
            step()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, null):
            os.close(fd)


# The libraries the real models are built with (sample_models.sources), imported by a run that builds one of them:
# a second or so for transformers and timm together. transformers' top level is lazy: the first hf: spec a run reads
# imports its model classes, and modeling_utils, modeling_layers and modeling_auto are most of the seconds reading an
# hf:gpt2 spec takes, so those come too. diffusers (seconds more, only for Flux) does not.
MODEL_LIBRARIES = ("torchvision.models", "timm", "transformers", "transformers.modeling_utils",
                   "transformers.modeling_layers", "transformers.models.auto.modeling_auto")


def _import_quietly(name: str) -> None:
    """Import `name` if installed; one that fails to import is left for the run that needs it to report (its error
    then names the model)."""
    import importlib
    import importlib.util

    try:
        if importlib.util.find_spec(name.partition(".")[0]) is not None:
            importlib.import_module(name)
    except Exception as e:  # noqa: BLE001 (the run that builds such a model says what is wrong)
        print(f"compile-lab worker: importing {name} ahead of a run failed ({type(e).__name__}: {e}); a run that "
              "builds such a model will say so", file=sys.stderr, flush=True)


def warm_profiler() -> None:
    """Start and stop the profiler once, with nothing in it: its first session pays a one-off start (kineto's,
    seconds on a CPU) that the run's profiling pass would pay otherwise, inside the run. Done only while nobody
    waits (a spare with no run yet): a worker whose run is already there leaves it to the profiling pass. CPU only:
    on a GPU the profiler attaches CUPTI, which is left to the profiling pass after the timed blocks.
    Not in the fork server (prepare_for_fork): its children would inherit a started profiler without its threads."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    if torch.cuda.is_available():
        return
    with profile(activities=[ProfilerActivity.CPU]):
        pass


def freeze_imports() -> int:
    """Take what the imports made out of the cyclic collector's sight (gc.freeze): it lives as long as the process,
    and about 400,000 objects (torch, Inductor, the models' libraries) made each full collection cost 0.24 s of a
    core here, the one before the timed rounds (tcore.worker.timing.no_gc) and those that Dynamo's allocations set
    off while compiling. A collection now scans only what the run makes. The fork server freezes its imports too,
    before it forks (Python's gc docs: a forked child's collections then leave the parent's pages unwritten).
    How many objects are frozen now."""
    import gc

    gc.freeze()
    return gc.get_freeze_count()


def after_fork() -> None:
    """In a worker forked from the fork server, once its environment is the run's: torch read TORCH_TRACE and
    TORCH_LOGS when the server imported it, so it reads them again (tcore.worker.forkserver checks these exist)."""
    import torch._logging._internal as torch_logs

    torch_logs.LOG_TRACE_HANDLER = None  # a singleton made at import, for the server's (absent) TORCH_TRACE
    torch_logs._init_logs()


def main() -> int:
    from tcore.experiment import protocol
    from tcore.experiment.protocol import EventWriter

    events = _event_stream()
    failed_import = None
    begun = ready = time.perf_counter()
    try:
        prepare()
        from sample_models.sources import file_models

        file_models.allow_imports()  # a worker is where a model file's code runs (never the lab's own process)
        from tcore.experiment.spec import Experiment
        from tcore.worker import measurement as runner

        # a spare with no run yet uses its wait; a worker started for a run (whose run may be a moment from its
        # stdin) goes straight to it
        if os.environ.get(protocol.SPARE_WORKER) == "1":
            while_idle(lambda: bool(select.select([sys.stdin], [], [], 0)[0]))
        frozen = freeze_imports()
        ready = time.perf_counter()
        print(f"{protocol.READY} in {ready - begun:.1f} s; {frozen} objects of its imports frozen", file=sys.stderr,
              flush=True)
    except BaseException as exc:  # reported once there is a run to report it for
        failed_import = exc
    text = sys.stdin.readline()
    # For the run's timeline (tcore.lab.run.runclock): how long the imports took and how long this process then waited.
    startup = {"imports_s": round(ready - begun, 4), "ready_wait_s": round(time.perf_counter() - ready, 4)}
    if not text.strip():  # a spare that was not needed (the lab process ended, or let it go): its folder goes too
        if folder := os.environ.get(protocol.WORKER_DIR):
            shutil.rmtree(folder, ignore_errors=True)
        return 0
    emit = EventWriter(events)  # its clock starts with the run, not with the spare
    exp = None
    try:
        if failed_import is not None:
            raise failed_import
        spec, env = protocol.open_envelope(text)
        os.environ.update(env)  # all read at run time: cache dirs, artifact and profiler trace paths
        exp = Experiment.from_json(spec)
        outcome = runner.run(exp, emit, startup, answers=sys.stdin)
    except BaseException as exc:  # every failure becomes an error event with its kind and traceback
        traceback.print_exception(exc)  # also into the log
        emit(error_event(exc, exp, began=failed_import is None))
        return 1
    emit({"type": "result", **outcome})
    return 0


def error_event(exc: BaseException, exp, *, began: bool) -> dict:
    """The error event for a failed run: its kind, a message that says what the lab knows (once the run began: its
    phase, the op, the inputs; tcore.worker.failures), and the raw traceback beside it."""
    from tcore.experiment.protocol import error

    kind = classify(exc)
    cause = exc.__cause__ or exc
    known = {}
    if began:
        from tcore.worker import failures

        known = failures.explain(exc)
        if kind == "compile_error" and not failures.is_cuda_error(cause):
            from tcore.worker.diagnostics import explain_compile_error

            known["message"] = explain_compile_error(cause)  # Dynamo's full text stays in the traceback
        elif kind in ("invalid_spec", "oom"):  # their own words say it all
            known["message"] = str(exc).strip() or type(exc).__name__
        if exp is not None and failures.is_cuda_error(cause):
            try:
                known["cpu_rerun"] = failures.cpu_rerun(exp)
            except Exception as rerun_exc:  # noqa: BLE001 (a help; the run's own error comes first)
                known["cpu_rerun"] = ("The rerun on the CPU could not be done "
                                      f"({type(rerun_exc).__name__}: {rerun_exc}).")
            known["message"] = known["message"].replace("The raw traceback", known["cpu_rerun"] + " The raw traceback")
    message = known.pop("message", None) or str(exc).strip() or type(exc).__name__
    return error(kind, message, exception=type(cause).__name__, **known,
                 **({"compile_phase": compile_phase(cause)} if kind == "compile_error" else {}),
                 traceback="".join(traceback.format_exception(exc, limit=-12)))


def leave(code: int) -> None:
    """Exit without torch's teardown (Inductor's compile pool, CUDA), which only costs time: the run
    is over and its result sent. The lab side then ends whatever is left of the process group."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    leave(main())
