"""The app's threads make their first imports of torch's compiler and the model libraries one at a time
(sample_models.first_imports): a feature's first check, a source's catalog and a model's entry hold IMPORT_LOCK.
bench/import_race.py shows what happens without it (a page's run and its replacement importing at once)."""
from __future__ import annotations

import threading

import pytest

import sample_models
from sample_models import sources
from sample_models.first_imports import IMPORT_LOCK
from tcore.host import features


def held_by_another_thread() -> bool:
    """Whether a thread holds IMPORT_LOCK now, the caller included: a fresh thread tries to take it."""
    free = []

    def attempt():
        took = IMPORT_LOCK.acquire(blocking=False)
        if took:
            IMPORT_LOCK.release()
        free.append(took)

    probe = threading.Thread(target=attempt)
    probe.start()
    probe.join()
    return not free[0]


def test_a_features_first_check_holds_the_import_lock_and_later_ones_take_none(monkeypatch):
    """The first check of a feature may import (torch._dynamo, torch._inductor) and holds the lock; later ones import
    nothing and take no lock, so a page does not wait while another person's model is read."""
    seen = []
    probe = features.Feature("probe", "a probe", "2.0", lambda: seen.append(held_by_another_thread()) or True)
    monkeypatch.setattr(features, "_checked_once", set())  # as in a fresh process
    assert not held_by_another_thread()
    assert probe.available and probe.available
    assert seen == [True, False]
    IMPORT_LOCK.acquire()  # a model being read in this thread: another thread's check goes on
    try:
        done = threading.Thread(target=lambda: seen.append(probe.available))
        done.start()
        done.join(timeout=60)  # ends at once; were it waiting for the lock, it would wait for ever
        assert not done.is_alive()
    finally:
        IMPORT_LOCK.release()
    assert seen == [True, False, True, True]


class ProbeSource(sources.Source):
    """A source whose catalog and entry record whether the lock was held while the library would be imported."""
    key, title = "probe", "probe"

    def __init__(self):
        self.seen = []

    def names(self):
        self.seen.append(("names", held_by_another_thread()))
        return ["one"]

    def entry(self, ref):
        self.seen.append(("entry", held_by_another_thread()))
        raise sources.UnknownModel(f"probe has no model {ref!r}")  # entry's own words pass through unchanged


@pytest.fixture
def probe_source(monkeypatch):
    probe = ProbeSource()
    monkeypatch.setitem(sources.SOURCES, "probe", probe)
    sources._names.cache_clear()
    sources._entry.cache_clear()
    yield probe
    sources._names.cache_clear()
    sources._entry.cache_clear()


def test_a_sources_catalog_and_a_models_entry_hold_the_import_lock(probe_source):
    assert sample_models.catalog("probe") == ["probe:one"]
    with pytest.raises(sources.UnknownModel, match="probe has no model 'two'"):
        sample_models.get("probe:two")
    assert probe_source.seen == [("names", True), ("entry", True)]
    assert not held_by_another_thread()  # and let go after, the entry's error included


def test_a_files_card_is_read_without_the_lock(monkeypatch):
    """The app never imports a model file; its card may come from a child reading the file for seconds, which must
    not hold up every other page's model."""
    seen = []

    def entry(ref):
        seen.append(held_by_another_thread())
        raise sources.UnknownModel("no such file")

    monkeypatch.setattr(sources.SOURCES_FILE, "entry", entry)
    with pytest.raises(sources.UnknownModel):
        sample_models.get("file:m.py")
    assert seen == [False]
