"""The fork server (tcore.lab.launch.fork_server_client): on a machine without a GPU, workers are forked from one
process that
has done the imports, and each is still what `python -m tcore.worker` would be: its own process group, its own
environment, its own TORCH_TRACE, its exit status known (its trace on and off: tests/test_ecosystem.py; a worker killed
mid-run: tests/test_worker.py; both run forked here too)."""
import json
import os
import re
import time
from pathlib import Path

import pytest
from helpers import HANG_S, QUICK

from tcore.lab.launch import fork_server_client, launcher
from tcore.lab.outputs import model_files
from tcore.lab.run import runs

pytestmark = pytest.mark.skipif(not fork_server_client.available(),
                                reason="workers are not forked on a machine with a GPU")


@pytest.fixture(autouse=True)
def _patient_server(monkeypatch):
    """The lab gives up on a server that has not imported or answered in time and starts the worker the usual way;
    these tests ask whether workers are forked, so on a loaded machine they wait for the server instead, as long as the
    suite waits for anything (a test of the giving-up sets its own bound)."""
    monkeypatch.setattr(fork_server_client, "IMPORTS_TIMEOUT_S", HANG_S)
    monkeypatch.setattr(fork_server_client, "REPLY_TIMEOUT_S", HANG_S)


def _stat(pid: int) -> tuple[int, int]:
    """(parent pid, process group) of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[1]), int(fields[2])


def _wait_for(predicate, timeout_s=180.0):  # only against a hang
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_workers_come_from_one_server_each_in_its_own_group_with_the_imports_already_done():
    first, second = launcher.Worker({}), launcher.Worker({})
    try:
        assert first.forked and second.forked
        server = fork_server_client._SERVER
        assert server is not None and server.alive
        for worker in (first, second):
            parent, group = _stat(worker.proc.pid)
            assert parent == server.proc.pid and group == worker.proc.pid  # forked there, a group of its own
            assert _wait_for(lambda: worker.ready)
            said = (worker.workdir / "worker.log").read_text()
            assert said.startswith(f"{launcher.protocol.READY} in 0.")
            # what the imports made is out of the collector's sight (the collection before the timed rounds was 0.24 s)
            assert int(re.search(r"; (\d+) objects of its imports frozen", said)[1]) > 100_000
        assert first.proc.pid != second.proc.pid
    finally:
        first.dismiss()
        second.dismiss()
    assert first.proc.wait(120) == 0 and second.proc.wait(120) == 0  # an unused one exits quietly, and we learn it


ENV_PROBE = """
import json, os
import torch
PRESETS = {"tiny": {}}

def build(preset):
    seen = {k: os.environ.get(k) for k in ("TORCHINDUCTOR_CACHE_DIR", "TCORE_WORKER_DIR", "SET_AFTER_THE_SERVER")}
    open(__file__ + ".json", "w").write(json.dumps(seen))
    return torch.nn.Linear(4, 4)

def make_batch(preset, batch_size, device, generator):
    return (torch.randn(batch_size, 4, generator=generator, device=device),), torch.zeros(batch_size, 4, device=device)
