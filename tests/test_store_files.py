"""The store's file going away under a running app (a reset deletes it,
as docs/configuration.md says, while a queue still holds it)."""
import os

from tcore.lab.queue import scheduler
from tcore.store import RunStore
from tests.helpers import QUICK


def test_a_store_deleted_while_in_use_is_made_again_and_says_so(tmp_path, capsys):
    store = RunStore(tmp_path / "runs.sqlite")  # as the app's queue holds it for its whole life
    proc = scheduler.this_process()
    store.queue.enqueue(QUICK, device="cpu", owner="ada", proc=proc, timeout_s=None)
    first_id = store.store_id
    for suffix in ("", "-wal", "-shm"):  # what docs/configuration.md says a reset deletes
        if os.path.exists(f"{store.path}{suffix}"):
            os.remove(f"{store.path}{suffix}")

    assert store.list() == []  # not "no such table"
    assert store.queue.running_and_queued(proc.host) == []
    store.owners.heartbeat(proc)  # the queue's own writes go on
    assert "was deleted while in use; a new, empty one was made" in capsys.readouterr().err
    assert RunStore(store.path).list() == []  # a page opening it afresh
    assert store.store_id != first_id  # a new store: reports rendered for the old one are not its own


def test_an_empty_file_in_place_of_the_store_gets_its_tables(tmp_path):
    store = RunStore(tmp_path / "runs.sqlite")
    os.remove(store.path)
    store.path.write_bytes(b"")  # what the next connection to a deleted store leaves: 0 bytes, no tables
    assert store.list() == []
    assert store.queue.queued_count("ada") == 0
