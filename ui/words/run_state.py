"""What state a run is in, answered once for every page: the store's record, this process's live run and the
room's queue, read together into one RunState, and the words a page shows for it.

Three sources know about a run, each first at something: the store's record says first that it has ended (it
is written a moment before the live run says so); this process's LiveRun knows the phase of a run it is
following; the queue in the store (tcore.lab.run.runs.under_way) places a run that another process runs.
state() reads them in that order, so every fragment of a page that asks gets the same answer.
"""
from __future__ import annotations

from dataclasses import dataclass

from tcore.experiment.protocol import PHASE_TITLES
from tcore.lab import api
from tcore.store import RunStore
from tcore.store.changes import reads
from tcore.store.run_queue import BY_INSTRUCTOR

ENDED = ("finished", "failed")  # a run's record once it is over
DELETED = "deleted"  # the status of a run whose record is gone (deleted on the Compare page meanwhile)


@dataclass(frozen=True)
class RunState:
    """One run as a page shows it.

    status: queued | running | finished | failed | deleted. followed: this process follows the run live (its
    LiveRun is under way and the record has not ended), so a page can draw its live panel. elsewhere: queued or
    running in another process, as the queue places it. ended: the record says it is over (or it is gone).
    phase: the worker's phase while followed. queue_position (1 = next) and wait (tcore.lab.queue.waiting.Wait)
    while queued; waited_s: time in the queue. cancelled_by: "instructor" or "owner" for a cancelled run.
    speedup: a finished run's headline (x eager).
    """
    run_id: str
    status: str
    followed: bool = False
    elsewhere: bool = False
    ended: bool = False
    phase: str | None = None
    queue_position: int | None = None
    wait: api.Wait | None = None
    waited_s: float | None = None
    error_kind: str | None = None
    cancelled_by: str | None = None
    speedup: float | None = None
    device: str | None = None  # on a shared GPU, where the run is: "holds the GPU", "waits for the GPU", "on the CPU"

    def words(self) -> str:
        """'#2 in the queue · starts in about 40 s' / 'running: Compiling (first call)' / 'finished, 1.32x eager' /
        'failed: timeout' / 'cancelled by the instructor' / 'cancelled by you'."""
        queued = f"#{self.queue_position or '?'} in the queue · {api.wait_words(self.wait)[0]}"
        shared = f" · {self.device}" if self.device else ""
        if self.followed:
            if self.status == "queued":
                return queued
            return f"running: {PHASE_TITLES.get(self.phase, 'starting the worker')}{shared}"
        if self.elsewhere:
            return f"running{shared}" if self.status == "running" else queued
        if self.cancelled_by == "instructor":
            return BY_INSTRUCTOR  # not the owner's doing: say whose
        if self.cancelled_by == "owner":
            return "cancelled by you"  # a cancel is no failure of the run's
        if self.status == "failed" and self.error_kind:
            return f"failed: {self.error_kind}"
        if self.status == "finished" and self.speedup is not None:
            return f"finished, {self.speedup:.2f}x eager"
        return self.status


def places_by_id(store: RunStore) -> dict[str, dict]:
    """run id -> its row of the room's queue on this host (tcore.lab.run.runs.under_way), for runs under way."""
    return {row["run_id"]: row for row in api.under_way(reads(store))}


def state(run_id: str, store: RunStore, *, record=None, places: dict[str, dict] | None = None) -> RunState:
    """The run's state now. `record`: its RunRecord when the caller has just read it; `places`: places_by_id(store)
    when the caller asks about several runs (read here only for a run this process does not follow)."""
    if record is None:
        try:
            record = reads(store).get(run_id)
        except KeyError:  # deleted meanwhile
            return RunState(run_id, DELETED, ended=True)
    live = api.follow(run_id)
    place = (places if places is not None else places_by_id(store)).get(run_id) \
        if record.status not in ENDED else None
    device = (place or {}).get("device_state_short")
    if record.status not in ENDED and live is not None and not live.done:
        snap = live.snapshot
        return RunState(run_id, snap["status"], followed=True, phase=snap["phase"],
                        queue_position=snap["queue_position"], wait=snap["wait"], waited_s=snap["waited_s"],
                        device=device)
    if place is not None:  # queued or running in another process
        return RunState(run_id, place["status"], elsewhere=True, queue_position=place["queue_position"],
                        wait=place["wait"], device=device)
    cancelled_by = None
    if record.error_kind == "cancelled":
        by_instructor = (record.error or {}).get("message", "").startswith(BY_INSTRUCTOR)
        cancelled_by = "instructor" if by_instructor else "owner"
    return RunState(run_id, record.status, ended=record.status in ENDED, error_kind=record.error_kind,
                    cancelled_by=cancelled_by, speedup=(record.result or {}).get("speedup")
                    if record.status == "finished" else None)


def queue_words(position: int | None, wait, waited_s: float | None) -> str:
    """'#2 in the queue · starts in about 40 s · waited 12 s': when it starts first; wait_words(wait)[1] says why."""
    place = f"#{position} in the queue" if position else "about to start"
    return f"{place} · {api.wait_words(wait)[0]} · waited {api.duration_words(waited_s)}"
