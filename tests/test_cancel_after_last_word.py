"""A Cancel that comes after the worker said its last word (its result sent, the worker in its teardown) answers that
nothing was cancelled, and the run ends as it would have: pressed as the result came, Cancel answered True and the
page said "Cancelled" beside a run recorded finished (a probe, four times in two tries). A stand-in worker says its
result at once and then takes its time to exit, as a real one's teardown does."""
import json
import subprocess
import sys
import time
from types import SimpleNamespace

from tcore.lab.launch.handles import RunHandle
from tests.helpers import QUICK, wait_until

SAYS_ITS_RESULT_THEN_LINGERS = """
import json, sys, time
sys.stdin.readline()  # the run's envelope
print(json.dumps({"type": "result", "result": {"device": "cpu", "speedup": 1.0}}), flush=True)
time.sleep(5)  # its teardown: the result is said, the process not gone
"""


def test_a_cancel_after_the_result_was_said_cancels_nothing_and_the_result_stands(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", SAYS_ITS_RESULT_THEN_LINGERS], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    log = open(tmp_path / "worker.log", "w")
    worker = SimpleNamespace(workdir=tmp_path, log_path=tmp_path / "worker.log", _log=log, proc=proc, spawn_env={},
                             taken=False)
    handle = RunHandle(QUICK.replace(cache="warm"), worker, timeout_s=600.0)
    try:
        wait_until(lambda: handle._last_word, what="the stand-in's result read")
        assert proc.poll() is None  # still in its teardown
        started = time.monotonic()
        assert handle.cancel() is False
        assert proc.poll() is None  # nothing was stopped
        events = list(handle)  # until the worker ends: its 5 s teardown
        assert events[-1]["type"] == "result" and json.dumps(events[-1]["result"]) == json.dumps(
            {"device": "cpu", "speedup": 1.0})
        assert time.monotonic() - started > 1.0  # it ended on its own, not at the cancel
    finally:
        if proc.poll() is None:
            proc.kill()
