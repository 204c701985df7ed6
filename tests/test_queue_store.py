"""The queue's store operations (tcore.store.queue) with a fake owning process and no worker: ids, order, and how
an owner's silence is judged."""
from typing import NamedTuple

import pytest

from tcore.store import RunStore
from tcore.store import queue
from tests.helpers import QUICK


class Proc(NamedTuple):
    host: str
    pid: int
    started: str | None


ME = Proc("h", 1000, "11")


@pytest.fixture
def store(tmp_path):
    return RunStore(tmp_path / "runs.sqlite")


def test_an_id_already_taken_is_drawn_again(store, monkeypatch):
    drawn = iter(["20260101-120000-aaaaaa", "20260101-120000-aaaaaa", "20260101-120000-aaaaaa",
                  "20260101-120000-bbbbbb"])
    monkeypatch.setattr(queue, "new_id", lambda: next(drawn))
    first = store.enqueue(QUICK, device="cpu", owner="ada", proc=ME, timeout_s=None)
    second = store.enqueue(QUICK, device="cpu", owner="ada", proc=ME, timeout_s=None)
    assert (first, second) == ("20260101-120000-aaaaaa", "20260101-120000-bbbbbb")
