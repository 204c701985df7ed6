"""The worker process: reads one experiment (JSON) on stdin, runs it, writes events as JSON lines.

Started by tcore.launcher as `python -m tcore.worker`. Events go to the stdout it was started with;
everything else that writes to stdout (torch, g++, user prints) is sent to stderr, the log.
"""
from __future__ import annotations

import os
import sys
import traceback


def _event_stream():
    """Keep the real stdout for events and point file descriptor 1 at stderr for everything else."""
    events_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    return os.fdopen(events_fd, "w", buffering=1)


def classify(exc: BaseException) -> str:
    """The error kind of an exception raised inside the worker (see tcore.events.ERROR_KINDS)."""
    import torch

    from tcore.worker.build import CompilePhaseError
    from tcore.spec import SpecError

    if isinstance(exc, SpecError):
        return "invalid_spec"
    if isinstance(exc, (torch.OutOfMemoryError, MemoryError)):
        return "oom"
    if isinstance(exc, CompilePhaseError):
        return "compile_error"
    return "crashed"


def main() -> int:
    from tcore.protocol import EventWriter, error

    emit = EventWriter(_event_stream())
    try:
        from tcore.worker import run as runner
        from tcore.spec import Experiment

        exp = Experiment.from_json(sys.stdin.read())
        outcome = runner.run(exp, emit)
    except BaseException as exc:  # every failure becomes an error event with its kind and traceback
        traceback.print_exc()  # also into the log
        kind = classify(exc)
        if kind == "compile_error":
            from tcore.worker.diagnostics import explain_compile_error

            message = explain_compile_error(exc.__cause__ or exc)  # Dynamo's full text stays in the traceback
        else:
            message = str(exc).strip() or type(exc).__name__
        emit(error(kind, message, exception=type(exc.__cause__ or exc).__name__,
                   traceback=traceback.format_exc(limit=-12)))
        return 1
    emit({"type": "result", **outcome})
    return 0


if __name__ == "__main__":
    sys.exit(main())
