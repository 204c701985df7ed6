"""While a run that shares its GPU is timed, the runs beside it on that GPU hold still (tcore.lab.queue.quiet): real
processes, each the leader of its own process group as the lab starts workers, stopped and continued by signal."""
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tcore.lab.queue import quiet
from tests.helpers import process_state as state
from tests.helpers import wait_until

pytestmark = pytest.mark.skipif(not quiet.enabled(), reason="needs POSIX signals")

# A worker stand-in that also starts a child in its group, as a worker's compile jobs are.
# Each sleeps far longer than any wait here (the fixture kills them): one that ended on its own mid-test would read 'Z'.
# It writes down who sends it each SIGCONT (blocked, so that sigtimedwait can read the sender; a blocked SIGCONT
# continues a stopped process all the same), in LEDGER/<its pid>: a stand-in read never stopped four times in loaded
# clones, and the ledger says whether another process let it go on, and which.
CHILD = """
import os, signal, subprocess, sys, time
from pathlib import Path
subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(3600)'])
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCONT})
ledger = Path(sys.argv[1]) / str(os.getpid())
ledger.write_text('')
while (info := signal.sigtimedwait({signal.SIGCONT}, 3600)) is not None:
    try:
        who = Path(f'/proc/{info.si_pid}/cmdline').read_bytes().replace(bytes(1), b' ').decode()[:160]
    except OSError:
        who = 'gone'
    with ledger.open('a') as f:
        f.write(f'{time.time():.3f} SIGCONT from pid {info.si_pid} ({who}); ')
"""
LEDGER: dict[str, Path] = {}  # "folder": this test's stand-ins' ledgers (the workers fixture)


def stand_ins(folder: Path, n: int) -> list[subprocess.Popen]:
    """n worker stand-ins (CHILD), each in a group of its own, once each has its child and its ledger in folder."""
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, str(folder)], start_new_session=True) for _ in range(n)]
    wait_until(lambda: all(children(p.pid) and (folder / str(p.pid)).exists() for p in procs),
               what="the stand-ins, each with its child and its ledger")
    return procs


def found(*pids: int) -> Callable[[], str]:
    """What a wait for a stop or a continue found instead, in its message: each process's state and its children's,
    who sent it each SIGCONT, and whom this process's holds had stopped then (a stand-in read never stopped four times
    in loaded clones, in 1 of about 1,190 tests; the fourth time, with no hold left, since the hold's bound and the
    wait were both 180 s)."""
    def said() -> str:
        words = []
        for pid in pids:
            try:
                words.append(f"process group {pid}: found {state(pid)!r}, children {[state(c) for c in children(pid)]}")
            except OSError as e:
                words.append(f"process group {pid}: found it gone ({e})")
            ledger = LEDGER["folder"] / str(pid) if "folder" in LEDGER else None
            if ledger and ledger.exists():
                words.append(f"its SIGCONTs until {time.time():.3f}: {ledger.read_text() or 'none'}")
        holds = {key: [(x.who, x.pgid) for x in stopped] for key, (stopped, _) in dict(quiet._holds).items()}
        members = {run: (m.slot, m.pgid) for run, m in dict(quiet._members).items()}
        return f"{'; '.join(words)}; holds {holds}; members {members}"
    return said


def children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(x) for x in path.read_text().split()] if path.exists() else []


@pytest.fixture
def workers(monkeypatch, tmp_path):
    # this file's own room: no run, spare or store another test file left in this process takes part (a hold is
    # written to every store watched here, each write waiting out that store's lock: a slow one in a loaded run would
    # have the hold's bound pass before hold() returned)
    monkeypatch.setattr(quiet, "_members", {})
    monkeypatch.setattr(quiet, "_holds", {})
    monkeypatch.setattr(quiet, "_hold_slots", {})
    monkeypatch.setattr(quiet, "_spares", [])
    monkeypatch.setattr(quiet, "_watched", {})
    # A hold outlasts every wait here, so a failed wait still shows whom it had stopped (its bound was the waits' 180 s)
    monkeypatch.setattr(quiet, "MAX_HOLD_S", 600.0)
    monkeypatch.setitem(LEDGER, "folder", tmp_path)
    procs = stand_ins(tmp_path, 3)
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
    wait_until(lambda: state(b.pid) == "T" and state(children(b.pid)[0]) == "T", what=found(b.pid))
    assert state(a.pid) != "T" and state(c.pid) != "T"
    assert quiet.held("b") and not quiet.held("c")
    quiet.release("a")
    wait_until(lambda: state(b.pid) != "T" and state(children(b.pid)[0]) != "T", what=found(b.pid))
    assert not quiet.held("b")


