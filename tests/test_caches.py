"""Warm starts: portable compile artifacts spare a cold compile, and mismatched ones fall back to cold.

How much time they save is measured, not tested (BENCHMARKS.md: cold against warm); here, that the warm run built
no Inductor graph of its own. The file's one cold Inductor run also answers what Diagnose shows of a real compile
(fewer kernels than eager, each step's time accounted for): the suite's other real Inductor runs on the CPU are few,
each most of a minute of its cores.
"""
import gzip
import json
import os
import sqlite3

import pytest

from tcore.experiment.comparable import compile_key
from tcore.experiment.spec import Experiment
from tcore.figures.breakdown import CATEGORIES
from tcore.lab.outputs import artifact_handover
from tcore.lab.run import runs
from tcore.store import RunStore
from tcore.worker import compile_artifacts as worker_artifacts
from tcore.worker import envinfo


def test_compile_key_ignores_timing_but_not_compile_settings():
    base = Experiment(model="captioner", preset="tiny").to_dict()
    assert compile_key(base, "cpu") == compile_key({**base, "timed_s": 9, "cache": "artifacts"}, "cpu")
    assert compile_key(base, "cpu") != compile_key({**base, "mode": "max-autotune"}, "cpu")
    assert compile_key(base, "cpu") != compile_key(base, "cuda")


COLD = Experiment(model="captioner", preset="tiny", batch_size=2, device="cpu", warmup_steps=1, timed_steps=2,
                  rounds=1, cache="cold", seed=7)


@pytest.fixture(scope="module")
def cold_run(tmp_path_factory):
    """One cold run that the warm start and the artifacts start below both follow (each would otherwise pay its own
    cold compile, a minute of the suite's cores): its store, its record, and the shared compile cache it filled,
    which COMPILE_LAB_CACHE_DIR names for this file's runs (empty before it: nothing warm before the cold run)."""
    folder = tmp_path_factory.mktemp("caches")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COMPILE_LAB_CACHE_DIR", str(folder / "shared"))
        store = RunStore(folder / "runs.sqlite")
        cold = runs.execute(COLD, store)
        assert cold.status == "finished", cold.error
        yield store, cold, folder / "shared"


@pytest.mark.compile
def test_artifacts_from_a_cold_run_spare_the_next_start_its_compile(cold_run, tmp_path, monkeypatch):
    store, cold, _ = cold_run  # first of the two: a run after it saves artifacts too, and the newest are loaded
    exp = COLD
    assert cold.result["cache_artifacts_bytes"] > 0

    warm = runs.execute(exp.replace(cache="artifacts"), store)
    assert warm.status == "finished", warm.error
    assert warm.result["cache_artifacts"] == "loaded"
    assert cold.result["fx_graph_cache_misses"] > 0  # the cold run built its graphs ...
    assert warm.result["fx_graph_cache_misses"] == 0  # ... the warm one built none: every graph came from the artifacts
    assert warm.result["fx_graph_cache_hits"] + warm.result["aot_autograd_cache_hits"] > 0
    assert any(f"saved by run {cold.id}" in n for n in warm.result["notes"])

    # Artifacts from another torch build are not loaded: the worker says why and compiles cold. The lab hands
    # them over as it would for a third run; the worker's check runs here (a third cold compile would only repeat
    # the cold run's, and the way its note reaches the record is the one test_artifacts_without_... checks).
    with sqlite3.connect(store.path) as db:
        db.execute("UPDATE compile_artifacts SET made_on=?",
                   (json.dumps({"torch": "2.11.0+cu130", "triton": "3.6.0", "device_name": "NVIDIA H200"}),))
    env = artifact_handover.launch_env(exp.replace(cache="artifacts").to_dict(), "cpu", store, tmp_path)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert worker_artifacts.LOAD_ARTIFACTS_FROM in os.environ  # the lab did hand over the stored artifacts
    what, note = worker_artifacts.load(envinfo.collect("cpu"))
    assert what == "cold"
    assert "made with torch 2.11.0+cu130" in note and "compiles cold" in note