"""


def test_a_forked_worker_runs_with_its_own_environment_and_fresh_compile_caches(store, monkeypatch, tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(ENV_PROBE)
    launcher.Worker({}).dismiss()  # the server is up before the next variable is set
    monkeypatch.setenv("SET_AFTER_THE_SERVER", "seen")  # not read at import: the same server serves the run
    server = fork_server_client._SERVER
    model_files.install(store, files_allowed=lambda: True)  # as the command line does: a child reads the file
    probed = runs.execute(QUICK.replace(model=f"file:{probe}", preset="tiny", cache="cold"), store)
    assert probed.status == "finished", probed.error
    seen = json.loads(Path(f"{probe}.json").read_text())
    assert fork_server_client._SERVER is server
    assert seen["SET_AFTER_THE_SERVER"] == "seen"
    # its own fresh compile caches, in its own folder: what makes its compile a cold one
    assert Path(seen["TORCHINDUCTOR_CACHE_DIR"]).parent == Path(seen["TCORE_WORKER_DIR"])
    assert Path(seen["TCORE_WORKER_DIR"]).name.startswith("tcore-run-")


def test_a_new_setting_torch_reads_at_import_gets_a_new_server_and_the_old_one_ends(monkeypatch):
    worker = launcher.Worker({})
    old = fork_server_client._SERVER
    monkeypatch.setenv("TORCHINDUCTOR_MAX_AUTOTUNE_GEMM", "0")  # read when Inductor's config is imported
    fresh = launcher.Worker({})
    try:
        assert (fresh.forked and fork_server_client._SERVER is not old
                and fork_server_client._SERVER.key["TORCHINDUCTOR_MAX_AUTOTUNE_GEMM"] == "0")
        assert _stat(fresh.proc.pid)[0] == fork_server_client._SERVER.proc.pid
        assert old.proc.poll() is None  # still has a worker it must report on
    finally:
        worker.dismiss()
        fresh.dismiss()
    assert worker.proc.wait(120) == 0
    assert old.proc.wait(120) == 0  # its last worker ended: it went too


def test_with_the_switch_off_each_worker_is_its_own_process(monkeypatch):
    monkeypatch.setenv(fork_server_client.SWITCH_ENV, "0")
    worker = launcher.Worker({})
    try:
        assert not worker.forked and _stat(worker.proc.pid)[0] == os.getpid()
    finally:
        worker.dismiss()


def test_a_spare_does_not_wait_for_a_server_still_importing_nor_starts_afresh(monkeypatch):
    """Spares are started from the queue's thread, which must keep ticking: while a new server imports, no spare is
    started (the next fill forks one). Not one started afresh either: its peak RSS, the CPU's peak-memory figure,
    would count the library pages its own imports touched, which a forked worker's does not."""
    monkeypatch.setenv("TORCHINDUCTOR_MAX_AUTOTUNE_POINTWISE", "0")  # a new server, importing now
    with pytest.raises(fork_server_client.StillImporting):
        launcher.Worker({}, wait_for_fork_server=False)
    spares = launcher.SparePool()
    spares.fill("cpu", {})
    assert spares.take("cpu", {}) is None
    assert fork_server_client._SERVER.key.get("TORCHINDUCTOR_MAX_AUTOTUNE_POINTWISE") == "0"
    launcher.Worker({}).dismiss()  # a run waits for the server instead
    spares.fill("cpu", {})
    spare = spares.take("cpu", {})
    try:
        assert spare is not None and spare.forked
    finally:
        spare.dismiss()


def test_a_reply_that_comes_too_late_is_never_taken_for_the_next_requests_worker(monkeypatch):
    """A fork server that does not answer in time (stopped here; a loaded machine can do it too): the run starts its
    worker the usual way, and the reply that comes once the server goes on names a worker that nobody was handed. The
    next request gets its own worker, never that one, and the unclaimed one is stopped."""
    import signal

    launcher.Worker({}).dismiss()  # the server's imports done
    server = fork_server_client._SERVER
    stopped: list[int] = []
    stop = fork_server_client._stop_unclaimed
    monkeypatch.setattr(fork_server_client, "_stop_unclaimed", lambda pid: (stopped.append(pid), stop(pid)))
    monkeypatch.setattr(fork_server_client, "REPLY_TIMEOUT_S", 1.0)
    os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        fallback = launcher.Worker({})  # the server says nothing within the reply's time
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
    monkeypatch.setattr(fork_server_client, "REPLY_TIMEOUT_S", 180.0)  # only against a hang from here
    following = launcher.Worker({})  # asked at once: the late reply may come while this one waits
    try:
        assert not fallback.forked and _stat(fallback.proc.pid)[0] == os.getpid()
        assert following.forked and _stat(following.proc.pid)[0] == server.proc.pid
        assert fork_server_client._SERVER is server
        assert _wait_for(lambda: len(stopped) == 1)
        assert stopped[0] != following.proc.pid
        assert _wait_for(lambda: not Path(f"/proc/{stopped[0]}").exists()
                         or Path(f"/proc/{stopped[0]}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z")
        assert _wait_for(lambda: following.ready)  # it reads its own run, not another's
    finally:
        fallback.dismiss()
        following.dismiss()
    assert following.proc.wait(120) == 0


def test_a_worker_that_ends_while_its_fork_server_is_stopped_is_seen_to_end(monkeypatch):
    """The exit status of a forked worker comes from its server: a server stopped (SIGSTOP, or hung) could neither
    reap the worker nor say it ended, and the lab waited for as long as the server stayed stopped, with the run
    holding its place on the device (a room's queue stood still behind it, past its time limit). A worker gone (a
    zombie nobody reaps) past a short grace has ended, however it ended."""
    import signal

    monkeypatch.setattr(fork_server_client, "GONE_GRACE_S", 1.0, raising=False)
    launcher.Worker({}).dismiss()  # the server's imports done
    worker = launcher.Worker({})
    server = fork_server_client._SERVER
    assert worker.forked and _wait_for(lambda: worker.ready)
    os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        worker.proc.stdin.close()  # with nothing to run, it exits; its server, stopped, says nothing of it
        assert worker.proc.wait(60) == fork_server_client.STATUS_LOST
        assert worker.proc.poll() is not None
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