def test_a_held_run_that_ends_goes_on_and_a_hold_lasts_at_most_its_limit(workers, monkeypatch):
    a, b, _ = workers
    quiet.join("a", "cuda:0", a.pid)
    quiet.join("b", "cuda:0", b.pid)
    assert quiet.hold("a") == 1
    wait_until(lambda: state(b.pid) == "T", what=found(b.pid))
    quiet.leave("b")  # ended (its time limit, say): it is continued so that it can end
    wait_until(lambda: state(b.pid) != "T", what=found(b.pid))
    quiet.release("a")
    quiet.join("b", "cuda:0", b.pid)
    monkeypatch.setattr(quiet, "MAX_HOLD_S", 0.3)
    assert quiet.hold("a") == 1
    wait_until(lambda: state(b.pid) == "T", what=found(b.pid))
    # a run that never says its rounds ended holds no one for long
    wait_until(lambda: state(b.pid) != "T", what=found(b.pid))
    assert not quiet.held("b")


def test_the_slots_spares_hold_still_too_and_a_spare_taken_meanwhile_goes_on_at_the_release(workers, monkeypatch):
    a, spare, other = workers
    monkeypatch.setattr(quiet, "_spares", [lambda slot: {"cuda:0": [spare.pid], "cuda:1": [other.pid]}[slot]])
    quiet.join("a", "cuda:0", a.pid)
    assert quiet.hold("a") == 0  # no run beside it; its slot's spare is stopped all the same
    wait_until(lambda: state(spare.pid) == "T", what=found(spare.pid))
    assert state(other.pid) != "T"
    quiet.join("b", "cuda:0", spare.pid)  # the spare was taken for a run while a was timed
    quiet.release("a")
    wait_until(lambda: state(spare.pid) != "T", what=found(spare.pid))


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
    wait_until(lambda: state(b.pid) == "T", what=found(b.pid))
    run._quiet_neighbours(False)
    wait_until(lambda: state(b.pid) != "T", what=found(b.pid))
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
    wait_until(lambda: state(proc.pid) == "T", what=found(proc.pid))
    launcher._kill_group(proc, grace_s=120.0)
    assert proc.wait() == -signal.SIGTERM


def test_a_held_run_gets_its_held_time_back_in_its_limit_its_timeline_and_its_compile(workers):
    """The run held still is told when it goes on: its time limit moves by the held seconds, its timeline shows them
    as held still, and unless it was waiting for the device then (a wait already), its next grant says them to its
    worker, whose compile leaves them out (tcore.worker.device_lease); the grant after says none."""
    import io
    import json
    import threading

    from tcore.experiment import protocol
    from tcore.figures import timeline
    from tcore.lab.run.following import Following
    from tcore.lab.run.runclock import RunClock
    from tcore.worker.device_lease import DeviceLease

    a, b, c = workers

    class Handle:
        extended, lines = [], []

        def extend_limit(self, s):
            self.extended.append(s)

        def grant(self, purpose, lab_processes, held_s=0.0):
            self.lines.append(protocol.grant(purpose, lab_processes, held_s))

    held = Following.__new__(Following)
    held.run_id, held.device_slot, held.device_asked, held.held_owed_s = "b", "cuda:0", None, 0.0
    held._lock, held.clock, held.handle = threading.Lock(), RunClock(), Handle()
    waiting = Following.__new__(Following)  # waits for the device: held time is part of its wait already
    waiting.run_id, waiting.device_slot, waiting.device_asked, waiting.held_owed_s = "c", "cuda:0", ("compiled", 0), 0.0
    waiting._lock, waiting.clock, waiting.handle = threading.Lock(), RunClock(), Handle()
    quiet.join("a", "cuda:0", a.pid)
    for run, proc in ((held, b), (waiting, c)):
        quiet.join(run.run_id, "cuda:0", proc.pid, waiting=lambda r=run: r.device_asked is not None,
                   continued=run._was_held)
    assert quiet.hold("a") == 2
    time.sleep(0.3)
    quiet.release("a")
    assert held.held_owed_s >= 0.3 and waiting.held_owed_s == 0.0
    assert Handle.extended[0] >= 0.3 and len(Handle.extended) == 2  # both get the time back in their limits
    spans = held.clock.held_spans
    assert len(spans) == 1 and spans[0][1] - spans[0][0] >= 0.3
    cut = timeline.cut_out([{"name": "compiling", "kind": "lab", "start_s": 0.0, "s": 10.0}], [], [(2.0, 2.5)])
    assert [p["name"] for p in cut] == ["compiling", timeline.HELD_STILL, "compiling" + timeline.CONTINUED]
    # the grant line says the owed seconds (following.py's granted() hands them on and zeroes them), and the worker's
    # side counts them as idle time, not as a wait for the device
    owed = held.held_owed_s
    held.handle.grant("compiled", 0, owed)
    line = Handle.lines[-1]
    assert json.loads(line)["held_s"] == pytest.approx(owed, abs=1e-3)
    lease = DeviceLease(lambda e: None, io.StringIO(line))
    assert lease.take("compiled") >= owed - 1e-3
    assert lease.held_still_s == pytest.approx(owed, abs=1e-3) and lease.waited_s < lease.idle_s
    assert "held_s" not in json.loads(protocol.grant("compiled", 0))  # nothing held: the line as before


