"""The lab's limits and refusals: from the file, the environment and the instructor; what is refused before
anything is queued, and who may cancel or delete a run.

Real runs use captioner/tiny with backend=eager (tests.helpers.QUICK): about 4 s each.
"""
import pytest

from tcore.experiment.spec import Experiment, SpecError
from tcore.lab.policy import guards, limits, memory
from tcore.lab.run import runs
from tcore.lab.settings import config, private
from tests.helpers import QUICK, hold_cpu_slot, insert_run

pytestmark = pytest.mark.usefixtures("no_outside_limits")


def test_limits_come_from_the_file_and_the_environment_wins(tmp_path):
    toml = tmp_path / "lab.toml"
    toml.write_text("[limits]\nmax_run_s = 120\nmax_batch_size = 16\nmax_memory_gib = 2.5\n")
    lab = limits.load({"COMPILE_LAB_CONFIG": str(toml), "COMPILE_LAB_MAX_BATCH_SIZE": "8"})
    assert (lab.max_run_s, lab.max_batch_size, lab.max_memory_gib, lab.max_queued_per_session) == (120, 8, 2.5, 5)
    assert lab.run_time(600)[0] == 120 and "lowered from 600 s" in lab.run_time(600)[1]
    (tmp_path / "compile-lab.toml").write_text("[limits]\nmax_batch_size = \"none\"\n")
    assert limits.load({}, cwd=tmp_path).max_batch_size is None

    with pytest.raises(config.LimitsError, match="COMPILE_LAB_MAX_BATCH_SIZE.*whole number"):
        limits.load({"COMPILE_LAB_MAX_BATCH_SIZE": "lots"})
    with pytest.raises(config.LimitsError, match="max_run_s = -5.*from .*lab.toml.*positive number"):
        toml.write_text("[limits]\nmax_run_s = -5\n")
        limits.load({"COMPILE_LAB_CONFIG": str(toml)})
    with pytest.raises(config.LimitsError, match="unknown setting.*max_gpus"):
        toml.write_text("[limits]\nmax_gpus = 2\n")
        limits.load({"COMPILE_LAB_CONFIG": str(toml)})


def test_batch_and_memory_over_the_limits_are_refused_before_anything_is_queued(store, monkeypatch):
    monkeypatch.setenv("COMPILE_LAB_MAX_BATCH_SIZE", "4")
    with pytest.raises(SpecError, match=r"batch_size 8 is over this lab's limit \(max_batch_size = 4 "
                                        r"\(from COMPILE_LAB_MAX_BATCH_SIZE\)\); choose a batch size of at most 4"):
        runs.start(QUICK.replace(batch_size=8), store, owner="s1")

    monkeypatch.setenv("COMPILE_LAB_MAX_MEMORY_GIB", "0.001")
    with pytest.raises(SpecError, match=r"needs an estimated 0\.00\d+ GiB \(weights and activations\), over this "
                                        r"lab's limit per run \(max_memory_gib = 0\.001.*smaller batch_size or preset"):
        runs.start(QUICK, store, owner="s1")

    monkeypatch.delenv("COMPILE_LAB_MAX_MEMORY_GIB")
    monkeypatch.setattr(limits, "device_memory_gib", lambda device: (0.0001, "of RAM available on this machine now"))
    with pytest.raises(SpecError, match=r"needs an estimated .* GiB \(weights, gradients, AdamW state and "
                                        r"activations\), more than the 0\.0001 GiB of RAM available"):
        runs.start(QUICK.replace(task="training"), store, owner="s1")
    assert store.list() == []


def test_the_memory_estimate_grows_with_batch_and_training_needs_more():
    small = memory.estimate_memory_gib(QUICK)
    assert 0 < small < memory.estimate_memory_gib(QUICK.replace(batch_size=64))
    assert memory.estimate_memory_gib(QUICK.replace(task="training")) > small
    resnet = Experiment(model="resnet50", preset="full", batch_size=64, device="cpu")
    # ResNet-50 at 224 px keeps about 5 GiB of activations for backward at batch 64 in float32
    assert 0.3 < memory.estimate_memory_gib(resnet) < 2
    assert 2 < memory.estimate_memory_gib(resnet.replace(task="training")) < 10
    assert memory.estimate_memory_gib(resnet.replace(task="training", precision="amp-bf16")) < \
        memory.estimate_memory_gib(resnet.replace(task="training"))


