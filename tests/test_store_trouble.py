"""A run store that fails under the app reaches the person as a sentence, never as a traceback with source paths;
and Streamlit's own error details are off for participants."""
import os
import random
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request

import pytest

from tcore.lab.settings.config import REPO_ROOT
from tcore.store import RunStore
from tests.app_harness import app, texts
from tests.helpers import QUICK, insert_run, stop_group


def _thirty_runs(path) -> bytes:
    """A store of 30 runs at `path`, its WAL folded into the file; the file's bytes."""
    store = RunStore(path)
    for _ in range(30):
        insert_run(store, QUICK)
    with store._connect() as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path.read_bytes()


def damaged(path):
    """A store whose header is fine and whose tables are not: SQLite says 'database disk image is malformed'."""
    data = bytearray(_thirty_runs(path))
    page = int.from_bytes(data[16:18], "big")
    data[page:] = b"\xff" * (len(data) - page)  # every page after the first: garbage
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("kind", ["not SQLite", "damaged tables"])
def test_a_broken_store_is_a_sentence_on_the_page(tmp_path, monkeypatch, kind):
    path = tmp_path / "runs.sqlite"
    if kind == "not SQLite":
        path.write_text("hello, this is not a database\n" * 10)
    else:
        damaged(path)
    monkeypatch.setenv("COMPILE_LAB_DB", str(path))
    at = app()
    assert not at.exception, at.exception
    said = texts(at.error)
    assert "The lab's run store cannot be used right now" in said and "tell the instructor" in said
    assert "Traceback" not in said and ".py" not in said


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_error_details_are_off_for_participants():
    shown = subprocess.run([sys.executable, "-c", "from streamlit import config; config.get_config_options(); "
                            "print(config.get_option('client.showErrorDetails'))"],
                           cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout.strip()
    assert shown == "none"


def test_the_server_says_who_can_reach_it():
    import serve

    assert "every network interface" in serve.who_can_reach(None, 8501)
    assert "every network interface" in serve.who_can_reach("0.0.0.0", 8501)
    assert "this machine only" in serve.who_can_reach("127.0.0.1", 8501)


PAGES = ["run", "diagnose", "compare", "sweep", "system"]


def random_bytes(path):
    path.write_bytes(random.Random(7).randbytes(40_000))


def truncated(path):
    data = _thirty_runs(path)
    path.write_bytes(data[:len(data) // 2])


def overwritten(path):
    """SQLite's header kept, the rest written over."""
    data = _thirty_runs(path)
    path.write_bytes(data[:100] + random.Random(7).randbytes(len(data) - 100))


@pytest.mark.parametrize("spoil", [overwritten, truncated])
def test_every_page_says_the_store_is_damaged_and_how_to_set_it_aside_and_then_works_without_a_restart(
        tmp_path, monkeypatch, capsys, spoil):
    from tcore import cli

    path = tmp_path / "runs.sqlite"
    spoil(path)
    damaged_bytes = path.read_bytes()
    monkeypatch.setenv("COMPILE_LAB_DB", str(path))
    at = app()
    for page in PAGES:
        at.switch_page(f"app_pages/{page}.py").run()
        assert not at.exception, (page, at.exception)
        said = texts(at.error)
        assert "its file is damaged" in said and "python -m tcore store set-aside" in said, (page, said)
    assert path.read_bytes() == damaged_bytes  # nothing changed, nothing deleted

    capsys.readouterr()
    assert cli.main(["store", "set-aside", "--db", str(path)]) == 0
    out = capsys.readouterr().out
    kept = next(tmp_path.glob("runs.sqlite.damaged-*"))
    assert f"moved the damaged run store {path} to {kept}" in out and kept.read_bytes() == damaged_bytes
    for page in PAGES:  # the same server: the next page makes a new, empty store and works
        at.switch_page(f"app_pages/{page}.py").run()
        assert not at.exception and not at.error, (page, texts(at.error))
    assert RunStore(path).list() == []


@pytest.mark.parametrize("content", [b"export PATH=$HOME/bin:$PATH\n", None, b""], ids=["text", "random", "empty"])
def test_set_aside_leaves_a_file_that_is_not_a_sqlite_database_untouched(tmp_path, monkeypatch, capsys, content):
    """`--db ~/.bashrc` renamed the file: only a file that starts as SQLite's do is a store to set aside. The pages
    say the file is not a run store, not that it is a damaged one to set aside."""
    from tcore import cli

    path = tmp_path / "bashrc"
    path.write_bytes(random.Random(7).randbytes(40_000) if content is None else content)
    before = path.read_bytes()
    assert cli.main(["store", "set-aside", "--db", str(path)]) == 2
    said = capsys.readouterr().err
    assert ("is empty" if not before else "is not a SQLite database") in said and "nothing was moved" in said, said
    assert os.listdir(tmp_path) == ["bashrc"] and path.read_bytes() == before
    if before:
        monkeypatch.setenv("COMPILE_LAB_DB", str(path))
        at = app().switch_page("app_pages/compare.py").run()
        assert not at.exception, at.exception
        assert "not a run store" in texts(at.error) and "set-aside" not in texts(at.error), texts(at.error)
        assert path.read_bytes() == before


def test_set_aside_leaves_a_store_sqlite_reads_where_it_is(store, capsys):
    from tcore import cli

    insert_run(store, QUICK)
    assert cli.main(["store", "set-aside", "--db", str(store.path)]) == 2
    assert "is not damaged (SQLite reads all of it without error): nothing was moved" in capsys.readouterr().err
    assert len(store.list()) == 1 and not list(store.path.parent.glob("*.damaged-*"))


def test_a_store_failing_under_the_system_pages_queue_box_is_the_sentence(tmp_path, monkeypatch):
    """The queue box is a fragment, which Streamlit reruns on its own: an error there never reached app.py's handler,
    and the System page showed Streamlit's generic "This app has encountered an error"."""
    from tcore.lab.run import runs

    monkeypatch.setenv("COMPILE_LAB_DB", str(tmp_path / "runs.sqlite"))
    at = app()

    def damaged_read(*args, **kwargs):
        raise sqlite3.DatabaseError("database disk image is malformed")

    monkeypatch.setattr(runs, "under_way", damaged_read)
    at.switch_page("app_pages/system.py").run()
    assert not at.exception, at.exception
    assert "its file is damaged" in texts(at.error)


def test_the_server_starts_on_a_damaged_store_and_says_what_to_do(tmp_path):
    path = tmp_path / "runs.sqlite"
    random_bytes(path)
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), COMPILE_LAB_DB=str(path), COMPILE_LAB_SPARE_WORKERS="0")
    log = open(tmp_path / "server.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "serve.py", "--server.headless", "true", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"],
        cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.time() + 300  # only against a hang
        while True:
            assert server.poll() is None, (tmp_path / "server.log").read_text()  # it used to exit here
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass  # not listening yet
            assert time.time() < deadline, (tmp_path / "server.log").read_text()
            time.sleep(0.5)
    finally:
        stop_group(server)
        log.close()
    said = (tmp_path / "server.log").read_text()
    assert "the run queue did not start: the run store cannot be used" in said
    assert f"python -m tcore store set-aside --db {path}" in said and "Application startup failed" not in said


def test_the_shared_reads_follow_a_store_set_aside_to_the_new_one_at_its_path(tmp_path):
    """The process's shared reads (tcore.store.changes) kept a connection to the file that was at the path: after a
    set-aside they went on answering from the old file, so the pages showed it until the server restarted."""
    from tcore.store.changes import reads

    path = tmp_path / "runs.sqlite"
    old = RunStore(path)
    insert_run(old, QUICK)
    assert len(reads(old).list()) == 1
    for suffix in ("", "-wal", "-shm"):  # as set_aside moves them (it refuses a store that is not damaged)
        if path.with_name(path.name + suffix).exists():
            os.rename(path.with_name(path.name + suffix), tmp_path / f"aside{suffix}")
    new = RunStore(path)
    assert reads(new).list() == []
    insert_run(new, QUICK)
    assert len(reads(new).list()) == 1
