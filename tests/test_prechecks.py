"""The checks before and around a run never stop it with a traceback: a model whose constructor or forward cannot run
on the meta device (an op without a meta kernel, a size or a branch that depends on values), or that raises while it
is read, gets a fallback that says so, or a one-line reason.

Each class of failure is a tiny model file of its own, read as a worker reads it (imports allowed for the test)."""
import pytest
import torch

import sample_models
from sample_models import interface
from sample_models.sources import file_models
from sample_models.sources.common import _build_on
from tcore.experiment.spec import Experiment, SpecError
from tcore.lab.policy import limits, memory

HEAD = """
import torch
import torch.nn as nn

PRESETS = {"tiny": dict(width=16)}


def make_batch(preset, batch_size, device, generator):
    x = torch.randn(batch_size, 16, device=device, generator=generator)
    return (x,), x
"""
MODEL = """

class Model(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.lin = nn.Linear(width, width)
{init}
    def forward(self, x):
        y = self.lin(x)
{forward}

def build(preset):
    return Model(**PRESETS[preset])
"""
# forward bodies, each a class of failure on the meta device
NO_META_KERNEL = "        return y * torch.unique(x.round()).numel()  # aten::_unique2 has no meta kernel"
VALUE_SIZED = "        return y + y[torch.nonzero(y > 0, as_tuple=True)].sum()  # a size that depends on values"
VALUE_BRANCH = "        return y * 2 if y.sum().item() > 0 else y  # a Python branch on a value"
PLAIN = "        return y"
# constructors that read a tensor they made, as timm's RegNet did before 1.0.30 (torch.unique(widths))
INIT_NO_META_KERNEL = "        self.widths = torch.unique(torch.tensor([width, width, 2 * width])).tolist()"
INIT_ITEM = "        self.scale = float(torch.arange(4.0).sum().item())"
INIT_DEVICE_CHECK = "        assert torch.empty(0).device.type != 'meta', 'this model refuses the meta device'"


def model_file(tmp_path, forward=PLAIN, init="", name="model") -> str:
    path = tmp_path / f"{name}.py"
    path.write_text(HEAD + MODEL.format(init=init, forward=forward))
    return f"file:{path}"


@pytest.fixture
def as_worker(monkeypatch):
    """This process reads model files as a worker does; no estimate or FLOP count is kept from another test."""
    monkeypatch.setattr(file_models, "_IMPORTS_ALLOWED", True)
    memory._estimate_bytes.cache_clear()
    interface.clear_counts()
    yield
    memory._estimate_bytes.cache_clear()
    interface.clear_counts()


def experiment(model: str, **kw) -> Experiment:
    return Experiment(model=model, preset="tiny", batch_size=4, device="cpu", **kw)


@pytest.mark.parametrize("init", [INIT_NO_META_KERNEL, INIT_ITEM, INIT_DEVICE_CHECK],
                         ids=["no-meta-kernel", "item", "device-check"])
def test_a_constructor_that_cannot_run_on_meta_is_built_on_the_cpu_with_its_weights_on_meta(tmp_path, as_worker,
                                                                                            init):
    name = model_file(tmp_path, init=init)
    entry = sample_models.get(name)  # the worker's entry builds it on meta to read it
    model = entry.build("tiny", device="meta")
    assert {p.device.type for p in model.parameters()} == {"meta"}
    assert entry.param_count("tiny") == 16 * 16 + 16
    assert memory.estimate_memory_gib(experiment(name)) > 0
    assert entry.flops_per_sample("tiny") == 2 * 16 * 16


def test_a_constructor_that_raises_everywhere_raises_its_own_error_not_meta_s():
    def build():
        raise TypeError("bad argument")

    with pytest.raises(TypeError, match="bad argument"):
        _build_on("meta", build)


@pytest.mark.parametrize("forward", [NO_META_KERNEL, VALUE_SIZED], ids=["no-meta-kernel", "value-sized"])
def test_a_forward_with_value_dependent_sizes_is_estimated_on_symbolic_sizes_and_its_flops_counted(tmp_path, as_worker,
                                                                                               forward):
    name, plain = model_file(tmp_path, forward=forward), model_file(tmp_path, name="plain")
    weights = (16 * 16 + 16) * 4
    need = memory.estimate_memory_gib(experiment(name)) * 2**30
    # a value-sized tensor counted at its largest
    assert need >= memory.estimate_memory_gib(experiment(plain)) * 2**30 > weights
    assert memory.why_unknown(experiment(name)) is None
    assert memory.estimate_memory_gib(experiment(name, task="training")) * 2**30 > need
    for training in (False, True):
        assert sample_models.get(name).flops_per_sample("tiny", training=training) == \
            sample_models.get(plain).flops_per_sample("tiny", training=training) > 0


def test_a_forward_that_branches_on_a_value_has_no_estimate_a_reason_and_flops_counted_on_the_cpu(tmp_path, as_worker,
                                                                                               store):
    name = model_file(tmp_path, forward=VALUE_BRANCH)
    exp = experiment(name)
    with pytest.raises(NotImplementedError, match="cannot run on abstract tensors .*item"):
        memory.estimate_memory_gib(exp)
    assert "cannot run on abstract tensors" in memory.why_unknown(exp)
    assert limits.check(exp, "cpu", None, store, limits.load({})) is None  # no estimate: queued, refused nothing
    note = memory.unknown_note(exp, shares_gpu=True)
    assert note.startswith("the memory estimate is unknown for this model (") and "out-of-memory guard alone" in note
    assert "alone on its GPU" in note and "alone on its GPU" not in memory.unknown_note(exp, shares_gpu=False)
    assert sample_models.get(name).flops_per_sample("tiny") == 2 * 16 * 16  # a real run at batch 1 on the CPU


