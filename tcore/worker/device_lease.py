"""The device, held alone for the phases that another run would disturb or be disturbed by: the worker's side of the
device lease (the lab's side is tcore.lab.queue.lease, the record tcore.store.devices).

When several runs share this worker's GPU (the lab says so in TCORE_DEVICE_LEASE), the worker asks the lab for the
device before it runs anything there that times or is timed, and lets it go when it is back on the CPU: the lab
grants it on the worker's stdin, one JSON line per grant. Held alone:
    the build and the eager warm-up               hold("eager"): the build makes weights and inputs on the device
    the compiled code's first runs, the warm-up,  compiling("compiled"): let go while Dynamo or AOT autograd compile
      the timed rounds                             (CPU work), taken back when a compile ends (its code runs next) or
                                                   when Inductor benchmarks kernels on the GPU inside a compile
                                                   (matmul padding; every compile of the max-autotune modes)
    the profiling pass                            hold("profile")
Why (bench/host_bound.py measures it): a GPU neighbour at 10% duty costs a host-bound eager loop over a third of
its throughput; compiles on other cores nothing measurable. The time spent waiting for the device is
counted (waited_s, and per compile in compile_waits_s) so that the compile time and Dynamo's own timers can leave it
out.

Alone on its device (no lab sharing it: the command line's `--no-share`, a CPU run, a Ray task) every ask is granted
at once and nothing is said.
"""
from __future__ import annotations

import contextlib
import json
import os
import time
from typing import IO, Any, Callable, Iterator

from tcore.experiment import protocol

Emit = Callable[[dict[str, Any]], None]
COMPILE_TRIGGERS = ("DYNAMO", "LAZY_BACKWARD")  # the compiles whose CPU work may run while another run holds the GPU


class LabGone(RuntimeError):
    """The lab process stopped answering while this worker waited for its device."""


