"""The run store deleted under a lab process while a run is under way: the run's owner is told what happened, in
words, and the process logs no FOREIGN KEY traceback."""
import pytest

from tcore.lab.run import runs
from tcore.store import RunStore
from tests.helpers import QUICK, wait_until

pytestmark = pytest.mark.usefixtures("no_outside_limits")


def test_a_run_whose_store_was_deleted_ends_with_a_word_for_its_owner(tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("COMPILE_LAB_SPARE_WORKERS", "0")
    store = RunStore(tmp_path / "runs.sqlite")
    run = runs.start(QUICK.replace(timed_steps=40, rounds=4), store, owner="ada~0001.00000000c0ffee00")
    wait_until(lambda: run.phase not in ("queued", None), limit_s=180, what="the run under way")
    for suffix in ("", "-wal", "-shm"):
        (tmp_path / f"runs.sqlite{suffix}").unlink(missing_ok=True)
    record = run.wait(240)
    assert run.done and record is not None
    assert record.status == "failed"
    assert "the run store was deleted or replaced while the run was under way" in record.error["message"]
    assert run.snapshot()["status"] == "failed"  # what the owner's page shows
    err = capfd.readouterr().err
    assert "FOREIGN KEY" not in err and "Traceback" not in err, err
