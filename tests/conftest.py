"""Shared test fixtures: an isolated run store and a compile cache shared by tests that don't time cold compiles."""
import os
import sys

import pytest
import torch

from tcore.experiment.spec import Experiment
from tcore.store import RunStore


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run on the GPU machine: pytest -m gpu)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def _isolated_paths(tmp_path_factory):
    """No test touches the user's run store or compile cache; warm runs share one cache per session."""
    os.environ["COMPILE_LAB_DB"] = str(tmp_path_factory.mktemp("store") / "runs.sqlite")
    os.environ["COMPILE_LAB_CACHE_DIR"] = str(tmp_path_factory.mktemp("compile-cache"))


@pytest.fixture(autouse=True)
def _keep_main_module():
    """AppTest installs app.py as sys.modules["__main__"] and leaves it there; a process spawned by a later
    test would then run app.py (start the queue, recover runs) before its target. Put the real one back."""
    main = sys.modules["__main__"]
    yield
    sys.modules["__main__"] = main


@pytest.fixture
def store(tmp_path):
    return RunStore(tmp_path / "runs.sqlite")


@pytest.fixture
def tiny():
    """The smallest real experiment: a tiny model, a short timed stage, warm compile caches."""
    return Experiment(model="captioner", preset="tiny", batch_size=2, device="cpu", warmup_steps=2,
                      timed_steps=4, rounds=2, cache="warm")


@pytest.fixture
def no_outside_limits(monkeypatch, tmp_path):
    """Only the limits a test sets apply: no compile-lab.toml from the working dir, no COMPILE_LAB_MAX_* vars."""
    from tcore.lab import limits

    for var in [limits.CONFIG_ENV, *limits.ENV.values()]:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def cleanup():
    """Runs a test started; any still going at the end are cancelled, so no worker outlives its test."""
    started = []
    yield started
    for run in started:
        if not run.done:
            run.cancel()
        run.wait(60)