class DeviceLease:
    """The device, taken from the lab and let go; a no-op when nobody shares it."""

    def __init__(self, emit: Emit, answers: IO[str] | None = None, measure_cpus: tuple[int, ...] = ()) -> None:
        """answers: where the lab's grants arrive (the worker's stdin), None when the device is not shared.
        measure_cpus: the cores the lab keeps for the run that holds the device (the first for the launch thread)."""
        self._emit, self._answers = emit, answers
        self.measure_cpus = measure_cpus
        self.held: str | None = None
        self.waited_s = 0.0                        # all the time spent waiting for the device
        # (compile id, "dynamo" | "aot") -> time waited inside that compile's timers (tcore.worker.diagnostics.Waits)
        self.compile_waits_s: dict[tuple[str, str], float] = {}
        self.lab_processes = 0                     # the lab's own processes on the GPU at the last grant
        self.held_still_s = 0.0                    # the time the lab held it still while another run was timed

    @classmethod
    def from_environment(cls, emit: Emit, stdin: IO[str]) -> DeviceLease:
        shared = os.environ.get(protocol.DEVICE_LEASE) == "1"
        cpus = tuple(int(c) for c in os.environ.get(protocol.MEASURE_CPUS, "").split(",") if c.strip().isdigit())
        return cls(emit, stdin if shared else None, cpus)

    @property
    def shared(self) -> bool:
        return self._answers is not None

    @property
    def idle_s(self) -> float:
        """All the time this worker did not work for the lab's sake: waiting for the device, or held still while
        another run was timed (tcore.lab.queue.quiet). A compile's time leaves it out."""
        return self.waited_s + self.held_still_s

    def take(self, purpose: str) -> float:
        """Hold the device for `purpose`, waiting for the lab's grant; returns the seconds waited (0 if held) and held
        still since the last grant: the worker was stopped then only while it did not hold the device, in the CPU work
        between two holds (a compile), so those seconds belong where the wait's do."""
        if self.held is not None and self.held == purpose:
            return 0.0
        if self.held is not None:
            self.release()
        if not self.shared:
            self.held = purpose
            return 0.0
        t0 = time.perf_counter()
        self._emit({"type": "device", "ask": purpose})
        line = self._answers.readline()
        if not line:
            raise LabGone("the lab process ended while this run waited for its device")
        grant = json.loads(line)
        waited = time.perf_counter() - t0
        self.waited_s += waited
        self.held = grant.get("granted", purpose)
        self.lab_processes = int(grant.get("lab_processes") or 0)
        held = float(grant.get("held_s") or 0.0)
        self.held_still_s += held
        return waited + held

    def release(self) -> None:
        """Let the device go (nothing if it was not held)."""
        if self.held is None:
            return
        self.held = None
        if self.shared:
            self._emit({"type": "device", "release": True})

    @contextlib.contextmanager
    def hold(self, purpose: str) -> Iterator[None]:
        """The device held for the block, and let go after it."""
        self.take(purpose)
        try:
            yield
        finally:
            self.release()

    @contextlib.contextmanager
    def compiling(self, purpose: str = "compiled", *, firm: bool = False) -> Iterator[None]:
        """Around code that compiles and runs compiled code: the device is let go while Dynamo or AOT autograd compile
        and taken back when a compile ends (its code runs next) or Inductor benchmarks on the GPU inside one. It is
        held when the block ends. firm: held throughout (a compile that works on the GPU all along, such as Inductor's
        freezing, which folds the weights there)."""
        if not self.shared or firm or _callback_handler() is None:
            self.take(purpose)
            yield
            return
        def started(args) -> None:
            if args.callback_trigger.name in COMPILE_TRIGGERS:
                self.release()

        def ended(args) -> None:
            if args.callback_trigger.name in COMPILE_TRIGGERS:
                self._count(str(args.compile_id), "dynamo", self.take(purpose))  # inside Dynamo's compile timer

        handler = _callback_handler()
        unhook = _hook_benchmarks(lambda: self._take_for_benchmark(purpose))
        handler.register_start_callback(started)
        handler.register_end_callback(ended)
        try:
            self.release()  # the block begins with a compile: CPU work, while another run may hold the device
            yield
            self.take(purpose)
        finally:
            handler.remove_start_callback(started)
            handler.remove_end_callback(ended)
            unhook()

    def _take_for_benchmark(self, purpose: str) -> None:
        """Before Inductor benchmarks on the GPU inside a compile: in the default modes that is matmul padding, in its
        joint-graph passes, inside AOT autograd's timer."""
        from torch._guards import CompileContext

        self._count(str(CompileContext.current_compile_id()), "aot", self.take(purpose))

    def _count(self, compile_id: str, level: str, waited: float) -> None:
        if waited:
            self.compile_waits_s[(compile_id, level)] = self.compile_waits_s.get((compile_id, level), 0.0) + waited

    def words(self) -> dict[str, Any]:
        """What the record says of the lease: whether the device was shared, how long the run waited for it."""
        return {"device_shared": self.shared, "device_wait_s": round(self.waited_s, 3),
                "device_wait_in_compile_s": round(sum(self.compile_waits_s.values()), 3),
                "held_still_s": round(self.held_still_s, 3),
                "measure_cpus": list(self.measure_cpus)}


def _callback_handler():
    """Dynamo's compile callbacks (torch 2.6+: their start and end, for frames and lazily compiled backwards), or None
    where this torch has none (then the device stays held through compiles)."""
    import torch._dynamo

    return getattr(torch._dynamo, "callback_handler", None)


def _hook_benchmarks(before: Callable[[], None]) -> Callable[[], None]:
    """Call `before()` ahead of every GPU benchmark Inductor runs (its one benchmarker object, which matmul padding,
    autotuning and max-autotune's choices all use); returns what undoes it. Where this torch has no such object,
    nothing is hooked (its benchmarks then run without the device held)."""
    try:
        from torch._inductor.runtime import benchmarking
        bench = benchmarking.benchmarker
        original = bench.benchmark_gpu
    except (ImportError, AttributeError):
        return lambda: None

    def benchmark_gpu(*args, **kwargs):
        before()
        return original(*args, **kwargs)

    bench.benchmark_gpu = benchmark_gpu  # an attribute of the one instance: every caller reads it at call time

    def undo() -> None:
        with contextlib.suppress(AttributeError):
            del bench.benchmark_gpu  # the class's own method shows again

    return undo
