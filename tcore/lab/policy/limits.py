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

import collections
import functools
import hashlib
import hmac
import ipaddress
import logging
import math
import os
import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from tcore.experiment.comparable import compile_key
from tcore.experiment.spec import Experiment, SpecError
from tcore.host import machine
from tcore.lab.launch import cluster
from tcore.lab.policy.memory import estimate_memory_gib
from tcore.lab.settings.config import LimitsError
from tcore.lab.settings.config import read as _config
from tcore.lab.settings.private import PASSCODE_ENV
from tcore.store import RunStore


class TooBig(SpecError):
    """A run refused for memory: its estimate is past the device's memory or the lab's limit per run (a smaller
    preset or batch may fit)."""


INSTRUCTOR_LIMITS = "limits"  # the key, in the store's lab_state, of the limits the instructor set in the app
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
    instructor = (store.lab_state(INSTRUCTOR_LIMITS) if store is not None else None) or {}
    for name, value in instructor.items():
        if name in _RULES:
            values[name], origin[name] = value, "the instructor, in the app"
    return Limits(**values, origin=origin)


def set_by_instructor(store: RunStore, values: dict[str, Any] | None) -> Limits:
    """Store the limits the instructor chose in the app (None: back to the file and environment); returns
    the limits now in force. Raises LimitsError, naming the setting, for a value that is not allowed."""
    if values is None:
        store.set_lab_state(INSTRUCTOR_LIMITS, None)
        return load(store=store)
    unknown = sorted(set(values) - set(_RULES))
    if unknown:
        raise LimitsError(f"unknown limit(s): {', '.join(unknown)}; known: {', '.join(_RULES)}")
    Limits(**values)  # checks each value before anything is stored
    store.set_lab_state(INSTRUCTOR_LIMITS, values)
    return load(store=store)


def instructor_passcode(environ: Mapping[str, str] | None = None, cwd: str | Path | None = None) -> str | None:
    """The passcode that unlocks instructor actions: $COMPILE_LAB_INSTRUCTOR_PASSCODE, else
    `passcode` under [instructor] in compile-lab.toml; None when neither is set (nobody has them)."""
    environ = os.environ if environ is None else environ
    if environ.get(PASSCODE_ENV, "").strip():
        return environ[PASSCODE_ENV].strip()
    code = _config(environ, cwd)[0].get("instructor", {}).get("passcode")
    if code is not None and not isinstance(code, (str, int)) or isinstance(code, bool):
        raise LimitsError(f"[instructor] passcode must be text in quotes, not {type(code).__name__}")
    return str(code).strip() or None if code is not None else None


def is_instructor(attempt: str | None, environ: Mapping[str, str] | None = None, cwd: str | Path | None = None) -> bool:
    """Whether `attempt` is the instructor passcode; False when none is set.

    Compared as SHA-256 digests with hmac.compare_digest: the time taken says nothing of how much of the
    attempt was right, nor of the passcode's length."""
    code = instructor_passcode(environ, cwd)
    if not (code and attempt):
        return False
    return hmac.compare_digest(hashlib.sha256(code.encode()).digest(), hashlib.sha256(attempt.strip().encode()).digest())


LOOPBACK = ("127.0.0.1", "::1", "localhost")


THIS_MACHINE = "this machine"  # a try with no address: the server's own machine (loopback), as logs and the panel say


