"""Shared test fixtures: an isolated run store and a compile cache shared by tests that don't time cold compiles."""
import os
import sys

# Inductor compiles a graph's kernels in a pool of worker processes, one per core, each importing torch first: on a
# machine of few cores that runs several tests' compiles at once, starting the pool costs more CPU than building in
# parallel saves (the verbatim snippet's cold compile: about 60 CPU-s with the pool, 41 without, on 2 cores). Every
# kernel is still generated and built, in the compiling process; set the variable to have the pool back. A machine
# of many cores (the GPU machine) keeps it: there, kernels building side by side is time saved.
#
# And there the threads of torch's OpenMP pool wait for their next parallel region asleep, not spinning (libgomp
# spins first by default): with the test workers, their runs' workers and compiles all on two cores, the spinning
# threads took the cores from the processes with work to do. Sampled over 5 minutes of a loaded suite, libgomp's
# spin was a third of the test processes' CPU; a tiny MLP's 3,000 steps on two threads, loaded, took 22-35 CPU-s and
# 59-100 s spinning against 4-5 CPU-s and 13-20 s asleep. Every process the tests start inherits it (set before torch
# is imported: libgomp reads it once). The product keeps libgomp's default: a timed run alone on its cores is what
# spinning is for; the GPU machine's tests keep it too.
if (os.cpu_count() or 1) <= 4:
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pytest  # noqa: E402  (after the variable: torch's Inductor reads it once, at import)
import torch  # noqa: E402

from tcore.experiment.spec import Experiment
from tcore.store import RunStore

# The files that take longest, longest first (their tests' times added up, from a run of the first part on this
# 2-core machine shared with other users, 2026-11-28). `make test` gives each file whole to one worker (--dist
# loadfile --no-loadscope-reorder) in the order collected, so these start first and no long file starts last to hold
# the suite up alone. Only how long the suite takes depends on this order; a file not named runs after them, in the
# order collected.
LONGEST_FIRST = ("test_snippet.py", "test_queue.py", "test_snippet_real.py", "test_generate.py", "test_cluster.py",
                 "test_real_models.py", "test_worker.py", "test_caches.py", "test_ladder.py", "test_room.py",
                 "test_ownership.py", "test_generate_diagnose.py", "test_diagnostics.py", "test_ladder_aoti.py",
                 "test_sweep_queue.py", "test_ladder_aot_compile.py", "test_forkserver.py", "test_app.py",
                 "test_model_sweep.py", "test_full_disk.py", "test_timeouts.py", "test_app_diagnose.py")


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: a file's tests keep their order
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run on the GPU machine: pytest -m gpu)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def _isolated_paths(tmp_path_factory):
    """No test touches the user's run store or compile cache. Each test process has its own store; warm runs share
    one compile cache across the whole test run, every xdist worker's too (the folder above a worker's temporary
    folder is the run's): a graph one worker compiled, another loads instead of compiling it again. That is what a
    room does, one cache for every run's compile side by side (Inductor writes its entries whole, then renames);
    which test compiles a graph first already depends on how xdist hands out the files, so no test may count on a
    warm run missing the cache."""
    os.environ["COMPILE_LAB_DB"] = str(tmp_path_factory.mktemp("store") / "runs.sqlite")
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "compile-cache-shared"
    shared.mkdir(exist_ok=True)
    os.environ["COMPILE_LAB_CACHE_DIR"] = str(shared)


@pytest.fixture(scope="module", autouse=True)
def _queues_end_with_their_file():
    """A test that runs anything starts this process's queue for its store (tcore.lab.run.runs), which ticks several
    times a second (a heartbeat written, other lab processes' holds read) for as long as the process lives. A test
    worker runs hundreds of tests, each with a store of its own: without this, a worker ticked for every store it had
    ever used (about half a percent of a core each; 40-80 of them per worker halfway through, a quarter of this
    2-core machine) and published a hold to every one of them. Closed after each file, not each test: a file's
    module fixtures may share a store and its runs across its tests."""
    yield
    from tcore.lab.run import runs

    runs.close_queues()


@pytest.fixture(autouse=True)
def _queues_of_a_test_s_own_folder_end_with_it(request):
    """A store in the test's own tmp_path is used by no later test: its queue ends with the test, not its file (a
    worker kept 4-5 such queues ticking in a long file, each with its hold watcher, about 0.9% of a core apiece)."""
    yield
    own = (request.node.funcargs or {}).get("tmp_path")  # the values of every fixture the test used, kept till now
    if own is not None:
        from tcore.lab.run import runs

        runs.close_queues(under=own)


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
    from tcore.lab.policy import limits
    from tcore.lab.settings import config

    for var in [config.CONFIG_ENV, *limits.ENV.values()]:
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