@pytest.mark.compile
def test_the_first_warm_run_after_a_cold_one_finds_its_compile(cold_run):
    """A cold run filled no cache a warm run reads, so the first warm run after it compiled from scratch (72.9 s warm
    against 77.9 s cold, 0 hits, on a GPU) under the label "warm (local cache)". The cold run's own compile stays
    cold; once it has measured, its compile goes into the shared cache, and the warm run hits."""
    store, cold, shared = cold_run
    assert cold.result["fx_graph_cache_hits"] == 0 and cold.result["fx_graph_cache_misses"] > 0
    assert list((shared / "inductor").rglob("*")), "the cold run left nothing for warm runs"

    warm = runs.execute(COLD.replace(cache="warm"), store)
    assert warm.status == "finished", warm.error
    assert warm.result["fx_graph_cache_misses"] == 0
    assert warm.result["fx_graph_cache_hits"] > 0


@pytest.mark.compile
def test_inductor_launches_fewer_kernels_than_eager_and_each_step_is_accounted_for(cold_run):
    """The cold run's profile: fewer kernels compiled than eager, and a time breakdown of each variant that adds up."""
    store, rec, _ = cold_run
    result = rec.result
    assert 0 < result["compiled_kernels_per_step"] < result["eager_kernels_per_step"]
    assert result["generated_graph_count"] == result["graph_count"] == 1
    for variant in ("eager", "compiled"):
        b = result["breakdown"][variant]
        assert b["source"] == "cpu ops" and b["steps"] >= 3
        assert sum(b["ms"].values()) == pytest.approx(b["step_ms"], rel=0.01)  # categories + idle = the step
        assert b["ms"]["matmul"] > 0 and b["top"]
        assert result[f"{variant}_profiled_step_ms"] == pytest.approx(b["step_ms"], abs=1e-3)
        assert set(b["ms"]) == set(CATEGORIES)
        trace = store.artifacts.profiler_trace(rec.id, variant)
        assert "traceEvents" in json.loads(gzip.decompress(trace))  # a Chrome trace, kept with the run
    assert any("cpp_fused" in t["name"] for t in result["breakdown"]["compiled"]["top"])


def test_artifacts_without_an_earlier_run_say_so(store):
    exp = Experiment(model="resnet50", preset="tiny", device="cpu", backend="eager", warmup_steps=1,
                     timed_steps=2, rounds=1, cache="artifacts")
    record = runs.execute(exp, store)
    assert record.result["cache_artifacts"] == "cold"
    assert any("run it once cold first" in n for n in record.result["notes"])


def test_a_cold_runs_compile_goes_into_the_shared_cache_whole_and_without_its_locks(tmp_path):
    fresh, shared = tmp_path / "run", tmp_path / "shared"
    (fresh / "inductor" / "fxgraph" / "ab").mkdir(parents=True)
    (fresh / "inductor" / "fxgraph" / "ab" / "entry").write_bytes(b"graph")
    (fresh / "inductor" / "cd").mkdir()
    kernel = fresh / "inductor" / "cd" / "kernel.so"
    kernel.write_bytes(b"\x7fELF")
    kernel.chmod(0o755)
    (fresh / "inductor" / "locks").mkdir()
    (fresh / "inductor" / "locks" / "x.lock").write_text("")
    (fresh / "triton" / "HASH").mkdir(parents=True)
    (fresh / "triton" / "HASH" / "k.json").write_text("{}")
    (shared / "inductor" / "fxgraph" / "ab").mkdir(parents=True)
    (shared / "inductor" / "fxgraph" / "ab" / "entry").write_bytes(b"kept")  # already there: left as it is

    assert artifact_handover.share_compiled(fresh, shared) == 2
    assert (shared / "inductor" / "fxgraph" / "ab" / "entry").read_bytes() == b"kept"
    assert (shared / "inductor" / "cd" / "kernel.so").read_bytes() == b"\x7fELF"
    assert os.access(shared / "inductor" / "cd" / "kernel.so", os.X_OK)  # a kernel stays loadable
    assert (shared / "triton" / "HASH" / "k.json").read_text() == "{}"
    assert not (shared / "inductor" / "locks").exists()
    assert not list(shared.rglob("*.part"))  # every file renamed into place
    assert artifact_handover.share_compiled(fresh, shared) == 0  # a second copy adds nothing
