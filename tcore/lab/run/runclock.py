"""The lab side of a run's timeline: the moments this process sees (submit, leaving the queue, each worker event's
arrival) on its monotonic clock, turned into the timeline stored with the result (tcore.figures.timeline).

The worker's events carry its own clock ("t": seconds since it received the run); their arrivals put that clock on this
one, so a worker on another machine (a Ray node) lines up as well as a local one. An event arrives after it was sent,
late by however long this process took to read it, and on a busy machine the first can be late by more than the next
few: the offset is the least (arrival - t) of all the events, the one read soonest. A wait for the device begins at the
ask's own "t", so that it falls after the phase the worker asked in, as it did on the worker.
"""
from __future__ import annotations

import time
from typing import Any

from tcore.figures import timeline
from tcore.figures.timeline import LAB, WAIT


class RunClock:
    """When a run's moments happened, on this process's monotonic clock."""

    def __init__(self, queued_at: float | None = None) -> None:
        now = time.monotonic()
        # A run queued by another process (adopted) began at its stored epoch time, converted here.
        self.submitted = now - max(time.time() - queued_at, 0.0) if queued_at else now
        self.launched: float | None = None
        self.worker_start = "worker process start (Python)"  # what the phase from the launch to the imports was
        self.offset: float | None = None  # lab clock = worker's "t" + offset (the least arrival - t seen)
        self.started_t: float | None = None
        self.startup: dict[str, float] = {}
        self.phases: list[tuple[str, float]] = []  # (worker phase, worker "t")
        self.result_t: float | None = None
        self.result_received: float | None = None
        self.headline_received: float | None = None  # when the timed figures arrived, before the profiling pass
        # [asked (the worker's "t"), granted (this clock)] for each ask of the device (tcore.lab.queue.lease)
        self.device_waits: list[list[float | None]] = []
        self.held_spans: list[tuple[float, float]] = []  # held still while another run was timed (quiet)

    def launch(self) -> None:
        self.launched = time.monotonic()

    def worker(self, forked: bool, from_spare: str | None) -> None:
        """How the run's worker came: a spare started ahead, forked from the fork server (whose imports it waited
        for, when they were still under way), or a process of its own."""
        if from_spare:
            self.worker_start = ("worker start (a spare started ahead, its imports done)" if from_spare == "ready" else
                                 "worker start (a spare started ahead, waited for its imports)")
        elif forked:
            self.worker_start = "worker start (forked once the fork server had imported torch and the engine)"

    def event(self, event: dict[str, Any]) -> None:
        """One worker event, as it arrives."""
        now, t = time.monotonic(), event.get("t")
        if not isinstance(t, (int, float)):
            return
        if self.offset is None or now - t < self.offset:
            self.offset = now - t
        kind = event.get("type")
        if kind == "started":
            self.started_t = t
            self.startup = {k: event[k] for k in ("imports_s", "ready_wait_s")
                            if isinstance(event.get(k), (int, float))}
        elif kind == "phase":
            self.phases.append((event["phase"], t))
        elif kind == "headline":
            self.headline_received = now
        elif kind == "device" and event.get("ask"):
            self.device_waits.append([t, None])
        elif kind == "result":
            self.result_t, self.result_received = t, now

    def granted(self) -> None:
        """The device was granted for the latest ask (tcore.lab.queue.lease)."""
        if self.device_waits and self.device_waits[-1][1] is None:
            self.device_waits[-1][1] = time.monotonic()

    def held(self, stopped_at: float, continued_at: float) -> None:
        """Another run's timed rounds held this one's worker still (tcore.lab.queue.quiet), on this clock."""
        self.held_spans.append((stopped_at, continued_at))

    def timeline(self, result: dict[str, Any]) -> dict[str, Any]:
        """The timeline and its totals, up to now (the moment before the record is written); {} when the run's
        start was not seen (its worker's events never came with a clock)."""
        if self.offset is None or self.launched is None or self.started_t is None or self.result_t is None:
            return {}
        def lab(t: float) -> float:  # a time on the worker's clock, on this one
            return t + self.offset

        marks = [(timeline.QUEUE, WAIT, self.submitted), (self.worker_start, LAB, self.launched)]
        anchor = lab(0.0)  # when the worker received the run
        if "ready_wait_s" in self.startup:
            ready = anchor - self.startup["ready_wait_s"]
            imports = ready - self.startup.get("imports_s", 0.0)
            marks += [("imports (torch, the engine; while idle, model libraries and the profiler's start)",
                       LAB, imports),
                      ("hand-over to the worker (imports done)", LAB, ready)]
        marks.append(("worker setup (torch settings, environment, power meter)", LAB, lab(self.started_t)))
        for phase, t in self.phases:
            name, kind = timeline.WORKER_PHASES.get(phase, (phase, LAB))
            marks.append((name, kind, lab(t)))
        marks += [("worker exit, result handed back", LAB, lab(self.result_t)),
                  ("saving (artifacts kept, interval restated; the store write follows)", LAB, self.result_received)]
        end = time.monotonic()
        waits = [(lab(asked) - self.submitted, (granted or end) - self.submitted)
                 for asked, granted in self.device_waits if (granted or end) - lab(asked) > 1e-3]
        held = [(a - self.submitted, b - self.submitted) for a, b in self.held_spans]
        phases = timeline.refine(timeline.cut_out(timeline.assemble(marks, end, self.submitted), waits, held), result)
        # submit to the headline's arrival: what a person waits for the speedup (the rest is profiling and saving)
        shown = {} if self.headline_received is None else {
            "headline_at_s": round(self.headline_received - self.submitted, 3)}
        return {"timeline": phases, **timeline.totals(phases), **shown}
