"""A run timed in one lab process holds still the runs of its GPU slot in every other lab process on the host (a second
app server, a command line on the same store): the hold goes through the store (tcore.lab.queue.quiet.watch), and is
let go when the run ends, when the hold's bound passes, or when the process that holds has ended."""
import signal
import subprocess
import sys
import time

import pytest

from tcore.lab.queue import quiet, scheduler
from tcore.store import QuietHold
from tests.helpers import REPO_ROOT, wait_until
from tests.test_quiet_rounds import children, stand_ins, state

pytestmark = pytest.mark.skipif(not quiet.enabled(), reason="needs POSIX signals")


@pytest.fixture
def worker(monkeypatch, tmp_path):
    """This process's one run of cuda:0, a worker stand-in with a child of its own, as a lab process's run is."""
    monkeypatch.setattr(quiet, "_members", {})
    monkeypatch.setattr(quiet, "_holds", {})
    monkeypatch.setattr(quiet, "_hold_slots", {})
    monkeypatch.setattr(quiet, "_spares", [])
    monkeypatch.setattr(quiet, "_watched", {})
    proc, = stand_ins(tmp_path, 1)
    quiet.join("mine", "cuda:0", proc.pid)
    yield proc
    quiet.leave("mine")
    for child in children(proc.pid):
        subprocess.run(["kill", "-9", str(child)])
    proc.kill()
    proc.wait()


def _me():
    me = scheduler.this_process()
    return me.host, me.pid, me.started


def _hold_by(pid: int, store, *, slot="cuda:0", until_s=60.0) -> QuietHold:
    hold = QuietHold("theirs", scheduler.this_process().host, slot, pid, scheduler.process_start(pid),
                     time.time() + until_s)
    store.devices.hold_neighbours(hold)
    return hold


def test_a_hold_in_the_store_stops_this_processs_runs_of_its_slot_until_the_row_goes(worker, store):
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])  # another lab process, alive
    try:
        _hold_by(other.pid, store)
        quiet.follow(store, store.devices.neighbour_holds(_me()[0]), _me(), scheduler.is_alive)
        wait_until(lambda: state(worker.pid) == "T" and state(children(worker.pid)[0]) == "T", what="held")
        assert quiet.held("mine")
        store.devices.let_neighbours_go("theirs")  # its rounds are over
        quiet.follow(store, store.devices.neighbour_holds(_me()[0]), _me(), scheduler.is_alive)
        wait_until(lambda: state(worker.pid) != "T", what="let go")
        _hold_by(other.pid, store, slot="cuda:1")  # another GPU's rounds: this slot compiles on
        _hold_by(other.pid, store, until_s=-1.0)  # past its bound: no one holds still for it
        quiet.follow(store, store.devices.neighbour_holds(_me()[0]), _me(), scheduler.is_alive)
        assert not quiet.held("mine") and state(worker.pid) != "T"
    finally:
        other.kill()
        other.wait()


def test_a_run_that_joins_while_another_lab_process_times_its_slot_holds_still_too(worker, store, tmp_path):
    """A run that started in this process after another lab process's hold had been followed compiled beside the
    timed run (a probe, with stand-ins): follow() stops a slot's runs when it first sees a hold, and join() looked only
    at this process's own timed runs."""
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    late, = stand_ins(tmp_path, 1)
    try:
        _hold_by(other.pid, store)
        quiet.follow(store, store.devices.neighbour_holds(_me()[0]), _me(), scheduler.is_alive)
        wait_until(lambda: state(worker.pid) == "T", what="held")
        quiet.join("late", "cuda:0", late.pid)  # launched into the slot meanwhile
        wait_until(lambda: state(late.pid) == "T", what="the late run held")
        assert quiet.held("late")
        store.devices.let_neighbours_go("theirs")
        quiet.follow(store, store.devices.neighbour_holds(_me()[0]), _me(), scheduler.is_alive)
        wait_until(lambda: state(worker.pid) != "T" and state(late.pid) != "T", what="both let go")
    finally:
        quiet.leave("late")
        for child in children(late.pid):
            subprocess.run(["kill", "-9", str(child)])
        for proc in (late, other):
            proc.kill()
            proc.wait()


def test_a_killed_holder_leaves_no_one_stopped_and_its_row_goes(worker, store):
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    _hold_by(other.pid, store)
    quiet.follow(store, store.devices.neighbour_holds(_me()[0]), _me(), scheduler.is_alive)
    wait_until(lambda: state(worker.pid) == "T", what="held")
    other.send_signal(signal.SIGKILL)
    other.wait()
    quiet.follow(store, store.devices.neighbour_holds(_me()[0]), _me(), scheduler.is_alive)
    wait_until(lambda: state(worker.pid) != "T", what="let go")
    assert store.devices.neighbour_holds(_me()[0]) == []


def test_a_hold_lasts_at_most_its_bound(worker, store):
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        _hold_by(other.pid, store, until_s=1.0)  # the timer that ends it is set from what is left of the bound
        quiet.follow(store, store.devices.neighbour_holds(_me()[0]), _me(), scheduler.is_alive)
        wait_until(lambda: state(worker.pid) == "T", what="held")
        wait_until(lambda: state(worker.pid) != "T", what="let go at its bound")
    finally:
        other.kill()
        other.wait()


HOLDER = """
import sys, time
from tcore.lab.queue import quiet, scheduler
from tcore.store import RunStore
store = RunStore(sys.argv[1])
me = scheduler.this_process()
quiet.watch(store, (me.host, me.pid, me.started), scheduler.is_alive)
quiet.join("timed", "cuda:0", int(sys.argv[2]))
print(quiet.hold("timed"), flush=True)
sys.stdin.readline()  # until told: its rounds end
quiet.release("timed")
print("released", flush=True)
time.sleep(120)
"""


def test_a_run_timed_in_another_lab_process_holds_this_ones_still_through_the_store(worker, store):
    """Two lab processes on one store: the other one's timed run stops this one's run of the slot through its watcher,
    lets it go when its rounds end, and a holder killed mid-hold leaves it going too."""
    own = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    quiet.watch(store, _me(), scheduler.is_alive)
    for ending in ("released", "killed"):
        holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(store.path), str(own.pid)], cwd=REPO_ROOT,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout.readline().strip() == "0"  # nothing of its own beside it
            wait_until(lambda: state(worker.pid) == "T", what="held from the other process")
            if ending == "released":
                holder.stdin.write("\n")
                holder.stdin.flush()
                assert holder.stdout.readline().strip() == "released"
            else:
                holder.send_signal(signal.SIGKILL)
            wait_until(lambda: state(worker.pid) != "T", what=f"let go ({ending})")
            assert not quiet.held("mine")
        finally:
            holder.kill()
            holder.wait()
    own.kill()
    own.wait()