def test_one_session_may_queue_only_so_many_runs(store, monkeypatch, cleanup):
    monkeypatch.setenv("COMPILE_LAB_MAX_QUEUED_PER_SESSION", "2")
    holder = hold_cpu_slot(store)
    cleanup += [runs.start(QUICK, store, owner="alice") for _ in range(2)]
    with pytest.raises(SpecError, match=r"you already have 2 run\(s\) waiting in the queue.*"
                                        r"max_queued_per_session = 2.*cancel one"):
        runs.start(QUICK, store, owner="alice")
    cleanup.append(runs.start(QUICK, store, owner="bob"))  # another session is not held back by alice
    # the lab's own runs (a calibration queues all its references at once) are no session's: not bounded
    cleanup += [runs.start(QUICK, store, owner="calibration", for_the_lab=True) for _ in range(3)]
    assert [r.status for r in store.list()].count("queued") == 6
    for run in cleanup:
        run.cancel()
    store.finish(holder, result={"device": "cpu"})


def test_a_run_that_cannot_finish_in_its_time_limit_is_refused_with_the_numbers(store, monkeypatch):
    monkeypatch.setenv("COMPILE_LAB_MAX_RUN_S", "900")
    long = QUICK.replace(timed_steps=None, timed_s=600.0, rounds=50)
    with pytest.raises(SpecError) as refused:
        runs.start(long, store)
    assert ("needs at least 1200 s (2 × 600 s timed), more than its time limit of 900 s "
            "(this lab's max_run_s = 900.0 (from COMPILE_LAB_MAX_RUN_S))") in str(refused.value)
    assert store.list() == []  # nothing was queued
    runs.start(long.replace(timed_s=4.0, rounds=2), store).cancel()  # what fits is accepted


def test_the_compile_a_run_must_fit_is_that_of_runs_from_the_same_kind_of_cache(store):
    """Walk 6: a run from artifacts was held to its cold runs' compile time, which loading an artifact never nears."""
    cold = QUICK.replace(cache="cold")
    for exp, compile_s in ((cold, 600.0), (QUICK.replace(cache="artifacts"), 3.0)):
        store.finish(insert_run(store, exp), result={"device": "cpu", "compile_s": compile_s}, env={})
    assert limits.typical_compile_s(cold, "cpu", store) == 600.0
    assert limits.typical_compile_s(QUICK.replace(cache="artifacts"), "cpu", store) == 3.0
    assert limits.typical_compile_s(QUICK.replace(cache="warm"), "cpu", store) is None  # none warm yet: no bound


def test_only_the_owner_or_the_instructor_may_cancel_or_delete_a_run(store):
    run_id = insert_run(store, QUICK)
    with store._write() as db:
        db.execute("UPDATE runs SET owner='ada~3f9a' WHERE id=?", (run_id,))
    store.finish(run_id, result={"device": "cpu"})
    with pytest.raises(PermissionError, match="only its owner or the instructor can delete it"):
        runs.delete(run_id, store, owner="bob~0c1d")
    with pytest.raises(PermissionError, match="can cancel it"):
        runs.cancel(run_id, store, owner="bob~0c1d")
    runs.delete(run_id, store, owner="bob~0c1d", instructor=True)
    assert store.list() == []


def test_the_instructor_passcode_comes_from_the_file_or_the_environment(tmp_path):
    assert guards.instructor_passcode({}, cwd=tmp_path) is None
    assert not guards.is_instructor("anything", {}, cwd=tmp_path)  # no passcode set: nobody is instructor
    (tmp_path / "compile-lab.toml").write_text('[instructor]\npasscode = "sesame"\n')
    assert guards.is_instructor("sesame", {}, cwd=tmp_path)
    assert not guards.is_instructor("Sesame", {}, cwd=tmp_path) and not guards.is_instructor("", {}, cwd=tmp_path)
    env = {private.PASSCODE_ENV: "open"}
    assert guards.is_instructor("open", env, cwd=tmp_path) and not guards.is_instructor("sesame", env, cwd=tmp_path)


