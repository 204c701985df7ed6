"""How a LiveRun follows its worker: the events read as they come (phases, progress, power, figures, the headline),
the device asked for and granted where runs share a GPU (tcore.lab.queue.lease), and what is kept of a run that
failed after its headline.
"""
from __future__ import annotations

import shutil
import sqlite3
import threading
import time
import traceback
from typing import Any

from tcore import figures
from tcore.experiment import protocol
from tcore.experiment.protocol import TERMINAL
from tcore.experiment.protocol import error as error_event
from tcore.lab.outputs import artifact_handover, model_files
from tcore.lab.queue import lease, quiet, scheduler, spares
from tcore.lab.queue.spares import SPARES, _spare_for_next
from tcore.lab.run.recording import store_failure, through_locks, with_history
from tcore.store import NoSuchRun, RunRecord, RunStore, StoreError

LOST_ROW_NOTE = ("the store lost this run's record while it ran (its -wal file was removed under it); the lab wrote it "
                 "again with its result")


def _lab_processes(store: RunStore, device: str, slot: str | None) -> int:
    """The most processes of the lab's own that may hold a context on `slot`'s GPU while a run there holds it: the
    other runs resident there (compiling, or waiting for it), the spare workers waiting, and, where this process keeps
    spares for the device (the app does), a spare for each free place (the queue starts them at any moment). None of
    them computes while the run holds the device; a measurement counts them apart from processes that are not the
    lab's. Spares that this process never starts are not counted: a command line's or a test's run counted a spare
    for each free place of the room and so took a process not of the lab, computing on the GPU, for one of its own."""
    if slot is None:
        return 0
    try:
        residents = len(store.queue.residents(scheduler.this_process().host).get(slot, []))
    except (sqlite3.Error, StoreError):
        residents = 1
    free = max(scheduler.room_plan(device).runs_per_slot - residents, 0) if spares.kept_for(device) else 0
    return max(residents - 1, 0) + max(SPARES.waiting(slot), free)

