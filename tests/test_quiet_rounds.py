"""While a run that shares its GPU is timed, the runs beside it on that GPU hold still (tcore.lab.queue.quiet): real
processes, each the leader of its own process group as the lab starts workers, stopped and continued by signal."""
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tcore.lab.queue import quiet
from tests.helpers import wait_until

pytestmark = pytest.mark.skipif(not quiet.enabled(), reason="needs POSIX signals")

# A worker stand-in that also starts a child in its group, as a worker's compile jobs are.
CHILD = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); " \
        "time.sleep(120)"


def state(pid: int) -> str:
    """The process's state letter from /proc: 'T' while stopped."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(x) for x in path.read_text().split()] if path.exists() else []


@pytest.fixture
def workers():
    procs = [subprocess.Popen([sys.executable, "-c", CHILD], start_new_session=True) for _ in range(3)]
    wait_until(lambda: all(children(p.pid) for p in procs), what="the children")
    yield procs
    for name in ("a", "b", "c"):
        quiet.leave(name)
    for p in procs:
        for child in children(p.pid):
            subprocess.run(["kill", "-9", str(child)])
        p.kill()
        p.wait()


def test_a_timed_run_stops_its_slots_neighbours_with_their_children_and_lets_them_go_on(workers):
    a, b, c = workers
    quiet.join("a", "cuda:0", a.pid)
    quiet.join("b", "cuda:0", b.pid)
    quiet.join("c", "cuda:1", c.pid)  # another GPU's run compiles on while cuda:0 measures
    assert quiet.hold("a") == 1
    wait_until(lambda: state(b.pid) == "T" and state(children(b.pid)[0]) == "T", what="the state")
    assert state(a.pid) != "T" and state(c.pid) != "T"
    assert quiet.held("b") and not quiet.held("c")
    quiet.release("a")
    wait_until(lambda: state(b.pid) != "T" and state(children(b.pid)[0]) != "T", what="the state")
    assert not quiet.held("b")


def test_a_held_run_that_ends_goes_on_and_a_hold_lasts_at_most_its_limit(workers, monkeypatch):
    a, b, _ = workers
    quiet.join("a", "cuda:0", a.pid)
    quiet.join("b", "cuda:0", b.pid)
    assert quiet.hold("a") == 1
    wait_until(lambda: state(b.pid) == "T", what="the state")
    quiet.leave("b")  # ended (its time limit, say): it is continued so that it can end
    wait_until(lambda: state(b.pid) != "T", what="the state")
    quiet.release("a")
    quiet.join("b", "cuda:0", b.pid)
    monkeypatch.setattr(quiet, "MAX_HOLD_S", 0.3)
    assert quiet.hold("a") == 1
    wait_until(lambda: state(b.pid) == "T", what="the state")
    # a run that never says its rounds ended holds no one for long
    wait_until(lambda: state(b.pid) != "T", what="the state")
    assert not quiet.held("b")


def test_the_slots_spares_hold_still_too_and_a_spare_taken_meanwhile_goes_on_at_the_release(workers, monkeypatch):
    a, spare, other = workers
    monkeypatch.setattr(quiet, "_spares", [lambda slot: {"cuda:0": [spare.pid], "cuda:1": [other.pid]}[slot]])
    quiet.join("a", "cuda:0", a.pid)
    assert quiet.hold("a") == 0  # no run beside it; its slot's spare is stopped all the same
    wait_until(lambda: state(spare.pid) == "T", what="the state")
    assert state(other.pid) != "T"
    quiet.join("b", "cuda:0", spare.pid)  # the spare was taken for a run while a was timed
    quiet.release("a")
    wait_until(lambda: state(spare.pid) != "T", what="the state")


def test_switched_off_no_one_is_stopped(workers, monkeypatch):
    a, b, _ = workers
    monkeypatch.setenv(quiet.SWITCH_ENV, "0")
    quiet.join("a", "cuda:0", a.pid)
    quiet.join("b", "cuda:0", b.pid)
    assert quiet.hold("a") == 0
    time.sleep(0.2)
    assert state(b.pid) != "T"


def test_the_lab_holds_the_neighbours_for_the_measuring_phase_only(workers):
    """What tcore.lab.run.following does as a shared run's phases come: 'measuring' stops the neighbours, the next
    phase or the headline lets them go on, and the run keeps how many it held for its result."""
    from tcore.experiment import protocol
    from tcore.lab.run.following import Following

    a, b, _ = workers
    quiet.join("b", "cuda:0", b.pid)

    run = Following.__new__(Following)
    run.run_id, run.device_slot, run.neighbours_held = "a", "cuda:0", 0
    run.lease_env = {protocol.DEVICE_LEASE: "1"}
    quiet.join("a", "cuda:0", a.pid)
    run._quiet_neighbours(True)
    wait_until(lambda: state(b.pid) == "T", what="the state")
    run._quiet_neighbours(False)
    wait_until(lambda: state(b.pid) != "T", what="the state")
    assert run.neighbours_held == 1
    run.lease_env = {}  # a run alone on its device holds no one
    run._quiet_neighbours(True)
    time.sleep(0.2)
    assert state(b.pid) != "T"


def test_a_held_worker_that_is_stopped_for_good_hears_its_sigterm_at_once():
    """A worker held still by another run's rounds and then cancelled (or out of time) ends by its SIGTERM, not by the
    SIGKILL after the grace: the lab continues the group as it terminates it."""
    import signal

    from tcore.lab.launch import launcher

    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    os.killpg(proc.pid, signal.SIGSTOP)
    wait_until(lambda: state(proc.pid) == "T", what="the state")
    launcher._kill_group(proc, grace_s=120.0)
    assert proc.wait() == -signal.SIGTERM
