"""The device lease: runs that share a GPU hold it alone, one at a time, in the store's order; a run's end frees it.

The store's part (tcore.store.devices) and the lab's broker (tcore.lab.queue.lease) on hand-made runs; the worker's side
(tcore.worker.device_lease) against a real Dynamo compile; the room's plan (tcore.lab.queue.room) as arithmetic.
"""
import io
import json
import math
import threading
import time

import pytest
import torch

from tcore.experiment import protocol
from tcore.lab.queue import lease, room, scheduler
from tcore.store import SlotRoom
from tcore.worker import diagnostics
from tcore.worker.device_lease import DeviceLease
from tests.helpers import QUICK, wait_until

HOST = scheduler.this_process().host


def running(store, n: int = 3) -> list[str]:
    """n runs of this process, claimed into the cpu slot together (a room of n), oldest first."""
    proc = scheduler.this_process()
    ids = []
    for _ in range(n):
        ids.append(store.queue.enqueue(QUICK, device="cpu", owner="t", proc=proc, timeout_s=None, memory_gib=1.0))
        time.sleep(0.002)
    share = {"cpu": SlotRoom(runs=n, memory_gib=100.0)}
    for run_id in ids:
        assert store.queue.claim_next(proc, "cpu", ["cpu"], {run_id}, share) == (run_id, "cpu")
    return ids


def test_a_free_slot_goes_to_the_lowest_rank_then_the_run_queued_first(store):
    a, b, c = running(store)
    store.devices.ask_device(HOST, "cpu", c, "compiled", 1)
    store.devices.ask_device(HOST, "cpu", b, "compiled", 2)
    store.devices.ask_device(HOST, "cpu", a, "compiled", 1)
    # a comes first
    assert not store.devices.take_device(HOST, "cpu", b) and not store.devices.take_device(HOST, "cpu", c)
    assert store.devices.take_device(HOST, "cpu", a)
    assert store.devices.device_holder(HOST, "cpu").run_id == a
    assert [x.run_id for x in store.devices.device_asks(HOST, "cpu")] == [c, b]
    assert not store.devices.take_device(HOST, "cpu", c)  # held: nobody else takes it
    # a's next ask ranks first, but waits like anyone for the holder
    store.devices.ask_device(HOST, "cpu", a, "eager", 0)
    store.devices.release_device(a)  # ...and releasing drops a's ask as well
    assert store.devices.take_device(HOST, "cpu", c) and not store.devices.take_device(HOST, "cpu", b)
    store.devices.release_device(c)
    assert store.devices.take_device(HOST, "cpu", b)
    spans = store.devices.slot_spans(HOST, "cpu")
    assert [run_id for run_id, _ in spans] == [a, c, b]
    assert all(s.asked_at <= s.taken_at for _, s in spans) and spans[-1][1].released_at is None


def test_a_runs_end_frees_its_hold_and_its_ask_in_the_same_write(store):
    a, b, _ = running(store)
    store.devices.ask_device(HOST, "cpu", a, "compiled", 1)
    assert store.devices.take_device(HOST, "cpu", a)
    store.devices.ask_device(HOST, "cpu", b, "compiled", 1)
    store.finish(a, error=protocol.error("crashed", "the worker died holding the device"))
    assert store.devices.device_holder(HOST, "cpu") is None
    # its span is closed: the overlap check sees its end
    assert store.devices.device_spans(a)[0].released_at is not None
    assert store.devices.take_device(HOST, "cpu", b)
    store.finish(b, error=protocol.error("cancelled", "cancelled by the user"))
    assert store.devices.device_asks(HOST, "cpu") == [] and store.devices.device_holder(HOST, "cpu") is None


