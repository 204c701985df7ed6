"""Limits an instructor sets for a shared machine, and the check that refuses a run past them before it queues.

Set them in `compile-lab.toml` (in the working directory, or the file named by $COMPILE_LAB_CONFIG):

    [limits]
    max_run_s = 600               # a run past this is stopped and recorded as "timeout"
    max_batch_size = 64           # "none": no limit
    max_memory_gib = 40           # estimated memory per run; "none": only the device's own memory
    max_queued_per_session = 3    # runs one participant may have waiting at once
    max_new_people_per_address = 5  # new participants (owner ids) one network address may start in NEW_PEOPLE_WINDOW_H

    [instructor]
    passcode = "change-me"        # unlocks the instructor's actions in the app (System page)

or in the environment, which wins over the file: COMPILE_LAB_MAX_RUN_S, COMPILE_LAB_MAX_BATCH_SIZE,
COMPILE_LAB_MAX_MEMORY_GIB, COMPILE_LAB_MAX_QUEUED_PER_SESSION, COMPILE_LAB_MAX_NEW_PEOPLE_PER_ADDRESS,
COMPILE_LAB_INSTRUCTOR_PASSCODE.
The instructor can change the limits in the app; those win over both, until reset. They are read at
every submission, so a change applies to the next run without a restart.
"""
from __future__ import annotations

import functools
import math
import os
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import psutil

from tcore.experiment.comparable import compile_key
from tcore.experiment.spec import Experiment, SpecError
from tcore.host import machine
from tcore.lab.launch import cluster
from tcore.lab.policy.memory import estimate_memory_gib
from tcore.lab.settings.config import LimitsError
from tcore.lab.settings.config import read as _config
from tcore.store import RunStore


class TooBig(SpecError):
    """A run refused for memory: its estimate is past the device's memory or the lab's limit per run (a smaller
    preset or batch may fit)."""


INSTRUCTOR_LIMITS = "limits"  # the key, in the store's lab_state, of the limits the instructor set in the app
BY_INSTRUCTOR = "the instructor, in the app"  # a limit's origin when the instructor set it
ENV = {
    "max_run_s": "COMPILE_LAB_MAX_RUN_S",
    "max_batch_size": "COMPILE_LAB_MAX_BATCH_SIZE",
    "max_memory_gib": "COMPILE_LAB_MAX_MEMORY_GIB",
    "max_queued_per_session": "COMPILE_LAB_MAX_QUEUED_PER_SESSION",
    "max_new_people_per_address": "COMPILE_LAB_MAX_NEW_PEOPLE_PER_ADDRESS",
}
# field -> (type, may be None, the largest value allowed, what a valid value is). The largest values are far past
# any real need: a number beyond them is a mistake (1e400 is infinity, which would switch the limit off unasked).
_RULES = {
    "max_run_s": (float, False, 7 * 24 * 3600, "a positive number of seconds, at most 604800 (a week)"),
    "max_batch_size": (int, True, 1_000_000, "a whole number from 1 to 1000000, or \"none\" for no limit"),
    "max_memory_gib": (float, True, 100_000, "a positive number of GiB, at most 100000, or \"none\" for no limit"),
    "max_queued_per_session": (int, False, 10_000, "a whole number from 1 to 10000"),
    "max_new_people_per_address": (int, False, 10_000, "a whole number from 1 to 10000"),
}


@dataclass(frozen=True)
class Limits:
    # a quarter of an hour: a cold compile of the largest preset fits; a hung run does not hold the room for long
    max_run_s: float = 900.0
    max_batch_size: int | None = 1024
    max_memory_gib: float | None = None  # None: a run may use up to the device's memory
    max_queued_per_session: int = 5
    # A participant is an id a fresh tab can mint (a made-up ?me=, a private window): without a bound on new ones per
    # address, max_queued_per_session bounds nothing. A person makes one to three in a day (a browser, a private
    # window, a second browser); a room behind one NAT address needs one per person (NewPeopleGuard).
    max_new_people_per_address: int = 5
    # field -> where its value came from ("default", a file path, an environment variable), for messages
    origin: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        for name, (kind, optional, largest, valid) in _RULES.items():
            value = getattr(self, name)
            if value is None and optional:
                continue
            ok_type = isinstance(value, (int, float)) if kind is float else isinstance(value, int)
            # `0 < value <= largest` is False for nan and for infinity of either sign
            if isinstance(value, bool) or not ok_type or not 0 < value <= largest:
                raise LimitsError(f"{name} = {value!r}{self._from(name)}: it must be {valid}")

    def _from(self, name: str) -> str:
        where = self.origin.get(name, "default")
        return "" if where == "default" else f" (from {where})"

    def describe(self, name: str) -> str:
        """'max_batch_size = 64 (from compile-lab.toml)', for messages that say what to change."""
        return f"{name} = {getattr(self, name)}{self._from(name)}"

    def set_by(self, name: str) -> str:
        """Who set a limit, for a sentence: 'the instructor', 'compile-lab.toml', 'COMPILE_LAB_MAX_RUN_S' or 'the
        lab's default'."""
        where = self.origin.get(name, "default")
        return {BY_INSTRUCTOR: "the instructor", "default": "the lab's default"}.get(where, where)

    def run_time(self, requested_s: float | None) -> tuple[float, str | None]:
        """The time limit a run gets: the one asked for, at most max_run_s; and a note when it was lowered.

        SpecError for a limit no run can keep: zero, negative, nan."""
        if requested_s is not None and not (isinstance(requested_s, (int, float)) and math.isfinite(requested_s)
                                            and requested_s > 0):
            raise SpecError(f"the time limit must be a positive number of seconds (at most this lab's "
                            f"{self.describe('max_run_s')}), not {requested_s!r}")
        if requested_s is None or requested_s <= self.max_run_s:
            return (self.max_run_s if requested_s is None else requested_s), None
        return self.max_run_s, (f"time limit lowered from {requested_s:g} s to this lab's maximum run time "
                                f"({self.describe('max_run_s')})")


