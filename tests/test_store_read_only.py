"""A run store that can only be read (here a read-only mount): listed, shown and compared as it lies, with nothing
written beside it; a write says in a sentence that the store is read-only, never a raw SQLite error.

The folder is made read-only by a read-only bind mount: the tests run as root, whom chmod does not stop."""
import shutil
import sqlite3
import subprocess

import pytest
from streamlit.testing.v1 import AppTest

from tcore import cli
from tcore.lab.run import runs
from tcore.store import RunStore, StoreError, StoreReadOnly
from tests.app_harness import stored_run, texts
from tests.helpers import QUICK


@pytest.fixture
def read_only(tmp_path):
    """(a folder to put a store in, the same folder seen through a read-only mount)."""
    source, mounted = tmp_path / "source", tmp_path / "read-only"
    source.mkdir()
    mounted.mkdir()
    bind = subprocess.run(["mount", "--bind", str(source), str(mounted)], capture_output=True, text=True)
    if bind.returncode != 0:
        pytest.skip(f"needs to bind-mount a folder read-only (root in a machine that lets it): {bind.stderr.strip()}")
    try:
        remount = subprocess.run(["mount", "-o", "remount,bind,ro", str(mounted)], capture_output=True, text=True)
        if remount.returncode != 0:
            pytest.skip(f"cannot remount the bind mount read-only: {remount.stderr.strip()}")
        yield source, mounted
    finally:
        subprocess.run(["umount", "-l", str(mounted)], check=False)


def a_store_in(folder, tmp_path, with_sidecars: bool) -> list[str]:
    """Two finished runs in folder/runs.sqlite; its ids. with_sidecars: as a process that had it open left it, the
    second run only in the -wal file, with the -shm beside it; else closed cleanly, the file alone."""
    built = RunStore(tmp_path / "built" / "runs.sqlite")
    ids = [stored_run(built, QUICK)]
    holder = sqlite3.connect(built.path)  # open, so that no close checkpoints the log into the file
    holder.execute("PRAGMA wal_autocheckpoint=0")
    holder.execute("SELECT 1 FROM runs").fetchall()
    with built._connect() as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)" if not with_sidecars else "PRAGMA wal_autocheckpoint=0")
    if with_sidecars:
        ids.append(stored_run(built, QUICK.replace(batch_size=4)))
        for suffix in ("-wal", "-shm"):
            shutil.copy(built.path.with_name("runs.sqlite" + suffix), folder / ("runs.sqlite" + suffix))
    shutil.copy(built.path, folder / "runs.sqlite")
    holder.close()
    return ids


@pytest.mark.parametrize("with_sidecars", [False, True], ids=["closed cleanly", "with its -wal and -shm"])
def test_list_and_show_read_a_read_only_store_and_write_nothing_beside_it(read_only, tmp_path, capsys, with_sidecars):
    source, mounted = read_only
    ids = a_store_in(source, tmp_path, with_sidecars)
    files = sorted(p.name for p in source.iterdir())
    db = str(mounted / "runs.sqlite")

    assert cli.main(["list", "--db", db]) == 0, capsys.readouterr().err
    listed = capsys.readouterr().out
    assert all(run_id in listed for run_id in ids) and "finished" in listed
    assert cli.main(["show", ids[-1], "--db", db]) == 0, capsys.readouterr().err
    assert QUICK.replace(batch_size=4 if with_sidecars else QUICK.batch_size).label in capsys.readouterr().out
    assert sorted(p.name for p in source.iterdir()) == files


def test_a_write_to_a_read_only_store_says_it_is_read_only(read_only, tmp_path, capsys):
    source, mounted = read_only
    a_store_in(source, tmp_path, with_sidecars=False)
    store = RunStore(mounted / "runs.sqlite")
    assert store.read_only == f"{mounted} is on a read-only mount"
    with pytest.raises(StoreReadOnly, match=r"can only be read: .* is on a read-only mount\. Its runs can be listed"):
        runs.pause(store, True)
    with pytest.raises(StoreReadOnly):
        runs.start(QUICK, store)  # refused before a queue is started for it
    assert cli.main(["run", "--db", str(store.path), "--model", "captioner", "--preset", "tiny", "--device", "cpu",
                     "--backend", "eager", "--quiet"]) == 2
    said = capsys.readouterr().err.strip()
    assert said.startswith("python -m tcore: the run store") and "can only be read" in said and "\n" not in said
    assert "sqlite3" not in said and "readonly database" not in said


def test_a_store_cannot_be_made_in_a_read_only_folder_and_says_why(read_only):
    _, mounted = read_only
    assert cli.main(["list", "--db", str(mounted / "new.sqlite")]) == 2
    with pytest.raises(StoreError, match=r"cannot make a run store at .*new\.sqlite: .* is on a read-only mount; name "
                                        "a file in a folder you can write"):
        RunStore(mounted / "new.sqlite")


def test_the_compare_page_shows_a_read_only_store(read_only, tmp_path, monkeypatch):
    source, mounted = read_only
    ids = a_store_in(source, tmp_path, with_sidecars=False)
    monkeypatch.setenv("COMPILE_LAB_DB", str(mounted / "runs.sqlite"))
    at = AppTest.from_file("../app.py", default_timeout=300)
    at.switch_page("app_pages/compare.py").run()
    assert not at.exception, at.exception
    assert not at.error, texts(at.error)
    assert at.multiselect(key="compare_runs").value == ids



def test_the_run_button_and_delete_on_a_read_only_store_say_so_in_a_sentence(read_only, tmp_path, monkeypatch):
    """A click's callback runs before the page, outside app.py's handler of store errors: Run (and Compare's Delete)
    on a read-only store raised StoreReadOnly into the page, a traceback box (or, with error details off, a bare
    'error') instead of the sentence that says the store can only be read."""
    source, mounted = read_only
    ids = a_store_in(source, tmp_path, with_sidecars=False)
    me = "ada~3f9a.0123456789abcdef"
    with sqlite3.connect(source / "runs.sqlite") as db:  # the stored run is this person's: they may delete it
        db.execute("UPDATE runs SET owner=? WHERE id=?", (me, ids[0]))
    monkeypatch.setenv("COMPILE_LAB_DB", str(mounted / "runs.sqlite"))
    at = AppTest.from_file("../app.py", default_timeout=300)
    at.query_params["me"] = me
    at.run()
    assert at.session_state["owner"] == me
    next(b for b in at.button if b.label == "Run").click().run()
    assert not at.exception, at.exception
    assert any("can only be read" in str(e.value) for e in at.error), texts(at.error)
    at.switch_page("app_pages/compare.py").run()
    at.button(key="compare_delete").click().run()
    assert not at.exception, at.exception
    assert any("can only be read" in str(e.value) for e in at.error), texts(at.error)
