"""Measurement in the worker on the CPU: timed blocks, peak memory, power meters, compile diagnostics, protocol."""
import io
import json
import threading
from types import SimpleNamespace

import pytest
import torch

from tcore import figures
from tcore.analysis import report
from tcore.experiment import protocol
from tcore.experiment.spec import Experiment
from tcore.host.power import PowerMeter, PowerSampler, RaplMeter, open_meter
from tcore.worker.diagnostics import phase_split_s
from tcore.worker.timing import PeakMemory, time_block
from tests.helpers import StepClock


class FakeMeter(PowerMeter):
    """A meter whose counter advances by a fixed number of joules per reading."""

    source = "fake"

    def __init__(self, joules_per_read=1.0):
        super().__init__(reason="")
        self.total, self.step = 0.0, joules_per_read

    def energy_j(self):
        self.total += self.step
        return self.total

    def power_w(self):
        return 100.0


def test_time_block_counts_steps_and_energy_on_cpu():
    calls = []
    block = time_block(lambda: calls.append(1), 7, "cpu", FakeMeter(joules_per_read=3.0))
    assert len(calls) == 7 and block.steps == 7 and len(block.step_s) == 7
    assert block.energy_j == 3.0
    assert block.wall_s >= sum(block.step_s) * 0.99


def test_cpu_peak_memory_sees_an_allocation_and_resets():
    mem = PeakMemory("cpu")
    mem.reset()
    before = mem.peak_gib()
    blob = bytearray(300 * 2**20)
    blob[:: 4096] = b"x" * len(blob[:: 4096])  # touch every page so it is resident
    assert mem.peak_gib() - before > 0.25
    del blob
    mem.reset()
    assert mem.peak_gib() - before < 0.1


def test_cpu_without_rapl_says_why():
    meter = open_meter("cpu")
    if meter.available:
        pytest.skip("this machine has a readable RAPL counter")
    assert not meter.available and "RAPL" in meter.reason
    assert meter.energy_j() is None


def test_rapl_sums_domains_and_survives_counter_wrap(tmp_path):
    domains = []
    for i, start in enumerate((900, 50)):
        d = tmp_path / f"intel-rapl:{i}"
        d.mkdir()
        (d / "max_energy_range_uj").write_text("999")
        (d / "energy_uj").write_text(str(start))
        domains.append(str(d))
    meter = RaplMeter(domains)
    (tmp_path / "intel-rapl:0" / "energy_uj").write_text("100")  # wrapped: 900 -> 999 -> 0 -> 100 = 200 uJ
    (tmp_path / "intel-rapl:1" / "energy_uj").write_text("150")  # +100 uJ
    assert meter.energy_j() == pytest.approx(300e-6)


def test_power_sampler_tags_samples_with_the_phase():
    batches, five = [], threading.Event()

    def emit(batch):
        batches.append(batch)
        if sum(map(len, batches)) >= 5:
            five.set()

    sampler = PowerSampler(FakeMeter(), emit, hz=100, flush_every_s=0.02).start()
    sampler.phase = "measuring"
    assert five.wait(60), "the sampler handed over fewer than 5 samples in 60 s"  # 0.05 s at 100 Hz when unhurried
    sampler.stop()
    samples = [s for b in batches for s in b]
    assert len(samples) >= 5
    assert samples[-1][1] == 100.0 and samples[-1][2] == "measuring"
    assert all(a[0] <= b[0] for a, b in zip(samples, samples[1:]))


def test_compile_phase_split_nests_timers():
    fwd = SimpleNamespace(dynamo_cumulative_compile_time_us=10e6, aot_autograd_cumulative_compile_time_us=8e6,
                          inductor_cumulative_compile_time_us=7e6,
                          inductor_code_gen_cumulative_compile_time_us=5e6)
    bwd = SimpleNamespace(dynamo_cumulative_compile_time_us=None, aot_autograd_cumulative_compile_time_us=None,
                          inductor_cumulative_compile_time_us=3e6,
                          inductor_code_gen_cumulative_compile_time_us=2e6)
    assert phase_split_s([fwd, bwd]) == {"dynamo_tracing_s": 2.0, "aot_autograd_s": 1.0,
                                         "inductor_lowering_s": 3.0, "codegen_and_compile_s": 7.0}


