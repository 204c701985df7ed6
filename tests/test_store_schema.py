"""The store's schema: every table in one module, made once when the store is opened, never by a read; a store
written by an older version opens and gains what it lacks."""
import re
import sqlite3
from pathlib import Path

from tcore.lab import sweeps
from tcore.lab.outputs import artifact_handover
from tcore.store import RunStore, connection
from tests.helpers import QUICK, insert_run

ROOT = Path(__file__).resolve().parent.parent
DDL = re.compile(r"^\s*(CREATE|ALTER|DROP)\b", re.IGNORECASE)

# The runs table as a store written before the queue, sweeps and kept artifacts had it.
BEFORE_THE_QUEUE = """
CREATE TABLE runs (id TEXT PRIMARY KEY, created_at REAL NOT NULL, finished_at REAL, status TEXT NOT NULL,
                   error_kind TEXT, label TEXT NOT NULL, model TEXT NOT NULL, preset TEXT NOT NULL, device TEXT,
                   spec TEXT NOT NULL, env TEXT, result TEXT, error TEXT, pid INTEGER);
CREATE TABLE traces (run_id TEXT PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE, samples TEXT NOT NULL);
"""


def test_a_store_from_before_the_queue_gains_its_columns_and_tables_and_keeps_its_runs(tmp_path):
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as db:
        db.executescript(BEFORE_THE_QUEUE)
        db.execute("INSERT INTO runs (id, created_at, status, label, model, preset, spec) VALUES "
                   "('old', 1.0, 'finished', 'x', 'captioner', 'tiny', ?)", (QUICK.to_json(),))
    store = RunStore(path)
    (old,) = store.list()
    assert old.id == "old" and old.owner is None and old.device_slot is None
    assert store.queue.queued_count("anyone") == 0
    assert store.artifacts.torch_trace("old") is None and store.sweeps.latest_sweep() is None
    assert store.lab.lab_state("paused") is None



def test_a_run_left_running_by_a_version_from_before_the_queue_is_ended_when_the_store_gains_its_queue(tmp_path):
    """A run the app of a version without the queue was running when it stopped stayed "running" for ever: no owner
    process is recorded for it, so no recovery ever ended it (Owners.recover looks at runs with an owner), and tcore
    list, Compare and the queue's pages showed it under way. The store's upgrade ends it as crashed, saying why."""
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as db:
        db.executescript(BEFORE_THE_QUEUE)
        for run_id, status in (("done", "finished"), ("cut", "running")):
            db.execute("INSERT INTO runs (id, created_at, status, label, model, preset, spec, pid) VALUES "
                       "(?, 1.0, ?, 'x', 'captioner', 'tiny', ?, 99999)", (run_id, status, QUICK.to_json()))
    store = RunStore(path)
    cut = store.get("cut")
    assert cut.status == "failed" and cut.error_kind == "crashed" and cut.finished_at is not None
    assert "older version" in cut.error["message"], cut.error
    assert store.get("done").status == "finished"
    RunStore(path)  # opened again: nothing more changes
    assert store.get("cut").finished_at == cut.finished_at

def test_every_table_is_made_in_the_schema_module_only():
    sources = [p for folder in ("tcore", "ui", "app_pages", "bench") for p in (ROOT / folder).glob("**/*.py")]
    makers = {str(p.relative_to(ROOT)) for p in sources if re.search(r"CREATE\s+(TABLE|INDEX)", p.read_text())}
    assert makers == {"tcore/store/schema.py"}


def test_reads_and_writes_run_no_ddl_once_the_store_is_open(tmp_path, monkeypatch):
    """lab/artifact_handover.py used to run its CREATE TABLEs on every read, on a connection of its own."""
    store = RunStore(tmp_path / "runs.sqlite")  # opened: its tables are made here, once
    statements = []
    real_connect = sqlite3.connect

    def traced(*args, **kwargs):
        db = real_connect(*args, **kwargs)
        db.set_trace_callback(statements.append)
        return db

    monkeypatch.setattr(connection.sqlite3, "connect", traced)
    run_id = insert_run(store, QUICK)
    store.finish(run_id, result={"device": "cpu"})
    store.get(run_id), store.list(), store.power_samples(run_id), store.code(run_id), store.store_id
    store.artifacts.torch_trace(run_id), store.artifacts.saved_artifacts(run_id, size_only=True)
    store.artifacts.profiler_trace(run_id, "eager")
    artifact_handover.artifacts_for(QUICK.to_dict(), "cpu", store)
    store.lab.lab_state("paused"), store.queue.running_and_queued("here"), store.queue.queue_state("here", "cpu")
    sweep_id = store.sweeps.create_sweep(owner="ada", label="s", size=0, skipped=[])
    sweeps.get(sweep_id, store), sweeps.latest(store, "ada"), sweeps.active_count(store)
    RunStore(store.path).list()  # opening it again in the same process makes nothing either
    assert len(statements) > 15  # the trace saw the store's statements
    assert [s for s in statements if DDL.match(s)] == []
