"""A run store that fails under the app reaches the person as a sentence, never as a traceback with source paths;
and Streamlit's own error details are off for participants."""
import subprocess
import sys

import pytest

from tcore.lab.launcher import REPO_ROOT
from tcore.store import RunStore
from tests.app_harness import app, texts
from tests.helpers import QUICK, insert_run


def damaged(path):
    """A store whose header is fine and whose tables are not: SQLite says 'database disk image is malformed'."""
    store = RunStore(path)
    for _ in range(30):
        insert_run(store, QUICK)
    with store._connect() as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(path.read_bytes())
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