def test_flops_that_cannot_be_counted_anywhere_say_why(tmp_path, as_worker, monkeypatch):
    name = model_file(tmp_path, forward=VALUE_BRANCH)
    monkeypatch.setattr(interface, "FLOPS_ON_CPU_MAX_PARAMS", 10)
    with pytest.raises(NotImplementedError, match="could not be counted .*too many to count on the CPU"):
        sample_models.get(name).flops_per_sample("tiny")


def test_a_model_that_cannot_even_be_built_has_no_estimate_and_says_so(monkeypatch):
    entry = sample_models.get("captioner")

    class Broken:
        def __getattr__(self, name):
            return getattr(entry, name)

        def build(self, preset, **kw):
            raise RuntimeError("the constructor fails")

    monkeypatch.setattr(sample_models, "get", lambda name: Broken())
    memory._estimate_bytes.cache_clear()
    try:
        with pytest.raises(memory.NoEstimate, match="cannot be built on the meta device .*the constructor fails"):
            memory.estimate_memory_gib(experiment("captioner"))
    finally:
        memory._estimate_bytes.cache_clear()


def test_a_library_error_while_reading_a_model_is_a_reason_before_the_run(monkeypatch):
    """What a library raises while the lab reads a model's sizes (here a NotImplementedError, as timm's RegNet raised
    on the meta device before 1.0.30) refuses the spec in one line, never a traceback in place of the check."""
    from sample_models import sources

    def fails(ref):
        raise NotImplementedError("aten::_unique2: attempted to run this operator with Meta tensors")

    monkeypatch.setattr(sources.SOURCES["timm"], "entry", fails)
    sources._entry.cache_clear()
    try:
        with pytest.raises(SpecError, match="timm:broken could not be built here to read its sizes "
                                            r"\(NotImplementedError: aten::_unique2"):
            Experiment(model="timm:broken", device="cpu")
    finally:
        sources._entry.cache_clear()


def test_the_shape_schedule_reads_a_batch_that_cannot_be_made_on_meta_on_the_cpu(tmp_path, as_worker):
    from tcore.experiment import schedule

    path = tmp_path / "batch.py"
    path.write_text(HEAD.replace("return (x,), x", "keep = int((x > 0).sum().item()) * 0 + batch_size  # a value\n"
                                                   "    return (x[:keep],), x[:keep]") + MODEL.format(init="",
                                                                                                 forward=PLAIN))
    exp = experiment(f"file:{path}", shape_count=3)
    assert schedule.varying_dims(exp, sample_models.get(exp.model)) == [(0, 0), (1, 0)]


def test_timm_regnet_as_it_was_before_1_0_30_reads_its_sizes_and_is_estimated(monkeypatch):
    """On an H100 with timm 1.0.29, `--model timm:regnety_040` stopped before the run with NotImplementedError
    (aten::_unique2 on the meta device, in RegNet's constructor). The same constructor, as it was, here."""
    timm = pytest.importorskip("timm")
    from timm.models import regnet

    from sample_models import sources

    real = regnet.generate_regnet

    def as_before(*args, **kwargs):
        torch.unique(torch.arange(4.0))  # on the default device, meta under torch.device("meta"), as timm 1.0.29 did
        return real(*args, **kwargs)

    monkeypatch.setattr(regnet, "generate_regnet", as_before)
    with torch.device("meta"), pytest.raises(NotImplementedError, match="_unique2"):
        timm.create_model("regnety_002", pretrained=False)  # the failure is real on this torch
    sources._entry.cache_clear()
    memory._estimate_bytes.cache_clear()
    try:
        exp = Experiment(model="timm:regnety_002", preset="tiny", batch_size=2, device="cpu", dynamic=True)
        assert memory.estimate_memory_gib(exp) > 0
    finally:
        sources._entry.cache_clear()
        memory._estimate_bytes.cache_clear()


@pytest.mark.usefixtures("no_outside_limits")
def test_a_run_without_an_estimate_queues_and_carries_the_note(store, monkeypatch, cleanup):
    from tcore.lab.run import runs
    from tests.helpers import QUICK, hold_cpu_slot

    monkeypatch.setattr(memory, "_estimate_bytes", lambda *key: "its forward cannot run on abstract tensors (test)")
    holder = hold_cpu_slot(store)  # the run stays queued: nothing runs
    run = runs.start(QUICK, store)
    cleanup.append(run)
    assert [r.status for r in store.list()].count("queued") == 1
    assert ("the memory estimate is unknown for this model (its forward cannot run on abstract tensors (test)): it "
            "runs with the out-of-memory guard alone") in run.notes  # on the CPU no GPU is shared
    run.cancel()
    store.finish(holder, result={"device": "cpu"})


def test_a_run_whose_flops_cannot_be_counted_goes_on_without_them(monkeypatch):
    """The FLOP count is a pre-check inside the worker: where it cannot be made, the figure is n/a with the reason,
    and the run's own figures stand."""
    from types import SimpleNamespace

    from tcore.experiment.spec import Experiment
    from tcore.host.power import PowerMeter
    from tcore.worker.measurement import Measurement

    def cannot(preset, *, training=False):
        raise NotImplementedError("its forward reads a tensor's values on every device the lab can count on")

    model = torch.nn.Linear(4, 4)
    w = SimpleNamespace(model=model, entry=SimpleNamespace(flops_per_sample=cannot), schedule=None)
    m = Measurement(Experiment(device="cpu"), "cpu", PowerMeter("none here"), lambda e: None, None, {})
    m._describe(w)
    assert m.result.run.flops_per_step is None and m.result.run.param_count == 20
    assert "could not be counted: its forward reads" in m.result.unavailable["flops_per_step"]