class Following:
    """The part of a LiveRun that reads its worker's events and records the outcome they end with. It owns what the
    worker says (phase, progress, power samples, code, figures, the headline) and the device lease's state; the other
    parts ask it to change the phase (_set_phase) and to let go of its copies once the store holds them (_let_go)."""

    def _init_following(self) -> None:
        self.phase: str | None = "queued"
        self.progress: dict[str, tuple[int, int]] = {}  # phase -> (done, total)
        self.phase_started_at: dict[str, float] = {}  # phase -> wall-clock time it began
        self.power_samples: list[list] = []  # [[t_s, watts, phase, util_pct], ...] as the worker sampled them
        self.code: list[str] = []  # Inductor's generated source, one per graph
        self.figures_so_far: dict[str, dict] = {}  # name -> {value, ...}: figures known before the result
        # The timed figures, before the profiling pass: the worker's headline record, its interval restated with the
        # store's earlier runs as the saved record's is (None until the worker sends it); and as the worker sent it.
        self.headline: dict[str, Any] | None = None
        self._headline_sent: dict[str, Any] | None = None
        self._headline_in = threading.Event()  # set when the headline arrives: a page waiting for it wakes then
        self.neighbours_held = 0  # the most runs beside it on its GPU held still at once while it was timed (quiet)
        self.held_owed_s = 0.0    # held still by another's rounds since its last grant, to tell its worker (quiet)
        # The device lease (tcore.lab.queue.lease), when other runs share its device: what it waits for or holds, since
        # when
        self.device_asked: tuple[str, float] | None = None
        self.device_held: tuple[str, float] | None = None
        self._store_id: str | None = None  # the store the run started in (_written_again)

    def _set_phase(self, phase: str | None) -> None:
        """Within self._lock: the run is in `phase` ("queued" again, None while its worker starts) without its worker
        saying so."""
        self.phase = phase

    def _let_go(self, recorded: bool) -> None:
        """Within self._lock: the run has ended; it holds and asks for no device, and where the store holds its power
        samples and generated code (`recorded`), this run's copies go (Inductor's sources alone run to megabytes)."""
        self.device_asked = self.device_held = None
        if recorded:
            self.power_samples, self.code = [], []

    def _follow(self) -> None:
        """Follow the worker's events; at its end, record the outcome, whatever goes wrong while recording it."""
        if self.lease_env.get(protocol.DEVICE_LEASE):  # it shares its GPU: its neighbours hold still while it is timed
            quiet.join(self.run_id, self.device_slot, self.handle.pid, waiting=lambda: self.device_asked is not None,
                       continued=self._was_held)
        self._store_id = self._current_store_id()  # a store replaced under the run is not one to write its result in
        try:
            self._read_events()
            final = self.handle.final
            self._keep_torch_trace()
            if final["type"] != "result" and (kept := self._headline_kept(final)) is not None:
                final = kept
            if final["type"] == "result":
                if self._written_again():
                    final["result"]["notes"] = [*final["result"].get("notes", []), LOST_ROW_NOTE]
                # Artifacts first: finishing frees the slot, and a warm twin queued behind must find them. A store
                # another process holds write-locked is waited for here too: refused, the run would end crashed.
                through_locks(lambda: artifact_handover.keep(self.run_id, self.exp.to_dict(), final["result"],
                                                             final["env"], self.store, self.workdir),
                              self._say_store_trouble)
                result = with_history(self.store, self.run_id, self.exp.to_dict(), final["result"], final["env"])
                result.update(self.clock.timeline(result), neighbours_held=self.neighbours_held)
                # A store another process holds write-locked is waited for: the result is kept until it is written.
                through_locks(lambda: self.store.finish(self.run_id, result=result, env=final["env"],
                                                        power_samples=self.power_samples, code=self.code,
                                                        owner=scheduler.this_process()),
                              self._say_store_trouble)
                self._collect_record()
            else:
                self._end(final)
        except Exception as e:  # the record must not stay "running", holding its device slot, under a live owner
            if isinstance(e, (sqlite3.Error, StoreError)):
                self._say_store_trouble(e)
                # said to the run's owner from here whatever the store keeps (a store deleted under it keeps nothing)
                self._end_unrecorded(error_event("crashed", f"the run ended, but its result could not be recorded: "
                                                            f"{store_failure(e, self.store)}"))
            else:
                traceback.print_exc()
                self._end(error_event("crashed", f"the run ended, but recording its outcome failed: "
                                                 f"{type(e).__name__}: {e}"))
        finally:
            if self.lease_env.get(protocol.DEVICE_LEASE):
                quiet.leave(self.run_id)
                self._broker().forget(self.run_id)
            shutil.rmtree(self.workdir, ignore_errors=True)  # the log tail is in the record by now

    def _current_store_id(self) -> str | None:
        try:
            return self.store.store_id
        except (sqlite3.Error, StoreError):
            return None

    def _written_again(self) -> bool:
        """Whether this run's row was gone from the store, though the store is intact (its -wal file deleted while
        connections held it), and was written anew, running here, so that its result is recorded as any run's."""
        try:
            self.store.get(self.run_id)
            return False
        except NoSuchRun:
            pass
        if self._store_id is None or self._current_store_id() != self._store_id:
            return False  # deleted whole and made anew: the run's owner is told its record is gone (_follow)
        lost = RunRecord(id=self.run_id, status="running", created_at=self.queued_at, label=self.exp.label,
                         spec=self.exp.to_dict(), owner=self.owner, device=self.device)
        return through_locks(lambda: self.store.write_again(lost, proc=scheduler.this_process()),
                             self._say_store_trouble)

    def _was_held(self, stopped_at: float, continued_at: float, owed: bool) -> None:
        """Another run's timed rounds held this one still from `stopped_at` to `continued_at` (time.monotonic()): its
        time limit gets the time back, its timeline shows it, and, unless it was waiting for the device then (a wait
        already), its next grant tells the worker, whose compile time leaves it out (tcore.worker.device_lease)."""
        held = continued_at - stopped_at
        with self._lock:
            self.held_owed_s += held if owed else 0.0
        self.clock.held(stopped_at, continued_at)
        self.handle.extend_limit(held)

    def _quiet_neighbours(self, timed: bool) -> None:
        """Its timed rounds begin (the runs beside it on its GPU hold still, tcore.lab.queue.quiet) or end (they go
        on); the most held still at once is kept for its result."""
        if not self.lease_env.get(protocol.DEVICE_LEASE):
            return
        if timed:
            self.neighbours_held = max(self.neighbours_held, quiet.hold(self.run_id))
        else:
            quiet.release(self.run_id)

    def _headline_kept(self, final: dict[str, Any]) -> dict[str, Any] | None:
        """A run that failed after its headline (in the profiling pass: the worker died, ran out of memory or time)
        keeps its timed figures: a result event of the headline record, the profile n/a with the failure's reason.
        A cancelled run stays cancelled (someone asked for it), a run with no headline has no figures to keep, and an
        error the worker raised itself stays an error."""
        sent = self._headline_sent
        # Only an end the lab saw from outside (the worker died, was killed for memory, ran out of time): an exception
        # the worker raised itself after the headline (its error names it) is a bug to show, not a run to call finished.
        if sent is None or final.get("kind") not in ("crashed", "oom", "timeout") or "exception" in final:
            return None
        why = (f"the worker failed after the timed rounds, in the profiling pass ({final.get('kind', 'crashed')}: "
               f"{str(final.get('message') or 'no message').strip()[:200]}); the timed figures stand")
        result = dict(sent["result"], unavailable=dict(sent["result"].get("unavailable") or {}),
                      notes=[*sent["result"].get("notes", []), f"The breakdown is missing: {why}."])
        for variant in result.get("variants") or []:
            for key in figures.PROFILED:
                result["unavailable"][f"{variant}_{key}"] = why
        return {"type": "result", "result": result, "env": sent.get("env") or {}}

    def _shown_headline(self, event: dict[str, Any]) -> dict[str, Any]:
        """The worker's headline record as the page shows it: its interval restated with the store's earlier runs of
        this setting, as the saved record's will be (tcore.lab.run.recording.with_history)."""
        try:
            return with_history(self.store, self.run_id, self.exp.to_dict(), event["result"], event.get("env") or {})
        except (sqlite3.Error, StoreError):  # the store is said to be in trouble when the outcome is written
            return event["result"]

    def _keep_torch_trace(self) -> None:
        """The compile's TORCH_TRACE into the store; one that cannot be kept never costs the run its result."""
        try:
            artifact_handover.keep_torch_trace(self.run_id, self.store, self.workdir)
        except (sqlite3.Error, StoreError) as e:  # the outcome's own write says the same, once
            self._say_store_trouble(e)
        except Exception:  # noqa: BLE001 (the run's outcome matters more; the page then says no TORCH_TRACE was kept)
            traceback.print_exc()

    def _broker(self) -> lease.Broker:
        return lease.broker(self.store, scheduler.this_process().host)

    def _device_event(self, event: dict[str, Any]) -> None:
        """The worker asks for its device alone or lets it go (tcore.worker.device_lease): the broker takes it in the
        store
        when it is this run's turn, and the worker hears of it on its stdin."""
        if not self.lease_env.get(protocol.DEVICE_LEASE):  # a worker alone on its device asks no one
            return
        broker = self._broker()
        if event.get("release"):
            with self._lock:
                self.device_held = None
            broker.release(self.run_id)
            return
        purpose = str(event.get("ask"))
        with self._lock:
            self.device_asked, self.device_held = (purpose, time.time()), None
        self.handle.waiting_for_device = True

        def granted() -> None:
            with self._lock:
                self.device_asked, self.device_held = None, (purpose, time.time())
            self.handle.waiting_for_device = False
            self.clock.granted()
            with self._lock:
                held, self.held_owed_s = self.held_owed_s, 0.0
            self.handle.grant(purpose, _lab_processes(self.store, self.device, self.device_slot), held)

        broker.ask(self.run_id, self.device_slot, purpose, granted)

    def _read_events(self) -> None:
        for event in self.handle:
            self.clock.event(event)
            kind = event["type"]
            if kind == "device":
                self._device_event(event)  # reads and writes the store: outside the lock
            shown = self._shown_headline(event) if kind == "headline" else None  # reads the store: outside the lock
            with self._lock:
                if kind == "headline":
                    self._headline_sent, self.headline = event, shown
                    self._headline_in.set()
                elif kind == "phase":
                    self.phase = event["phase"]
                    self.phase_started_at[self.phase] = _began(event, time.time())
                    if self.phase == "profiling":
                        _spare_for_next(self.device, self.device_slot)
                elif kind == "progress":
                    self.progress[event["phase"]] = (event["done"], event["total"])
                elif kind == "power":
                    self.power_samples.extend(event["samples"])
                elif kind == "note" and event["text"] not in self.notes:
                    # the device's notes were said when the run queued (runs.preflight); the worker, which checks the
                    # device it runs on, says them again: the panel shows each once
                    self.notes.append(event["text"])
                elif kind == "code":
                    self.code = event["sources"]
                elif kind == "model_card":
                    model_files.keep(self.store, event["card"])
                elif kind == "figure":
                    self.figures_so_far[event["name"]] = {k: v for k, v in event.items() if k not in ("type", "name")}
            if kind == "phase" or kind in ("headline", *TERMINAL):  # outside the lock: it signals other runs' workers
                self._quiet_neighbours(kind == "phase" and event["phase"] == "measuring")
            if self._on_event:
                self._on_event(event)


def _began(event: dict[str, Any], now: float) -> float:
    """When a phase began: the worker's own stamp (its clock is this machine's), not when this process read the event,
    which a busy machine delays past the device hold the phase lay inside; now where the stamp is missing or from a
    clock that disagrees with this one (a worker on another node) by more than a minute."""
    at = event.get("at")
    return at if isinstance(at, (int, float)) and now - 60.0 <= at <= now else now
