"""The SQLite run store: round trip, failures kept, concurrent writers from several processes."""
import multiprocessing

import pytest

from tcore.experiment.spec import Experiment
from tcore.store import RunStore
from tests import store_children
from tests.helpers import insert_run, row_of


def test_round_trip_keeps_spec_result_env_and_power_samples(store):
    exp = Experiment(model="captioner", preset="tiny", precision="amp-bf16")
    run_id = insert_run(store, exp)
    assert store.get(run_id).status == "running"
    result = {"device": "cpu", "speedup": 1.7, "graph_breaks": [{"reason": "x", "count": 2}],
              "unavailable": {"eager_power_w": "no RAPL"}}
    samples = [[0.05, 101.5, "eager", 40.0], [0.1, 250.0, "compiling", 99.0]]
    store.finish(run_id, result=result, env={"torch": "2.13.0"}, power_samples=samples)

    rec = store.get(run_id)
    assert rec.status == "finished" and rec.device == "cpu"
    assert Experiment.from_dict(rec.spec) == exp
    assert rec.result == result and rec.env == {"torch": "2.13.0"}
    assert store.power_samples(run_id) == samples
    frame = store.dataframe()
    assert frame.loc[0, "speedup"] == 1.7 and frame.loc[0, "precision"] == "amp-bf16"
    assert "graph_breaks" not in frame.columns  # lists stay in the record, not the table


def test_failed_runs_are_kept_with_their_cause(store):
    run_id = insert_run(store, Experiment())
    store.finish(run_id, error={"type": "error", "kind": "oom", "message": "CUDA out of memory", "log_tail": ["a"]})
    rec = store.get(run_id)
    assert rec.status == "failed" and rec.error_kind == "oom"
    assert rec.error["log_tail"] == ["a"]
    assert [r.id for r in store.list()] == [run_id]


def test_delete_removes_run_and_power_samples(store):
    run_id = insert_run(store, Experiment())
    store.finish(run_id, result={"device": "cpu"}, power_samples=[[0, 1, "eager", None]])
    store.delete(run_id)
    assert store.list() == [] and store.power_samples(run_id) == []
    with pytest.raises(KeyError):
        store.get(run_id)


def test_concurrent_writers_from_several_processes_lose_nothing(tmp_path):
    path = tmp_path / "runs.sqlite"
    RunStore(path)
    row = row_of(Experiment())
    spawn = multiprocessing.get_context("spawn")
    procs = [spawn.Process(target=store_children.write_runs, args=(str(path), 25, row)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    runs = RunStore(path).list()
    assert len(runs) == 100 and len({r.id for r in runs}) == 100
    assert all(r.status == "finished" for r in runs)


def test_processes_creating_a_new_store_at_once_all_open_it(tmp_path):
    """Two app processes started together both create the store: switching it to WAL must wait, not fail."""
    spawn = multiprocessing.get_context("spawn")
    for trial in range(3):
        path = tmp_path / f"new{trial}.sqlite"
        barrier = spawn.Barrier(6)
        procs = [spawn.Process(target=store_children.open_when_released, args=(str(path), barrier)) for _ in range(6)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        assert [p.exitcode for p in procs] == [0] * 6
