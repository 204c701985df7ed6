"""The app's threads make their first imports of torch's compiler and the model libraries one at a time
(sample_models.first_imports): a feature check, a source's catalog and a model's entry each hold IMPORT_LOCK.
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


def test_a_feature_check_holds_the_import_lock_while_it_detects():
    assert not held_by_another_thread()
    seen = []
    feature = features.Feature("probe", "a probe", "2.0", lambda: seen.append(held_by_another_thread()) or True)
    assert feature.available
    assert seen == [True]


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
