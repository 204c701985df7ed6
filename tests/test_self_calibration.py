"""The lab calibrates itself while idle (tcore.lab.calibrate.SelfCalibration), at the queue's level with fake runs in a
real store and an injected clock: never while a run waits or runs here, only after the device has been idle a while,
a reference at a time, cancelled the moment a person's run arrives, and done once every kind has enough reruns."""
import math

from tcore.analysis.history import Spread
from tcore.lab import calibrate
from tcore.lab.queue import scheduler
from tcore.store import RunStore
from tests.helpers import QUICK


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _lab(tmp_path):
    store = RunStore(tmp_path / "runs.sqlite")
    proc = scheduler.this_process()
    clock, submitted, cancelled = Clock(), [], []

    def submit(exp):
        run_id = store.queue.enqueue(exp, device="cpu", owner=calibrate.OWNER, proc=proc, timeout_s=None)
        submitted.append((run_id, exp))
        return run_id

    def cancel(run_id):
        cancelled.append(run_id)
        store.queue.request_cancel(run_id)

    cal = calibrate.SelfCalibration(store, "cpu", proc.host, submit, cancel, clock=clock, idle_s=60.0)
    return store, proc, clock, cal, submitted, cancelled


def test_self_calibration_never_runs_while_a_run_waits_or_runs_and_yields_to_a_persons_run(tmp_path):
    store, proc, clock, cal, submitted, cancelled = _lab(tmp_path)
    person = store.queue.enqueue(QUICK, device="cpu", owner="ada", proc=proc, timeout_s=None)
    for _ in range(5):  # a person's run waits: however long, no reference
        cal.tick()
        clock.t += 600
    assert submitted == []
    assert store.queue.claim_next(proc, "cpu", ["cpu"], {person}) == (person, "cpu")
    clock.t += 600
    cal.tick()
    assert submitted == []  # ... nor while it runs (measures)
    store.finish(person, result={"device": "cpu", "speedup": 1.2})
    cal.tick()  # idle from now
    clock.t += 59
    cal.tick()
    assert submitted == []  # not idle long enough
    clock.t += 1
    cal.tick()
    (ref_id, exp), = submitted
    assert exp == calibrate.references("cpu")["cpu"][0] and store.get(ref_id).owner == calibrate.OWNER
    cal.tick()
    assert len(submitted) == 1  # one reference at a time
    # it ends with nothing else waiting: the next starts at the next tick, with no second wait for the queue to idle
    store.queue.claim_next(proc, "cpu", ["cpu"], {ref_id})
    store.finish(ref_id, result={"device": "cpu", "speedup": 1.1})
    cal.tick()
    assert cal.run_id is None and len(submitted) == 1
    cal.tick()
    assert len(submitted) == 2
    ref_id = submitted[-1][0]
    # a person's run arrives while the reference waits or runs: the reference is cancelled at once
    store.queue.claim_next(proc, "cpu", ["cpu"], {ref_id})
    second = store.queue.enqueue(QUICK, device="cpu", owner="grace", proc=proc, timeout_s=None)
    cal.tick()
    assert cancelled == [ref_id] and cal.run_id is None
    clock.t += 600
    cal.tick()
    assert len(submitted) == 2  # and nothing new while that run waits
    store.finish(second, result={"device": "cpu", "speedup": 1.2})
    # the instructor's pause holds it too
    from tcore.lab.run import runs
    runs.pause(store, True)
    clock.t += 600
    cal.tick()
    cal.tick()
    assert len(submitted) == 2
    runs.pause(store, False)


def test_self_calibration_runs_each_kinds_references_until_the_kind_has_enough():
    refs = calibrate.references("cuda")
    bound_a, bound_b = refs["cuda-host-bound"]
    (busy,) = refs["cuda"]
    assert calibrate.next_reference("cuda", {}, {}) == bound_a  # the host-bound kind first, its first reference
    assert calibrate.next_reference("cuda", {}, {bound_a.label: 4}) == bound_b  # one fills, then the next
    enough = Spread(math.log1p(0.02), 6, 8, 2)
    assert calibrate.next_reference("cuda", {"cuda-host-bound": enough}, {}) == busy
    assert calibrate.next_reference("cuda", {"cuda-host-bound": enough, "cuda": enough}, {}) is None  # done
    assert calibrate.next_reference("cuda", {}, {}, failed=frozenset({bound_a.label})) == bound_b
    # ResNet-50 read GPU-busy here (an H100 kept busy 90%): the host-bound kind learns from the launch reference
    # alone, which runs on past its share (7 runs for 6 degrees of freedom), and ResNet-50's runs teach the other kind
    resnet_busy = {bound_b.label: "cuda", bound_a.label: "cuda-host-bound"}
    assert calibrate.next_reference("cuda", {}, {bound_a.label: 4, bound_b.label: 1}, read_as=resnet_busy) == bound_a
    assert calibrate.next_reference("cuda", {}, {bound_a.label: 7, bound_b.label: 1}, read_as=resnet_busy) == busy
    assert calibrate.next_reference("cuda", {}, {bound_a.label: 7, bound_b.label: 1, busy.label: 4},
                                    read_as=resnet_busy) == bound_b
    assert calibrate.next_reference("cuda", {}, {bound_a.label: 7, bound_b.label: 4, busy.label: 4},
                                    read_as=resnet_busy) is None  # nothing left that teaches a short kind
    # the app's server starts it on a GPU, not on the CPU unless asked (it would share the cores)
    assert calibrate.keep_calibrated(RunStore.__new__(RunStore), "cpu") is None