def test_a_hold_whose_run_ended_behind_the_stores_back_is_stale_and_dropped(store):
    a, b, _ = running(store)
    store.devices.ask_device(HOST, "cpu", a, "compiled", 1)
    assert store.devices.take_device(HOST, "cpu", a)
    with store._write() as db:  # ended without the lease's knowledge (an older version's end, a hand edit)
        db.execute("UPDATE runs SET status='failed' WHERE id=?", (a,))
    store.devices.ask_device(HOST, "cpu", b, "eager", 0)
    assert store.devices.device_holder(HOST, "cpu") is None  # a stale hold reads as nobody's
    assert store.devices.take_device(HOST, "cpu", b)


def test_a_slot_takes_runs_up_to_its_room_and_memory_and_an_unknown_estimate_runs_alone():
    share = SlotRoom(runs=3, memory_gib=20.0)
    assert share.admits([], None) and share.admits([], 500.0)  # an empty slot takes anyone
    assert share.admits([8.0], 8.0) and not share.admits([8.0, 8.0], 8.0)  # 24 GiB past 20
    assert not share.admits([1.0, 1.0, 1.0], 1.0)  # three already
    assert not share.admits([1.0], None) and not share.admits([None], 1.0)  # unknown: shares with no one
    assert not SlotRoom().admits([1.0], 1.0)  # the default: a run holds its slot whole


def test_the_store_claims_into_the_slot_with_the_fewest_runs(store):
    proc = scheduler.this_process()
    ids = [store.queue.enqueue(QUICK, device="cuda", owner="t", proc=proc, timeout_s=None, memory_gib=2.0)
           for _ in range(3)]
    share = {s: SlotRoom(2, 50.0) for s in ("cuda:0", "cuda:1")}
    got = [store.queue.claim_next(proc, "cuda", ["cuda:0", "cuda:1"], {i}, share) for i in ids]
    assert [slot for _, slot in got] == ["cuda:0", "cuda:1", "cuda:0"]  # spread first, then shared
    assert store.queue.residents(proc.host) == {"cuda:0": [2.0, 2.0], "cuda:1": [2.0]}


def test_the_broker_grants_in_turn_and_a_release_hands_over_at_once(store):
    a, b, c = running(store)
    broker = lease.Broker(store, HOST)
    got: list[str] = []
    broker.ask(a, "cpu", "compiled", lambda: got.append(a))
    wait_until(lambda: got == [a], 10, "a's grant")
    broker.ask(c, "cpu", "compiled", lambda: got.append(c))
    broker.ask(b, "cpu", "profile", lambda: got.append(b))
    time.sleep(3 * lease.POLL_S)
    assert got == [a]  # a holds it: the others wait
    t0 = time.monotonic()
    broker.release(a)
    wait_until(lambda: got == [a, b], 10, "b's grant")  # b's profile (rank 0) beats c's compiled run (1)
    assert time.monotonic() - t0 < 1.0
    broker.forget(c)  # c ends while waiting: its ask goes, and it is never granted
    broker.release(b)
    time.sleep(3 * lease.POLL_S)
    assert got == [a, b] and store.devices.device_holder(HOST, "cpu") is None


def test_the_worker_lets_the_device_go_while_dynamo_compiles_and_takes_it_back_to_run():
    """A real compile (Dynamo, the eager backend): nothing held while it traces, the device asked for at its end,
    and the time waited for the grant left out of Dynamo's timers."""
    said: list[dict] = []
    grants = _Grants(delay_s=0.3)
    lease_ = DeviceLease(lambda e: (said.append(e), grants.heard(e)), grants, measure_cpus=(1, 2))
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
    compiled = torch.compile(model, backend="eager")
    diagnostics.reset()
    with lease_.hold("eager"):
        model(torch.randn(2, 8))
    with lease_.compiling("compiled"):
        compiled(torch.randn(2, 8))
    assert [e.get("ask") or ("release" if e.get("release") else None) for e in said] == [
        "eager", "release", "compiled"]
    assert lease_.held == "compiled" and lease_.waited_s >= 0.6
    (key, waited), = lease_.compile_waits_s.items()
    assert key[1] == "dynamo" and waited == pytest.approx(0.3, abs=0.25)
    (entry,) = diagnostics.metrics()
    raw = entry.dynamo_cumulative_compile_time_us / 1e6
    assert raw >= waited  # the wait at a compile's end is inside Dynamo's own timer: it has to come out
    split = diagnostics.phase_split_s([entry], lease_.compile_waits_s)
    assert sum(split.values()) == pytest.approx(max(raw - waited, 0.0), abs=0.01)  # the wait is not the compile's