class PasscodeGuard:
    """Slows down guessing the instructor passcode, per browser session and per network address, and counts the
    wrong tries for the instructor.

    A session gets `free` wrong tries; after that each wrong try makes it wait twice as long as the one before
    (`first_wait_s`, then double, up to `longest_wait_s`). An address (a new tab is a new session, not a new
    address) gets `free_per_address` wrong tries over all its sessions, then waits the same way. A try refused
    for waiting is refused without looking at it. Nothing is ever shared by the whole lab: another person's
    wrong tries never make the instructor, at another address, wait. The server's own machine (loopback, where
    the instructor can always sit) and a session with no known address are slowed per session only.
    Every wrong try, and every try refused for waiting, is logged with its address (never what was typed).
    """

    def __init__(self, *, free: int = 3, free_per_address: int = 10, first_wait_s: float = 2.0,
                 longest_wait_s: float = 300.0, clock=time.monotonic) -> None:
        self.free, self.free_per_address = free, free_per_address
        self.first_wait_s, self.longest_wait_s = first_wait_s, longest_wait_s
        self._clock = clock
        self._sessions: dict[str, tuple[int, float]] = {}   # session -> (wrong tries in a row, may try again at)
        self._addresses: dict[str, tuple[int, float]] = {}  # address -> the same, over all its sessions
        self._wrong: list[tuple[float, str]] = []           # (when, address) of every wrong try, for the instructor
        self._lock = threading.Lock()

    def _wait_s(self, wrong: int, free: int) -> float:
        return 0.0 if wrong < free else min(self.first_wait_s * 2 ** (wrong - free), self.longest_wait_s)

    def attempt(self, session: str, attempt: str | None, environ: Mapping[str, str] | None = None,
                cwd: str | Path | None = None, address: str | None = None) -> tuple[bool, str | None]:
        """(whether `attempt` unlocks the instructor's actions, and if not, what to tell the person)."""
        now = self._clock()
        where = address if address and address not in LOOPBACK else None  # None: slowed per session only
        with self._lock:
            wrong, next_at = self._sessions.get(session, (0, 0.0))
            address_wrong, address_next_at = self._addresses.get(where, (0, 0.0)) if where else (0, 0.0)
            if now < next_at:
                wait, whose = next_at - now, "this session"
            elif now < address_next_at:
                wait, whose = address_next_at - now, "your network address"
            else:
                wait = None
        if wait is not None:
            LOG.warning("instructor passcode: try refused without checking (session %s at %s must wait %.0f s; %s "
                        "has had too many wrong tries)", session[:8], address or THIS_MACHINE, wait, whose)
            return False, f"Too many wrong passcodes from {whose}: try again in {math.ceil(wait)} s."
        if is_instructor(attempt, environ, cwd):
            with self._lock:
                self._sessions.pop(session, None)
            return True, None
        with self._lock:
            wrong += 1
            delay = self._wait_s(wrong, self.free)
            if len(self._sessions) > 10_000:  # a flood of new sessions must not grow this without end
                self._sessions = {k: v for k, v in self._sessions.items() if v[1] > now}
            self._sessions[session] = (wrong, now + delay)
            if where:
                address_wrong += 1
                delay = max(delay, address_delay := self._wait_s(address_wrong, self.free_per_address))
                if len(self._addresses) > 10_000:
                    self._addresses = {k: v for k, v in self._addresses.items() if v[1] > now}
                self._addresses[where] = (address_wrong, now + address_delay)
            self._wrong = [*self._wrong[-999:], (now, address or THIS_MACHINE)]
        LOG.warning("instructor passcode: wrong try refused (session %s at %s, %d wrong in a row; next try allowed in "
                    "%.0f s)", session[:8], address or THIS_MACHINE, wrong, delay)
        return False, "That is not the passcode." + (f" Wait {math.ceil(delay)} s before trying again." if delay else "")

    def wrong_tries(self) -> str | None:
        """For the instructor: how many wrong tries this server has seen, from where, and how recently; None if none."""
        with self._lock:
            wrong = list(self._wrong)
        if not wrong:
            return None
        addresses = collections.Counter(a for _, a in wrong)
        top = ", ".join(f"{a} ({n})" for a, n in addresses.most_common(3))
        ago = self._clock() - wrong[-1][0]
        return (f"{len(wrong)} wrong passcode tr{'y' if len(wrong) == 1 else 'ies'} since the server started, from "
                f"{len(addresses)} address(es): {top}; the latest {_ago(ago)} ago. Guessers are slowed per session "
                "and per address; the passcode keeps working for you.")


