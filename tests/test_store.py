"""The SQLite run store: round trip, failures kept, concurrent writers from several processes."""
import multiprocessing
import sqlite3

import pytest

from tcore.experiment.spec import Experiment
from tcore.store import RunStore
from tests import store_children
from tests.helpers import HANG_S, insert_run, row_of


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
        p.join(HANG_S)  # a bound on a hang: four processes importing and writing on two busy cores take minutes
        assert p.exitcode == 0
    runs = RunStore(path).list()
    assert len(runs) == 100 and len({r.id for r in runs}) == 100
    assert all(r.status == "finished" for r in runs)


def test_a_store_read_while_another_connection_checkpoints_is_not_called_damaged(tmp_path):
    """Four processes writing at once on a loaded machine: the last to start refused the store, "SQLite cannot read it:
    database disk image is malformed", and a sound store was called damaged. The check before a store is opened read
    the file as it lies, with no lock and without its write-ahead log, while another connection's checkpoint was
    copying pages into it. Made here without a race: a page of the file is garbage while its current copy sits in the
    log of a connection still open, as a checkpoint half done leaves it. A store that is damaged is still refused."""
    from tcore.store.connection import StoreError, check_path

    path = tmp_path / "runs.sqlite"
    RunStore(path)
    holder = sqlite3.connect(path)
    try:
        holder.execute("PRAGMA wal_autocheckpoint=0")
        holder.execute("CREATE TABLE scratch (x)")  # the schema's page, rewritten in the log only
        holder.commit()
        with open(path, "r+b") as f:
            page = int.from_bytes(f.read(18)[16:18], "big")
            f.seek(100)
            f.write(b"\xff" * (page - 100))  # the schema's page, after the file's header, as a torn write leaves it
        check_path(path)  # SQLite, reading the log under its locks, finds it sound
        assert len(RunStore(path).list()) == 0
    finally:
        holder.close()  # the last connection folds the log back into the file: the page is whole again
    with open(path, "r+b") as f:
        f.seek(100)
        f.write(b"\xff" * (page - 100))
    with pytest.raises(StoreError, match="SQLite cannot read it"):  # no log holds it now: damaged
        check_path(path)


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
            p.join(HANG_S)
        assert [p.exitcode for p in procs] == [0] * 6


@pytest.mark.parametrize("column, text, says", [
    ("spec", "{not json", "its spec column is not JSON"),
    ("result", '{"speedup": 1.', "its result column is not JSON"),
    ("env", "[1, 2]", "its env column is JSON but not an object"),
])
def test_a_row_whose_json_cannot_be_read_is_listed_as_unreadable_and_every_other_run_reads(store, column, text, says):
    """One row with malformed JSON (written by hand, `sqlite3 runs.sqlite "update runs set spec='{not json' ..."`)
    broke every listing: RunRecord.from_row raised, and SQLite's json_extract said "malformed JSON" for the whole
    query. It reads as unreadable, with the column named, and every other run as before; it can be deleted."""
    from tcore.lab.run import runs

    exp = Experiment(model="captioner", preset="tiny", device="cpu")
    good = insert_run(store, exp)
    store.finish(good, result={"device": "cpu", "speedup": 1.5, "speedup_low": 1.4, "speedup_high": 1.6},
                 env={"device": "cpu"})
    bad = insert_run(store, exp)
    store.finish(bad, result={"device": "cpu", "speedup": 1.2, "speedup_low": 1.1, "speedup_high": 1.3},
                 env={"device": "cpu"})
    with store._write() as db:
        db.execute(f"UPDATE runs SET {column}=? WHERE id=?", (text, bad))

    assert [r.id for r in store.list()] == [good]  # what reads runs for their figures never sees it
    listed = {r.id: r for r in store.list(unreadable=True)}
    assert listed[good].unreadable is None and listed[good].result["speedup"] == 1.5
    assert listed[bad].status == "finished" and says in listed[bad].unreadable
    assert store.get(bad).unreadable == listed[bad].unreadable and store.get(good).unreadable is None
    frame = store.dataframe()
    assert dict(zip(frame.id, frame.status)) == {good: "finished", bad: "unreadable"}
    assert [r.id for r in store.same_setting(exp.to_dict(), "cpu", {"device": "cpu"})] == [good]
    assert [h[2] for h in store.headlines("cpu")] == [1.5]
    store.rewrite_results(lambda result, spec: {**result, "seen": True}, "test-version")  # every `tcore` opening
    assert store.get(good).result["seen"]
    runs.delete(bad, store)  # the Compare page's delete: it reads only the plain columns
    assert [r.id for r in store.list(unreadable=True)] == [good]