class _Grants:
    """The lab's side of a worker's stdin, in-process: each ask is granted after `delay_s`."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s, self._lines, self._cond = delay_s, [], threading.Condition()

    def heard(self, event: dict) -> None:
        if event.get("type") == "device" and event.get("ask"):
            threading.Timer(self.delay_s, self._grant, args=(event["ask"],)).start()

    def _grant(self, purpose: str) -> None:
        with self._cond:
            self._lines.append(protocol.grant(purpose, 0))
            self._cond.notify_all()

    def readline(self) -> str:
        with self._cond:
            self._cond.wait_for(lambda: self._lines, timeout=30)
            return self._lines.pop(0) if self._lines else ""


def test_a_worker_alone_on_its_device_asks_no_one():
    said: list[dict] = []
    alone = DeviceLease(said.append)
    with alone.hold("eager"):
        assert alone.held == "eager"
    with alone.compiling("compiled"):
        pass
    assert said == [] and alone.waited_s == 0.0


def test_a_lab_that_goes_away_ends_the_wait_with_a_clear_error():
    lonely = DeviceLease(lambda e: None, io.StringIO(""))
    with pytest.raises(Exception, match="the lab process ended while this run waited for its device"):
        lonely.take("eager")


def test_the_grant_line_is_what_the_worker_reads():
    assert json.loads(protocol.grant("compiled", 2)) == {"granted": "compiled", "lab_processes": 2}


# --- the room's plan ------------------------------------------------------------------------------

def test_a_16_core_gpu_host_keeps_two_cores_for_the_measuring_run_and_shares_its_gpu_four_ways():
    plan = room.plan("cuda", ["cuda:0"], range(16))
    assert plan.measure_cpus == {"cuda:0": (1, 2)}  # never core 0, where interrupts land
    assert plan.other_cpus == frozenset({0, *range(3, 16)})
    assert plan.runs_per_slot == 4 and plan.shares  # 14 cores for compiles, 3 per compiling run, at most 4
    assert plan.room(80.0) == {"cuda:0": SlotRoom(4, 72.0)}


def test_two_gpus_get_their_own_kept_cores_and_a_configured_count_wins():
    plan = room.plan("cuda", ["cuda:0", "cuda:1"], range(32), runs_per_gpu=2)
    assert plan.measure_cpus == {"cuda:0": (1, 2), "cuda:1": (3, 4)} and plan.runs_per_slot == 2
    assert "as configured" in plan.why


def test_the_cpu_is_its_own_device_so_runs_take_turns_whole():
    plan = room.plan("cpu", ["cpu"], range(2))
    assert plan.runs_per_slot == 1 and not plan.shares and plan.other_cpus == frozenset()
    assert "take turns whole" in plan.why and plan.room(None) == {}


def test_few_cores_keep_none_apart_and_share_nothing():
    plan = room.plan("cuda", ["cuda:0"], range(3))
    assert plan.measure_cpus == {"cuda:0": ()} and plan.runs_per_slot == 1


def test_runs_per_gpu_is_read_from_the_environment_or_the_file_and_refused_when_wrong(tmp_path):
    assert room.runs_per_gpu_setting({}, tmp_path) is None
    assert room.runs_per_gpu_setting({room.RUNS_ENV: "3"}, tmp_path) == 3
    (tmp_path / "compile-lab.toml").write_text("[room]\nruns_per_gpu = 2\n")
    assert room.runs_per_gpu_setting({}, tmp_path) == 2
    for bad in ('"many"', "0", "1.5", "true"):
        (tmp_path / "compile-lab.toml").write_text(f"[room]\nruns_per_gpu = {bad}\n")
        with pytest.raises(room.LimitsError, match="runs_per_gpu = .* it must be a whole number of at least 1"):
            room.runs_per_gpu_setting({}, tmp_path)
    (tmp_path / "compile-lab.toml").write_text("[room]\nrun_per_gpu = 2\n")
    with pytest.raises(room.LimitsError, match="unknown setting.*run_per_gpu; known: runs_per_gpu"):
        room.runs_per_gpu_setting({}, tmp_path)


def test_a_runs_counted_memory_covers_what_its_estimate_leaves_out():
    assert room.counted_gib(None) is None
    assert room.counted_gib(8.0) == pytest.approx(8.0 * room.SHARED_MARGIN + room.SHARED_EXTRA_GIB)


def test_while_timing_the_launch_thread_has_the_first_kept_core_and_every_other_thread_the_second():
    """On a shared GPU the measuring worker's other threads (the sampler, the event writer) leave the cores busy with
    other runs' compiles: one waiting there for a core while it holds the GIL would hold up the launch thread."""
    import os

    from tcore.worker.timing import pinned_launch_thread

    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("needs two cores")
    stop = threading.Event()
    helper = threading.Thread(target=stop.wait, daemon=True)
    helper.start()
    before = os.sched_getaffinity(helper.native_id)
    with pinned_launch_thread("cuda", (cores[0], cores[1])) as (cpu, why_not):
        assert cpu == cores[0] and why_not is None
        assert os.sched_getaffinity(0) == {cores[0]}
        assert os.sched_getaffinity(helper.native_id) == {cores[1]}
    assert os.sched_getaffinity(helper.native_id) == before and os.sched_getaffinity(0) == set(cores)
    stop.set()