def test_a_run_that_starts_while_its_slot_is_timed_holds_still_with_the_rest(workers):
    a, b, c = workers
    quiet.join("a", "cuda:0", a.pid)
    quiet.join("b", "cuda:0", b.pid)
    assert quiet.hold("a") == 1
    quiet.join("c", "cuda:0", c.pid)  # launched into the slot meanwhile
    wait_until(lambda: state(c.pid) == "T", what=found(c.pid))
    quiet.release("a")
    wait_until(lambda: state(b.pid) != "T" and state(c.pid) != "T", what=found(b.pid, c.pid))


def test_a_lab_killed_outright_leaves_no_worker_stopped(workers):
    """SIGKILL runs no atexit: the guard process the lab started at its first hold continues what it held."""
    import signal

    a, b, _ = workers
    lab = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\nfrom tcore.lab.queue import quiet\n"
        f"quiet.join('a', 'cuda:0', {a.pid})\nquiet.join('b', 'cuda:0', {b.pid})\n"
        "print(quiet.hold('a'), flush=True)\ntime.sleep(120)\n")], stdout=subprocess.PIPE, text=True,
        cwd=Path(__file__).resolve().parent.parent)
    assert lab.stdout.readline().strip() == "1"
    wait_until(lambda: state(b.pid) == "T", what=found(b.pid))
    lab.send_signal(signal.SIGKILL)
    lab.wait()
    wait_until(lambda: state(b.pid) != "T", what=found(b.pid))


def test_the_worker_events_hold_the_neighbours_from_measuring_to_the_headline(workers):
    """A shared run's events as tcore.lab.run.following reads them: its neighbour is stopped from the 'measuring' phase
    to the headline, goes on for the profiling pass, and the most held at once is kept for the result."""
    import threading

    from tcore.experiment import protocol
    from tcore.lab.run.following import Following
    from tcore.lab.run.runclock import RunClock

    a, b, _ = workers
    seen = {}

    def events():
        yield {"type": "phase", "phase": "warmup", "t": 1.0}
        seen["warmup"] = state(b.pid)
        yield {"type": "phase", "phase": "measuring", "t": 2.0}
        wait_until(lambda: state(b.pid) == "T", what=found(b.pid))
        yield {"type": "progress", "phase": "measuring", "done": 3, "total": 6, "t": 3.0}
        seen["rounds"] = state(b.pid)
        yield {"type": "headline", "result": {}, "env": {}, "t": 4.0}
        wait_until(lambda: state(b.pid) != "T", what=found(b.pid))
        yield {"type": "phase", "phase": "profiling", "t": 5.0}
        seen["profiling"] = state(b.pid)

    class Handle:
        pid = a.pid

        def __iter__(self):
            return events()

    run = Following.__new__(Following)
    run.run_id, run.device, run.device_slot, run.neighbours_held = "a", "cuda", "cuda:0", 0
    run.lease_env, run.handle, run.clock = {protocol.DEVICE_LEASE: "1"}, Handle(), RunClock()
    run._lock, run._headline_in, run._on_event = threading.Lock(), threading.Event(), None
    run.phase_started_at, run.progress = {}, {}
    run._shown_headline = lambda event: None
    quiet.join("a", "cuda:0", a.pid)
    quiet.join("b", "cuda:0", b.pid)
    run._read_events()
    assert seen == {"warmup": seen["warmup"], "rounds": "T", "profiling": seen["profiling"]}
    assert "T" not in (seen["warmup"], seen["profiling"]) and run.neighbours_held == 1
