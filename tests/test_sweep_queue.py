"""Sweeps in the queue: a sweep takes turns with other runs, and survives an app restart.

Real runs use captioner/tiny with backend=eager (tests.helpers.QUICK): about 4 s each.
"""
import time

import pytest

from tcore.lab import sweeps
from tcore.lab.run import runs
from tests.helpers import QUICK, assert_no_overlap, killed_after_it_reports

pytestmark = pytest.mark.usefixtures("no_outside_limits")

SWEEP_AND_HANG = """
import json, sys, time
from tcore.experiment.spec import Experiment
from tcore.lab import sweeps
from tcore.lab.run import runs
from tcore.store import RunStore
from tests.helpers import insert_run
store = RunStore(sys.argv[1])
exp = Experiment.from_json(sys.argv[2])
sweep_id = sweeps.start([exp, exp.replace(seed=1), exp.replace(seed=2)], store, owner="a session")
first = sweeps.get(sweep_id, store).runs[0].id
# running with its worker started: a run killed before its worker starts goes back to the queue instead
def worker_started():
    with store._connect() as db:
        row = db.execute("SELECT pid FROM runs WHERE id=? AND status='running'", (first,)).fetchone()
    return row is not None and row[0] is not None
while not worker_started():
    time.sleep(0.05)
print(json.dumps({"sweep": sweep_id}), flush=True)
time.sleep(600)
"""


def test_a_sweep_survives_an_app_restart_and_its_matrix_is_rebuilt_from_the_store(store):
    sweep_id = killed_after_it_reports(SWEEP_AND_HANG, store)["sweep"]  # mid-sweep: one run running, two waiting
    assert [(r.status, r.held) for r in sweeps.get(sweep_id, store).runs] == \
        [("running", False), ("queued", True), ("queued", True)]

    runs.recover(store)  # the app starts again
    deadline = time.time() + 240
    while not sweeps.get(sweep_id, store).done:
        assert time.time() < deadline, "the adopted sweep did not finish"
        time.sleep(0.2)
    sweep = sweeps.get(sweep_id, store)
    assert [r.status for r in sweep.runs] == ["failed", "finished", "finished"]
    assert sweep.runs[0].error_kind == "crashed" and sweeps.latest(store, "a session").id == sweep_id
    assert [r.spec["seed"] for r in sweep.runs] == [0, 1, 2]  # the matrix's order, from the store
    assert_no_overlap(sweep.runs[1:])


def test_a_sweep_takes_turns_with_other_runs_instead_of_holding_the_queue(store, cleanup):
    first = runs.start(QUICK, store, owner="someone")  # running while the sweep and another run queue
    cleanup.append(first)
    sweep_id = sweeps.start([QUICK.replace(seed=i) for i in range(3)], store)
    other = runs.start(QUICK.replace(seed=9), store, owner="someone else")
    cleanup.append(other)
    deadline = time.time() + 240
    while not sweeps.get(sweep_id, store).done or not other.done:
        assert time.time() < deadline
        time.sleep(0.2)
    order = sorted([first.record, other.record, *sweeps.get(sweep_id, store).runs], key=lambda r: r.started_at)
    # The other run queued after the whole sweep, yet it starts right after the sweep's first run.
    assert [r.spec["seed"] for r in order] == [0, 0, 9, 1, 2]
    assert_no_overlap(order)