NEW_PEOPLE_WINDOW_H = 12  # a workshop's day: the ids one address started within it count against its limit


class NewPeopleGuard:
    """Bounds how many participants (owner ids new to this server) one network address starts, so that a fresh id
    (a made-up ?me=, a private window, cleared cookies) cannot be had at will: each participant may have
    max_queued_per_session runs waiting, and an address at most max_new_people_per_address participants within
    NEW_PEOPLE_WINDOW_H, so one address holds at most their product waiting. An IPv6 /64 counts as one address (a
    host picks new addresses within its /64 at will). The server's own machine (loopback, where the instructor sits)
    and a session with no known address are not bounded, as PasscodeGuard does not slow them per address: behind a
    reverse proxy, name it in [room] trusted_proxies so that each browser has its own address."""

    def __init__(self, *, window_s: float = NEW_PEOPLE_WINDOW_H * 3600.0, clock=time.monotonic) -> None:
        self.window_s, self._clock = window_s, clock
        self._started: dict[str, list[float]] = {}  # address (or /64) -> when each of its participants was started
        self._lock = threading.Lock()

    def admit(self, address: str | None, limit: int) -> bool:
        """Count a new participant at `address`; False, counting nothing, if it has started `limit` already."""
        where = _per_address(address)
        if where is None:
            return True
        now = self._clock()
        with self._lock:
            recent = [t for t in self._started.get(where, []) if now - t < self.window_s]
            if len(recent) >= limit:
                self._started[where] = recent
                return False
            if len(self._started) > 10_000:  # many addresses must not grow this without end
                self._started = {a: ts for a, ts in self._started.items() if ts and now - ts[-1] < self.window_s}
            self._started[where] = [*recent, now]
            return True


def _per_address(address: str | None) -> str | None:
    """What NewPeopleGuard counts per: the address, its /64 for IPv6; None for loopback or no address."""
    if not address or address in LOOPBACK:
        return None
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if ip.is_loopback:
        return None
    return str(ipaddress.ip_network(f"{ip}/64", strict=False)) if ip.version == 6 else str(ip)


def new_people_message(limits: Limits) -> str:
    return (f"this network address has started {limits.max_new_people_per_address} participants in the last "
            f"{NEW_PEOPLE_WINDOW_H} hours, this lab's limit ({limits.describe('max_new_people_per_address')}). Open "
            "the lab from a tab that already has your name (its address ends in ?me=...), or ask the instructor: "
            "a room that shares one network address needs the limit raised.")


def _ago(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


LOG = logging.getLogger("compile_lab")
PASSCODE_GUARD = PasscodeGuard()  # one per server process: every browser session's tries count together
NEW_PEOPLE = NewPeopleGuard()  # one per server process, like PASSCODE_GUARD


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
    worker (7.4 s of imports, measured on an H200), warm-up and profiling come on top, so a run whose
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
    """The median cold compile time of the latest finished runs that compiled what `exp` compiles, or None."""
    key = compile_key(exp.to_dict(), device)
    times = [r.result["compile_s"] for r in store.list(limit=200)
             if r.status == "finished" and r.result.get("compile_s") is not None and r.spec.get("cache") == "cold"
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
    if owner is not None and (waiting := store.queued_count(owner)) >= limits.max_queued_per_session:
        raise SpecError(queue_full_message(waiting, limits))


def device_memory_gib(device: str) -> tuple[float | None, str]:
    """(GiB a run may use on `device`, what that figure is, in words); None where it is not known here."""
    if device == "cuda" and cluster.configured():  # the GPUs are the cluster's, whose memory Ray does not report
        return None, "unknown on the cluster's GPUs: only the run's own out-of-memory guard applies"
    if device == "cpu":
        meminfo = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
        return int(meminfo["MemAvailable"].split()[0]) / 2**20, "of RAM available on this machine now"
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