def test_event_writer_writes_whole_lines_from_many_threads():
    stream = io.StringIO()
    emit = protocol.EventWriter(stream)
    threads = [threading.Thread(target=lambda i=i: [emit({"type": "progress", "done": i}) for _ in range(50)])
               for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 200
    assert all(protocol.parse(line)["type"] == "progress" for line in lines)
    assert "t" in json.loads(lines[0])


def test_non_event_lines_become_log_events():
    assert protocol.parse("g++ -O3 ...\n") == {"type": "log", "line": "g++ -O3 ..."}
    assert protocol.parse('{"no_type": 1}')["type"] == "log"
    with pytest.raises(AssertionError):
        protocol.error("exploded", "not a known kind")


def test_report_shows_units_and_reasons():
    result = {"speedup": 1.5, "compile_s": 12.34, "breakeven_steps": None,
              "unavailable": {"breakeven_steps": "the compiled model is not faster",
                              "eager_power_w": "no RAPL", "compiled_power_w": "no RAPL"},
              "eager_steps_per_s": 2.0, "compiled_steps_per_s": 3.0}
    assert figures.text(result, "compile_s") == "12.3 s"
    assert figures.text(result, "breakeven_steps") == "n/a (the compiled model is not faster)"
    table = report.text_table(result)
    assert "Throughput (steps/s)" in table and "n/a: no RAPL" in table


def test_blocks_are_sized_from_the_steady_state_not_from_a_slow_warm_up():
    from tcore.experiment.spec import Experiment
    from tcore.worker.pacing import steps_per_block
    from tcore.worker.timing import calibrate

    clock, calls = StepClock(), []

    def step():  # the first three steps are twenty times slower than the steady state
        calls.append(1)
        clock.advance(0.1 if len(calls) <= 3 else 0.005)

    step_s = calibrate(step, "cpu", at_least_s=0.15, budget_s=1.0, clock=clock)
    assert step_s == pytest.approx(0.005)
    exp = Experiment(model="captioner", device="cpu", timed_s=0.6, rounds=3)  # blocks of 0.2 s asked
    block = time_block(step, steps_per_block(exp, step_s), "cpu", PowerMeter("none"), clock=clock)
    assert block.steps == 40 and block.wall_s == pytest.approx(0.2)
    assert block.step_s == pytest.approx([0.005] * 40)
    sized_from_warm_up = steps_per_block(exp, 0.1)  # what sizing from the slow warm-up steps gives
    assert sized_from_warm_up * 0.005 < 0.05


def test_cpu_load_counts_the_busy_time_of_other_processes_not_its_own():
    from tcore.worker.timing import CpuLoad, CpuTimes

    def load(*readings):
        readings = iter(readings)
        return CpuLoad(lambda: next(readings)).other_cores()

    # Over 2 s the machine was busy 3.5 CPU-s, this process 1.0 of them: others kept 1.25 cores busy.
    assert load(CpuTimes(100.0, 50.0, 3.0), CpuTimes(102.0, 53.5, 4.0)) == pytest.approx(1.25)
    # Alone on the machine: its own time is all the busy time (clock ticks can make it read a little more).
    assert load(CpuTimes(100.0, 50.0, 3.0), CpuTimes(101.0, 50.98, 4.0)) == 0.0
    assert load(None, CpuTimes(101.0, 51.0, 4.0)) is None  # /proc/stat unreadable: no figure, not a guess
    assert load(CpuTimes(100.0, 50.0, 3.0), CpuTimes(100.0, 50.0, 3.0)) is None  # no time passed


def test_cpu_load_reads_busy_time_from_proc_stat():
    from tcore.worker.timing import busy_s_of, read_cpu_times

    # user nice system idle iowait irq softirq steal guest guest_nice, in ticks: busy is all but idle and iowait,
    # and guest time is inside user already
    assert busy_s_of("cpu  1000 20 500 8000 100 10 20 30 400 0", 100) == pytest.approx(15.8)
    assert busy_s_of("cpu  1000 20 500 8000", 100) == pytest.approx(15.2)  # an older kernel's four fields
    now = read_cpu_times()  # this machine (Linux): a reading, whatever its load
    assert now is not None and now.machine_busy_s >= now.own_s > 0


def test_cast_weights_cast_the_model_and_float_inputs_but_not_token_ids():
    from tcore.worker.build import build

    w = build(Experiment(model="captioner", preset="tiny", batch_size=2, precision="bf16"), "cpu")
    assert {p.dtype for p in w.model.parameters()} == {torch.bfloat16}
    images, tokens = w.batches[0].inputs
    assert images.dtype == torch.bfloat16 and tokens.dtype == torch.long
    w = build(Experiment(model="captioner", preset="tiny", batch_size=2, precision="amp-bf16"), "cpu")
    assert {p.dtype for p in w.model.parameters()} == {torch.float32}  # autocast leaves the weights alone


def test_the_worker_applies_the_inductor_options_and_tf32_it_is_asked_for():
    import torch._inductor.config as config

    from tcore.experiment.spec import INDUCTOR_OPTIONS
    from tcore.worker.measurement import _configure_torch, set_tf32

    saved = {option: getattr(config, option) for option in INDUCTOR_OPTIONS.values()}
    try:
        exp = Experiment(precision="tf32", freezing=True, coordinate_descent=True, aggressive_fusion=True,
                         epilogue_fusion=False, max_fusion_size=16)
        assert _configure_torch(exp, "cpu") == []
        assert (config.freezing, config.coordinate_descent_tuning, config.aggressive_fusion, config.epilogue_fusion,
                config.max_fusion_size) == (True, True, True, False, 16)
        if hasattr(torch.backends.cuda.matmul, "fp32_precision"):
            assert torch.backends.cuda.matmul.fp32_precision == "tf32"
            _configure_torch(Experiment(), "cpu")
            assert torch.backends.cuda.matmul.fp32_precision == "ieee"
    finally:
        for option, value in saved.items():
            setattr(config, option, value)
        set_tf32(False)


def test_a_batch_already_at_its_bucket_size_comes_out_like_a_padded_one():
    """A browser walk found buckets recompiled during the schedule ("stride mismatch at index 0. expected
    5, actual 6") because a caption already at a bucket's length kept the stride of the slice it came from."""
    import sample_models
    from tcore.worker import shapes

    caption = torch.arange(12).reshape(2, 6)
    at_bucket = sample_models.Batch((caption[:, :-1],), caption[:, 1:])  # teacher forcing: two slices
    shorter = sample_models.Batch((caption[:, :3],), caption[:, 1:4])
    dims = [(0, 1), (1, 1)]
    a, b = shapes.pad(at_bucket, dims, 5), shapes.pad(shorter, dims, 5)
    for x, y in zip((*a.inputs, a.target), (*b.inputs, b.target)):
        assert x.shape == y.shape == (2, 5) and x.stride() == y.stride() == (5, 1)
    assert a.inputs[0].tolist() == caption[:, :-1].tolist()  # the same values, only laid out afresh