def test_limits_the_instructor_sets_in_the_app_win_until_reset(store, monkeypatch):
    monkeypatch.setenv("COMPILE_LAB_MAX_BATCH_SIZE", "64")
    now = limits.set_by_instructor(store, {"max_batch_size": 4, "max_run_s": 120.0})
    assert now.max_batch_size == 4 and now.max_run_s == 120.0
    assert now.describe("max_batch_size") == "max_batch_size = 4 (from the instructor, in the app)"
    with pytest.raises(SpecError, match="batch_size 8 is over this lab's limit"):
        runs.start(QUICK.replace(batch_size=8), store)
    with pytest.raises(config.LimitsError, match="max_queued_per_session = 0"):
        limits.set_by_instructor(store, {"max_queued_per_session": 0})
    assert limits.load(store=store).max_batch_size == 4  # a refused change changes nothing
    assert limits.set_by_instructor(store, None).max_batch_size == 64  # back to the environment's


def test_a_forward_that_reads_its_inputs_values_has_no_estimate_and_the_run_still_queues(store, monkeypatch):
    # BART's training forward read a value on fake tensors (torch 2.11) and the check before queueing raised a
    # traceback instead of running: a forward that cannot run abstractly means no estimate, as a missing meta
    # kernel does, and the run's own OOM guard applies.
    import torch

    import sample_models

    entry = sample_models.get("captioner")

    class ReadsValues(torch.nn.Module):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, *inputs):
            if inputs[0].float().sum() > 0:  # a Python branch on a value: impossible without storage
                return self.net(*inputs)
            return self.net(*inputs)

    class Wrapped:
        def __getattr__(self, name):
            return getattr(entry, name)

        def build(self, preset, **kw):
            return ReadsValues(entry.build(preset, **kw))

    monkeypatch.setattr(sample_models, "get", lambda name: Wrapped())
    from tcore.lab.policy import memory
    memory._estimate_bytes.cache_clear()
    exp = QUICK.replace(batch_size=3)
    with pytest.raises(NotImplementedError, match="cannot run on abstract tensors"):
        memory.estimate_memory_gib(exp)
    limits.check(exp, "cpu", "s1", store, limits.load({}))  # refused nothing, raised nothing
    memory._estimate_bytes.cache_clear()


@pytest.mark.parametrize("name, written, shown", [
    ("max_run_s", "1e400", "inf"), ("max_run_s", "nan", "nan"), ("max_run_s", "inf", "inf"),
    ("max_run_s", "700000", "700000"), ("max_memory_gib", "1e400", "inf"), ("max_memory_gib", "200000", "200000"),
    ("max_batch_size", "10000000", "10000000")])
def test_an_infinite_nan_or_absurd_limit_is_refused_from_the_file_and_the_environment(tmp_path, name, written, shown):
    """1e400 is infinity in TOML and in float(): accepted, it would switch the limit off without anyone asking."""
    allowed = {"max_run_s": "at most 604800 (a week)", "max_memory_gib": "at most 100000",
               "max_batch_size": "from 1 to 1000000"}[name]
    toml = tmp_path / "lab.toml"
    toml.write_text(f"[limits]\n{name} = {written}\n")
    with pytest.raises(config.LimitsError) as from_file:
        limits.load({"COMPILE_LAB_CONFIG": str(toml)})
    with pytest.raises(config.LimitsError) as from_environment:
        limits.load({limits.ENV[name]: written}, cwd=tmp_path)
    for said, where in ((str(from_file.value), str(toml)), (str(from_environment.value), limits.ENV[name])):
        assert said.startswith(f"{name} = {shown}") and f"(from {where})" in said and allowed in said, said


@pytest.mark.parametrize("values", [{"max_run_s": float("inf")}, {"max_run_s": float("nan")},
                                    {"max_run_s": 1e9}, {"max_memory_gib": 1e6}])
def test_the_instructor_cannot_set_an_infinite_nan_or_absurd_limit(store, values):
    (name, value), = values.items()
    with pytest.raises(config.LimitsError, match=f"{name} = {value!r}: it must be .*at most"):
        limits.set_by_instructor(store, values)
    assert getattr(limits.load(store=store), name) == getattr(limits.Limits(), name)  # nothing was stored


@pytest.mark.parametrize("value", ["٣", "２", "1_000", "３.５"])
def test_a_limit_in_digits_other_than_ascii_is_refused(value):
    for name in ("max_batch_size", "max_run_s"):
        with pytest.raises(config.LimitsError, match=f"{name} = .* it must be"):
            limits.load({limits.ENV[name]: value})