def load(environ: Mapping[str, str] | None = None, cwd: str | Path | None = None,
         store: RunStore | None = None) -> Limits:
    """Defaults, overridden by the config file, then the environment, then what the instructor set in the app."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    origin: dict[str, str] = {}
    config, path = _config(environ, cwd)
    table = config.get("limits", {})
    unknown = sorted(set(table) - set(_RULES))
    if unknown:
        raise LimitsError(f"{path}: unknown setting(s) in [limits]: {', '.join(unknown)}; known: {', '.join(_RULES)}")
    for name, value in table.items():
        values[name], origin[name] = _parse(name, value, str(path)), str(path)
    for name, var in ENV.items():
        if environ.get(var, "").strip():
            values[name], origin[name] = _parse(name, environ[var], var), var
    instructor = (store.lab.lab_state(INSTRUCTOR_LIMITS) if store is not None else None) or {}
    for name, value in instructor.items():
        if name in _RULES:
            values[name], origin[name] = value, BY_INSTRUCTOR
    return Limits(**values, origin=origin)


def set_by_instructor(store: RunStore, values: dict[str, Any] | None) -> Limits:
    """Store the limits the instructor chose in the app (None: back to the file and environment); returns
    the limits now in force. Raises LimitsError, naming the setting, for a value that is not allowed."""
    if values is None:
        store.lab.set_lab_state(INSTRUCTOR_LIMITS, None)
        return load(store=store)
    unknown = sorted(set(values) - set(_RULES))
    if unknown:
        raise LimitsError(f"unknown limit(s): {', '.join(unknown)}; known: {', '.join(_RULES)}")
    Limits(**values)  # checks each value before anything is stored
    store.lab.set_lab_state(INSTRUCTOR_LIMITS, values)
    return load(store=store)


def _parse(name: str, value: Any, where: str) -> Any:
    kind, optional, _, valid = _RULES[name]
    if isinstance(value, str):
        text = value.strip().lower()
        if optional and text in ("none", "off"):
            return None
        try:
            if not text.isascii() or "_" in text:  # int() and float() take "٣", "２" and "1_000" too
                raise ValueError(text)
            return kind(text)
        except ValueError:
            raise LimitsError(f"{name} = {value!r} (from {where}): it must be {valid}") from None
    return value  # TOML numbers; Limits.__post_init__ checks them


def queue_full_message(waiting: int, limits: Limits) -> str:
    return (f"you already have {waiting} run(s) waiting in the queue, this lab's limit per session "
            f"({limits.describe('max_queued_per_session')}); wait for one to start, or cancel one, then submit again")


def check(exp: Experiment, device: str, owner: str | None, store: RunStore, limits: Limits | None = None, *,
          time_limit_s: float | None = None, from_app: bool = False) -> float | None:
    """Every check of the lab's policy on a run about to be queued, made once: a `file:` model from the app
    (check_app_model), the batch size, the memory of `device` (cpu or cuda) and the lab's memory limit, the
    owner's queue, and whether it can finish within `time_limit_s` (check_duration; None: not checked). Refuses,
    with what to change; returns the memory estimate in GiB (None where it cannot be made), which the queue uses to
    decide whom it may share a GPU with.

    `owner` None (the command line, a sweep's own runs) has no per-session queue limit.
    """
    limits = load() if limits is None else limits
    if from_app:
        check_app_model(exp.model)
    need_gib = _check_size(exp, device, owner, store, limits)
    if time_limit_s is not None:
        check_duration(exp, device, time_limit_s, store, limits)
    return need_gib


def _check_size(exp: Experiment, device: str, owner: str | None, store: RunStore, limits: Limits) -> float | None:
    if limits.max_batch_size is not None and exp.batch_size > limits.max_batch_size:
        raise SpecError(f"batch_size {exp.batch_size} is over this lab's limit ({limits.describe('max_batch_size')}); "
                        f"choose a batch size of at most {limits.max_batch_size}")
    try:
        need_gib = estimate_memory_gib(exp)
    except NotImplementedError:  # an op with no meta kernel: no estimate, so only the run's own OOM guard applies
        _check_queue(owner, store, limits)
        return None
    what = "weights, gradients, AdamW state and activations" if exp.task == "training" else "weights and activations"
    have_gib, device_memory = device_memory_gib(device)
    if have_gib is not None and need_gib > have_gib:
        raise TooBig(f"this run needs an estimated {need_gib:.3g} GiB ({what}), more than the {have_gib:.3g} GiB "
                        f"{device_memory}; choose a smaller batch_size or preset")
    if limits.max_memory_gib is not None and need_gib > limits.max_memory_gib:
        raise TooBig(f"this run needs an estimated {need_gib:.3g} GiB ({what}), over this lab's limit per run "
                        f"({limits.describe('max_memory_gib')}); choose a smaller batch_size or preset")
    _check_queue(owner, store, limits)
    return need_gib


def minimum_run_s(exp: Experiment, typical_compile_s: float | None = None) -> tuple[float, str]:
    """A lower bound on how long a run of `exp` takes, in s, and its sum in words.

    The timed stage of each variant, and the compile time similar runs took (when known). Starting the
    worker (its imports, seconds), warm-up and profiling come on top, so a run whose
    bound is past its time limit cannot finish.
    """
    variants = 2 if exp.has_compiled_variant else 1
    parts = []
    if exp.timed_steps is None:
        parts.append((variants * exp.timed_s, f"{variants} × {exp.timed_s:g} s timed"))
    if typical_compile_s:
        parts.append((typical_compile_s, f"{typical_compile_s:.0f} s of compiling, as similar runs took"))
    return sum(s for s, _ in parts), " + ".join(words for _, words in parts) or "nothing timed by the clock"


def typical_compile_s(exp: Experiment, device: str, store: RunStore, recent: int = 5) -> float | None:
    """The median compile time of the latest finished runs that compiled what `exp` compiles from the same kind of
    cache (cold, warm, artifacts), or None. A warm start or loaded artifacts take a fraction of a cold compile: a run
    from artifacts was refused on its cold runs' compile time, a bound it never comes near."""
    key = compile_key(exp.to_dict(), device)
    times = [r.result["compile_s"] for r in store.list(limit=200)
             if r.status == "finished" and r.result.get("compile_s") is not None and r.spec.get("cache") == exp.cache
             and compile_key(r.spec, r.device or device) == key][:recent]
    return statistics.median(times) if times else None


def check_duration(exp: Experiment, device: str, time_limit_s: float, store: RunStore, limits: Limits) -> None:
    """Refuse, with the numbers, a run that cannot finish within its time limit."""
    need_s, parts = minimum_run_s(exp, typical_compile_s(exp, device, store))
    if need_s > time_limit_s:
        raise SpecError(f"this run needs at least {need_s:.0f} s ({parts}), more than its time limit of "
                        f"{time_limit_s:g} s (this lab's {limits.describe('max_run_s')}); lower the timed seconds "
                        "or the rounds' total, or raise the limit")


def _check_queue(owner: str | None, store: RunStore, limits: Limits) -> None:
    if owner is not None and (waiting := store.queue.queued_count(owner)) >= limits.max_queued_per_session:
        raise SpecError(queue_full_message(waiting, limits))


def device_memory_gib(device: str) -> tuple[float | None, str]:
    """(GiB a run may use on `device`, what that figure is, in words); None where it is not known here."""
    if device == "cuda" and cluster.configured():  # the GPUs are the cluster's, whose memory Ray does not report
        return None, "unknown on the cluster's GPUs: only the run's own out-of-memory guard applies"
    if device == "cpu":
        return psutil.virtual_memory().available / 2**30, "of RAM available on this machine now"
    return _gpu_memory_gib(), "of memory on this machine's smallest GPU"


@functools.cache
def _gpu_memory_gib() -> float:
    gpus, _ = machine.gpus()  # NVML: asking torch would create a CUDA context in the app's process
    if gpus:
        return min(g["memory_total_gib"] for g in gpus)
    import torch

    return min(torch.cuda.get_device_properties(i).total_memory for i in range(torch.cuda.device_count())) / 2**30


FILES_OFF = ("Models from your own file (file:PATH.py) run that file's code on this server, so the app allows them "
             "only where the lab's configuration says so: put `[models]` `allow_files = true` in compile-lab.toml. "
             "The command line (python -m tcore run --model file:PATH.py) always allows them.")


def files_allowed(environ: Mapping[str, str] | None = None, cwd: str | Path | None = None) -> bool:
    """Whether the app may run `file:` models: `allow_files = true` under [models] in compile-lab.toml."""
    environ = os.environ if environ is None else environ
    value = _config(environ, cwd)[0].get("models", {}).get("allow_files", False)
    if not isinstance(value, bool):
        raise LimitsError(f"[models] allow_files must be true or false, not {value!r}")
    return value


def check_app_model(model: str) -> None:
    """Refuse a `file:` model in the app unless the lab allows it: the one gate every run the app queues passes
    (the Run and Sweep pages, Diagnose, a suggestion's counterpart), since the file's code runs on this server."""
    if model.startswith("file:") and not files_allowed():
        raise SpecError(FILES_OFF)
