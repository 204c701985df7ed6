"""Process facts and process groups through one module (tcore.host.processes): real processes, each the leader of a
group of its own as the lab starts workers."""
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tcore.host import processes
from tests.helpers import wait_until

pytestmark = pytest.mark.skipif(not processes.groups_can_stop(), reason="needs POSIX signals")

# A leader that starts a grandchild in its group and ends at once: the grandchild is reparented, no longer anyone's
# child that psutil's children() would find, and still in the group, as a compile job outliving its worker is.
ORPHAN = ("import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); "
          "print(p.pid, flush=True)")


def state(pid: int) -> str:
    """The process's state letter: 'T' while stopped."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_a_group_is_stopped_and_let_go_on_whole_an_orphaned_member_too_and_a_gone_group_says_so():
    leader = subprocess.Popen([sys.executable, "-c", ORPHAN], stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    orphan = int(leader.stdout.readline())
    leader.wait()
    try:
        assert processes.is_alive(orphan, processes.process_start(orphan))
        assert processes.stop_group(leader.pid)  # the group keeps its leader's pid as its id
        wait_until(lambda: state(orphan) == "T", what="the orphan stopped")
        assert processes.continue_group(leader.pid)
        wait_until(lambda: state(orphan) != "T", what="the orphan going on")
        assert processes.end_group(leader.pid)
        wait_until(lambda: not processes.is_alive(orphan, None), what="the orphan ended")
    finally:
        processes.end_group(leader.pid)
    ended = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    ended.wait()
    assert not processes.stop_group(ended.pid) and not processes.end_group(ended.pid)  # nothing left to signal


def test_this_processs_threads_are_listed_by_their_native_ids():
    started, done = threading.Event(), threading.Event()
    ids = []

    def run():
        ids.append(threading.get_native_id())
        started.set()
        done.wait(30)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    started.wait(30)
    try:
        assert {threading.get_native_id(), ids[0]} <= set(processes.thread_ids())
    finally:
        done.set()
        thread.join()
