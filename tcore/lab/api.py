"""The lab's API: the one module that the app, its server and its pages import from tcore.lab.

A page asks through these verbs (check a run, queue it, cancel, delete, pause the queue, follow a run, list what is
under way, the device slots, the lab's settings) and draws what comes back. A run this process follows comes back as
a frozen Followed, a copy taken at one moment, never the LiveRun that runs it. Each verb calls through its module
when it is called, so a test that puts a stand-in in a module's place reaches the pages too. Types, errors and the
words helpers the pages draw with are the engine's own, named here once.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from tcore.experiment.spec import Experiment
from tcore.lab import calibrate, ladder, probes, rerun_outlook, sweeps
from tcore.lab.launch import cluster
from tcore.lab.launch.cluster import ClusterError
from tcore.lab.outputs import artifact_handover, model_files, stored_results, tlparse
from tcore.lab.outputs.tlparse import STATIC_ROOT, Report
from tcore.lab.policy import guards, limits, memory
from tcore.lab.policy.guards import NEW_PEOPLE_WINDOW_H, NewPeopleGuard, PasscodeGuard
from tcore.lab.policy.limits import FILES_OFF, Limits
from tcore.lab.policy.memory import NoEstimate
from tcore.lab.probes import Busy, Probe
from tcore.lab.queue import room, scheduler, waiting
from tcore.lab.queue.room import RoomPlan
from tcore.lab.queue.waiting import Wait, duration_words, wait_words
from tcore.lab.run import in_turn, registry, runs
from tcore.lab.run.in_turn import InTurn
from tcore.lab.run.runs import Checked
from tcore.lab.settings import private
from tcore.lab.settings.config import LimitsError
from tcore.store import RunStore
from tcore.store.sweep_records import SweepRecord

__all__ = [  # what a page may name: the types and words it draws with, beside the verbs below
    "Busy", "Checked", "ClusterError", "FILES_OFF", "InTurn", "LADDER_RUNGS", "Limits", "LimitsError",
    "NEW_PEOPLE_WINDOW_H", "NewPeopleGuard", "NoEstimate", "PasscodeGuard", "Probe", "QUEUE_TICK_S", "Report",
    "RoomPlan", "STATIC_ROOT", "SweepRecord", "Wait", "duration_words", "wait_words",
]

QUEUE_TICK_S = scheduler.TICK_S  # how often a failing queue retries
LADDER_RUNGS = ladder.RUNGS


# --- one run: check, queue, cancel, delete -----------------------------------------------------------------------

def preflight(exp: Experiment) -> Checked:
    """Refuse what this machine cannot run; (device, notes)."""
    return runs.preflight(exp)


def queue(exp: Experiment, store: RunStore, *, owner: str | None = None, timeout_s: float | None = None,
          from_app: bool = False, checked: Checked | None = None) -> str:
    """Check `exp` and queue it; returns its run id at once. Raises SpecError, with what to change, before anything is
    queued."""
    return runs.start(exp, store, owner=owner, timeout_s=timeout_s, from_app=from_app, checked=checked).run_id


def places_left(owner: str, store: RunStore) -> tuple[int, int]:
    """(how many more runs `owner` may queue now, the lab's bound)."""
    return runs.places_left(owner, store)


def queue_in_turn(experiments: list[Experiment], store: RunStore, *, owner: str, timeout_s: float | None = None) -> str:
    """Queue what `owner`'s bound on waiting runs lets in now, and have this process queue the rest in order as their
    places free, whether or not a page is open; returns the batch's token (in_turn). Raises SpecError, with what to
    change, when the first run is refused."""
    return in_turn.start(experiments, store, owner=owner, timeout_s=timeout_s)


def in_turn_view(token: str, *, feed: bool = False) -> InTurn | None:
    """A queue_in_turn batch: the ids queued so far, the runs still held and a refusal; `feed`: offer its held runs
    the places free now first (a page drawing it need not wait for the lab's next feed)."""
    return in_turn.feed(token) if feed else in_turn.view(token)


def let_go_held(token: str) -> int:
    """Queue none of a queue_in_turn batch's runs still held (its person changed their mind); how many were let go."""
    return in_turn.let_go(token)


def cancel(run_id: str, store: RunStore, *, owner: str | None = None, instructor: bool = False) -> bool:
    """Cancel a run from any process; False when it had already ended."""
    return runs.cancel(run_id, store, owner=owner, instructor=instructor)


def delete(run_id: str, store: RunStore, *, owner: str | None = None, instructor: bool = False) -> None:
    """Delete an ended run and all it left; only its owner or the instructor may."""
    runs.delete(run_id, store, owner=owner, instructor=instructor)


# --- following a run this process holds ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Followed:
    """A run this process follows, as a page draws it: its fixed facts and a snapshot taken at one moment
    (tcore.lab.run.liverun.LiveRun.snapshot: status, phase, progress, wait, headline, notes, power samples...)."""

    run_id: str
    exp: Experiment
    device: str
    owner: str | None
    queued_at: float
    done: bool
    snapshot: dict[str, Any]


def follow(run_id: str) -> Followed | None:
    """The run as it is now, if this process follows it; None once it has been dropped (read the store)."""
    run = registry.live(run_id)
    if run is None:
        return None
    return Followed(run_id=run.run_id, exp=run.exp, device=run.device, owner=run.owner, queued_at=run.queued_at,
                    done=run.done, snapshot=run.snapshot())


def is_followed(run_id: str) -> bool:
    """Whether this process follows the run and it has not ended."""
    return (run := registry.live(run_id)) is not None and not run.done


def wait_for_news(run_id: str, timeout_s: float) -> None:
    """Block until what a page draws next of a followed run arrives, at most `timeout_s`; at once for a run this
    process does not follow or that has ended."""
    if (run := registry.live(run_id)) is not None and not run.done:
        run.wait_for_news(timeout_s)


def earlier_compile_s(run_id: str) -> tuple[float, bool] | None:
    """For a followed run: (compile_s, at the same batch) of the newest earlier run of its setting here, what the
    estimate of its compile's time left is made from (tcore.lab.rerun_outlook.earlier_compile_s); None for none."""
    run = registry.live(run_id)
    return None if run is None else rerun_outlook.earlier_compile_s(run.exp, run.store, run.device)


def device_words(run_id: str) -> str | None:
    """Where a followed run that shares its GPU is now (holding it, waiting for it, on the CPU beside its holder)."""
    return run.device_words() if (run := registry.live(run_id)) is not None else None


def stop(run_id: str) -> bool:
    """Cancel a run this process follows, from its own live panel: a queued run never starts, a running one has its
    worker stopped. False where it had ended already (its result came as the button was pressed): nothing to stop."""
    run = registry.live(run_id)
    if run is None or run.done:
        return False
    return run.cancel()


# --- the queue: what is under way, pause, the device slots --------------------------------------------------------

def under_way(store: RunStore) -> list[dict[str, Any]]:
    """The room's runs under way on this host, as rows (tcore.lab.run.runs.under_way)."""
    return runs.under_way(store)


def pause(store: RunStore, paused: bool) -> None:
    """Hold the queue (runs under way go on, nothing new starts) or let it go."""
    runs.pause(store, paused)


def paused_since(store: RunStore) -> float | None:
    return runs.paused_since(store)


def queue_problem(store: RunStore) -> str | None:
    """Why this process's queue is failing to tick or starts no run, or None while it works."""
    return runs.queue_problem(store)


def host() -> str:
    """This machine's name as the queue records it."""
    return scheduler.this_process().host


def device_slots(device: str) -> tuple[str, ...]:
    """The slots runs on `device` take here ("cuda:0", "cuda:1"... or "cpu")."""
    return scheduler.device_slots(device)


def room_plan(device: str) -> RoomPlan:
    """How this machine shares `device` among runs (runs per GPU, cores kept for the measuring run) and why."""
    return scheduler.room_plan(device)


def cluster_address() -> str | None:
    """The Ray cluster runs go to, or None where runs stay on this machine."""
    return cluster.address() if cluster.configured() else None


def cluster_rows(store: RunStore, whose: Callable[[str | None], str] = str) -> list[dict[str, Any]]:
    """The cluster's runs under way from this host, one row each, with the node and GPU each runs on."""
    return cluster.describe(store.queue.running_and_queued(host()), whose)


# --- the server: start the queue once ------------------------------------------------------------------------------

def hide_environment() -> bool:
    """Keep the passcode in this process's environment out of a worker's reach (tcore.lab.settings.private)."""
    return private.hide_environment()


def serve(store: RunStore, *, calibrate_while_idle: bool = False) -> int:
    """Once per server process and store: hide the passcode's environment from workers, rewrite the results stored
    before today's figures (tcore.lab.outputs.stored_results), let model cards be read (from a child, where the lab
    allows model files), keep spare workers, start the queue and take over the runs a previous server left (how many
    is returned). A store that can only be read gets no queue: its runs are shown.
    calibrate_while_idle: learn this machine's spread while no run waits (tcore.lab.calibrate.keep_calibrated), not
    on a Ray cluster, whose GPUs are not this machine's."""
    hide_environment()
    stored_results.upgrade(store)
    if store.read_only:
        model_files.install(store, files_allowed=lambda: False)
        return 0
    model_files.install(store, files_allowed=limits.files_allowed)
    adopted = runs.serve(store)
    if calibrate_while_idle and not cluster.configured():
        import torch  # the server's process only: a page never asks for this

        calibrate.keep_calibrated(store, "cuda" if torch.cuda.is_available() else "cpu")
    return len(adopted)


# --- the lab's settings, the instructor and the room --------------------------------------------------------------

def lab_limits(store: RunStore | None = None) -> Limits:
    """The lab's limits: the config file's and environment's, with the instructor's changes kept in `store`."""
    return limits.load(store=store)


def set_limits(store: RunStore, values: dict[str, Any] | None) -> Limits:
    """The instructor changes the limits for everyone (None: back to the config file's and environment's)."""
    return limits.set_by_instructor(store, values)


def files_allowed() -> bool:
    """Whether the app runs models from a person's own file (file:PATH.py)."""
    return limits.files_allowed()


def device_memory_gib(device: str) -> tuple[float | None, str]:
    return limits.device_memory_gib(device)


def estimate_memory_gib(exp: Experiment) -> float:
    """The run's memory estimate; raises NoEstimate with why."""
    return memory.estimate_memory_gib(exp)


def instructor_passcode() -> str | None:
    return guards.instructor_passcode()


def is_instructor(attempt: str | None) -> bool:
    return guards.is_instructor(attempt)


def try_passcode(session: str, attempt: str | None, *, address: str | None) -> tuple[bool, str | None]:
    """One try at the instructor's passcode, counted with every session's (guards.PASSCODE_GUARD)."""
    return guards.PASSCODE_GUARD.attempt(session, attempt, address=address)


def wrong_passcode_tries() -> str | None:
    return guards.PASSCODE_GUARD.wrong_tries()


def admit_new_person(address: str | None, bound: int) -> bool:
    """Whether a new participant from `address` may start, within its bound (guards.NEW_PEOPLE)."""
    return guards.NEW_PEOPLE.admit(address, bound)


def new_people_message(lab: Limits) -> str:
    return guards.new_people_message(lab)


def trusted_proxies() -> tuple:
    return room.trusted_proxies()


def client_address(peer: str | None, forwarded_for: list[str], trusted) -> str | None:
    return room.client_address(peer, forwarded_for, trusted)


# --- what a run leaves, and the lab's features --------------------------------------------------------------------

def artifacts_for(exp: Experiment, device: str, store: RunStore) -> dict[str, Any] | None:
    """The compile artifacts a run of `exp` would start from, or None."""
    return artifact_handover.artifacts_for(exp.to_dict(), device, store)


def tlparse_report(run_id: str, store: RunStore) -> Report:
    return tlparse.report(run_id, store)


def run_length_words(exp: Experiment, store: RunStore, device: str) -> str | None:
    """'Runs of these settings took about 2 min 30 s here (median of 3), compile included.' for the Run page, from
    the queue's own estimate of a run's length (tcore.lab.queue.waiting.duration_like); None where no run of this
    model, task and compile finished on this machine."""
    _, _, history = store.queue.queue_state(scheduler.this_process().host, device, recent=waiting.HISTORY_RUNS)
    found = waiting.duration_like(exp.to_dict(), history)
    if found is None:
        return None
    seconds, like, n = found
    return (f"{like[0].upper()}{like[1:]} took about {waiting.rough_words(seconds)} here "
            f"({'median of ' + str(n) if n > 1 else 'one run'}), start-up and compile included; more while other "
            "runs share the machine.")


def rerun_words(exp: Experiment, store: RunStore, device: str) -> str | None:
    """What the earlier runs of this setting say about running it again, or None."""
    return rerun_outlook.words(exp, store, device=device)


def spread_standing(store: RunStore, device: str) -> list[calibrate.Standing]:
    return calibrate.standing(store, device)


def spread_reset_at(store: RunStore) -> float | None:
    return calibrate.reset_at(store)


def reset_spread(store: RunStore) -> None:
    calibrate.reset(store)


def cross(base: Experiment, axes: dict[str, list[Any]]) -> tuple[list[Experiment], list[str]]:
    """A sweep's runs: `base` at every combination of the axes' values; and the combinations that cannot run."""
    return sweeps.cross(base, axes)


def start_sweep(experiments: list[Experiment], store: RunStore, *, owner: str | None = None,
                timeout_s: float | None = None, label: str = "", skipped: list[str] | None = None) -> str:
    """Queue `experiments` as one sweep; returns its id. SpecError (nothing left queued) if the lab refuses one."""
    return sweeps.start(experiments, store, owner=owner, timeout_s=timeout_s, label=label, skipped=skipped)


def sweep(sweep_id: str, store: RunStore) -> SweepRecord:
    return sweeps.get(sweep_id, store)


def latest_sweep(store: RunStore, owner: str | None = None) -> SweepRecord | None:
    return sweeps.latest(store, owner)


def cancel_sweep(sweep_id: str, store: RunStore) -> None:
    sweeps.cancel(sweep_id, store)


def sweeps_under_way(store: RunStore) -> int:
    return sweeps.active_count(store)


def start_ladder(exp: Experiment, rungs: list[str]) -> Probe:
    return probes.start_ladder(exp, rungs)


def start_stances(exp: Experiment) -> Probe:
    return probes.start_stances(exp)


def probe(probe_id: str | None) -> Probe | None:
    return probes.get(probe_id)


def latest_probe(kind: str) -> Probe | None:
    return probes.latest(kind)


def ladder_table(result: dict[str, Any]) -> str:
    return ladder.text_table(result)


def ladder_words(result: dict[str, Any]) -> list[str]:
    return ladder.summary_words(result)