def test_calibration_teaches_each_kind_from_references_of_that_kind():
    from tcore.analysis.history import Spread
    from tcore.lab import calibrate

    gpu = calibrate.references("cuda")
    assert set(gpu) == {"cuda-host-bound", "cuda"} and len(gpu["cuda-host-bound"]) == 2  # both ends of host-bound
    assert all(exp.device == "cuda" for exps in gpu.values() for exp in exps)
    assert [exp.device for exp in calibrate.references("cpu")["cpu"]] == ["cpu"]
    assert "σ 1.96% between fresh processes, from 10 reruns of 2 setting(s); replaces the starting value" in \
        calibrate.words("cuda-host-bound", Spread(math.log1p(0.0196), 8, 10, 2))
    assert "pooled with the starting value until it holds 6 degrees of freedom (it holds 3)" in calibrate.words(
        "cuda", Spread(0.01, 3, 4, 1))
    assert "starting σ 1.5%, measured on H100s" in calibrate.words("cuda", Spread(0.01, 3, 4, 1), "NVIDIA H100 PCIe")
    assert "no setting of this kind has run twice here yet" in calibrate.words("cpu", None)


def test_runs_per_gpu_past_its_cap_or_in_other_digits_is_refused(tmp_path):
    assert room.runs_per_gpu_setting({room.RUNS_ENV: str(room.MAX_RUNS_PER_GPU)}, tmp_path) == room.MAX_RUNS_PER_GPU
    for bad in (str(room.MAX_RUNS_PER_GPU + 1), "100000000000000000000", "２", "٣"):
        with pytest.raises(room.LimitsError, match=f"at most {room.MAX_RUNS_PER_GPU}"):
            room.runs_per_gpu_setting({room.RUNS_ENV: bad}, tmp_path)
    (tmp_path / "compile-lab.toml").write_text("[room]\nruns_per_gpu = 100000000000000000000\n")
    with pytest.raises(room.LimitsError, match="runs_per_gpu = 100000000000000000000"):
        room.runs_per_gpu_setting({}, tmp_path)
