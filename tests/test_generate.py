"""The generate task: its arithmetic, its refusals, the captioner's KV cache, and real runs on the CPU (aot_eager
where Inductor is not the point, one Inductor compile)."""
import os
import re
import subprocess
import sys

import pytest
import torch

import sample_models
from sample_models import decoding
from tcore import figures
from tcore.analysis import report
from tcore.experiment.spec import Experiment, SpecError
from tcore.export.snippet import code_for
from tcore.lab.run import runs
from tcore.lab.settings.config import REPO_ROOT
from tcore.store import RunStore
from tcore.worker import membw
from tcore.worker.generate_measurement import gathered_bytes, launch_words
from tests.helpers import insert_run
from ui.words import decode_words
from ui.words.store_words import plain


def test_decode_reads_the_weights_and_a_static_cache_whole_a_dynamic_one_as_it_grows():
    assert figures.decode_read_bytes(1000, 200, True, 128, 256) == 1200
    # dynamic: 128 + i tokens at step i, 384 at the end: on average (128 + 128) / 384 of it
    assert figures.decode_read_bytes(1000, 384, False, 128, 256) == pytest.approx(1000 + 256)
    # 2.5 GB a step at 670 steps/s is 1.675 TB/s: half an H100's 3.35 TB/s
    assert figures.bandwidth_pct(2.5e9, 670, 3.35) == pytest.approx(50.0)


def test_a_copy_counts_its_bytes_twice_and_decode_shares_each_yardstick_it_is_given():
    # 1 GiB copied 4 times in 3 ms: 8 GiB read and written, 2.863 TB/s
    assert figures.copy_bandwidth_tb_s(2**30, 4, 3.0) == pytest.approx(2 * 4 * 2**30 / 3e-3 / 1e12)
    # 2.47 GB a step at 575.6 steps/s reads 1.42 TB/s: 42.4% of an H100's datasheet 3.35 TB/s, and of a measured
    # 2.9 TB/s (injected: the figure the GPU's copy would give) 49.0%
    shares = figures.decode_bandwidth(2.47e9, 575.6, 2.9, 3.35)
    assert shares["decode_tb_s"] == pytest.approx(1.4217, rel=1e-4)
    assert shares["decode_bw_pct"] == pytest.approx(42.44, abs=0.01)
    assert shares["decode_bw_measured_pct"] == pytest.approx(49.02, abs=0.01)
    # a yardstick that is missing gives no share, the other stays
    cpu = figures.decode_bandwidth(2.47e9, 575.6, None, None)
    assert cpu["decode_bw_pct"] is None and cpu["decode_bw_measured_pct"] is None and cpu["decode_tb_s"] > 0
    measured = figures.decode_bandwidth(2.47e9, 575.6, 2.9, None)["decode_bw_measured_pct"]
    assert measured == pytest.approx(49.02, abs=0.01)


def test_the_copy_buffers_stay_far_larger_than_l2_and_fit_the_free_memory():
    gib, l2 = 2**30, 50 * 2**20  # an H100's L2
    assert membw.buffer_bytes(80 * gib, l2) == gib
    assert membw.buffer_bytes(3 * gib, l2) == gib // 2  # two buffers within half the free memory
    assert membw.buffer_bytes(gib, l2) is None  # 256 MiB would be under 8x the L2
    assert membw.buffer_bytes(80 * gib, 256 * 2**20) == 2 * gib  # a larger L2 needs a larger buffer


def test_on_the_cpu_the_measured_bandwidth_is_not_taken_and_says_why():
    found = membw.measure("cpu")
    assert found.tb_s is None and found.why_not.startswith("on the CPU")


def test_a_decode_step_reads_embedding_tables_a_row_at_a_time_unless_a_head_shares_them():
    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.tokens, self.places = torch.nn.Embedding(100, 8), torch.nn.Embedding(16, 8)
            self.head = torch.nn.Linear(8, 100, bias=False)
            self.head.weight = self.tokens.weight  # tied: the head reads the token table whole

    model = Tiny()
    assert gathered_bytes(model) == 16 * 8 * 4  # only the position table is read a row at a time
    model.head.weight = torch.nn.Parameter(torch.zeros(100, 8))
    assert gathered_bytes(model) == (100 + 16) * 8 * 4


def test_the_bandwidth_tile_names_each_yardstick_with_its_figure():
    pytest.importorskip("streamlit")
    from ui.panels.generate import bandwidth_tile, bandwidth_words

    r = {"compiled_decode_tb_s": 1.42, "compiled_decode_bw_measured_pct": 49.0, "mem_bw_measured_tb_s": 2.9,
         "compiled_decode_bw_pct": 42.4, "mem_bw_datasheet_tb_s": 3.35}
    tile = bandwidth_tile(r)
    assert tile["value"] == "49.0% measured"
    assert tile["delta"] == "reads 1.42 TB/s; 49.0% of 2.9 TB/s measured; 42.4% of 3.35 TB/s datasheet"
    words = bandwidth_words(r)
    assert "49.0% of the 2.90 TB/s a device-to-device copy reached" in words and "42.4% of the 3.35 TB/s" in words
    cpu = {"compiled_decode_tb_s": 0.001, "unavailable": {
        "compiled_decode_bw_measured_pct": "on the CPU: the lab measures a GPU's memory bandwidth only",
        "compiled_decode_bw_pct": "on the CPU: no GPU memory bandwidth to compare with"}}
    # no yardstick on the CPU: the rate read is the tile's figure, in GB/s (it said "n/a" over "reads 0.001 TB/s")
    assert bandwidth_tile(cpu)["value"] == "reads 1 GB/s" and "measured: n/a, on the CPU" in bandwidth_tile(cpu)["help"]
    assert bandwidth_tile({"compiled_decode_tb_s": 0.000139})["value"] == "reads 139 MB/s"
    assert bandwidth_tile({"compiled_decode_tb_s": 1.26e-6})["value"] == "reads 1.26 MB/s"  # not "0.00126 GB/s"
    assert bandwidth_tile({})["value"] == "n/a"
    assert bandwidth_words({**cpu, "compiled_decode_tb_s": None}).startswith("Memory bandwidth share: n/a, on the CPU")
    old = {"compiled_decode_bw_pct": 41.0}  # a GPU record saved before the lab kept the TB/s: the share it has
    assert bandwidth_words(old) == "Compiled decode reaches 41.0% of its datasheet bandwidth."
    assert bandwidth_tile(old)["value"] == "41.0% datasheet"



def test_a_cpu_generate_run_shows_no_bandwidth_tile_and_says_its_read_rate_once():
    """A CPU run showed "Decode memory bandwidth reads 1.06 GB/s" in a tile, then that the lab measures a GPU's memory
    bandwidth only: the tile goes, and one sentence says the rate and why there is no share."""
    pytest.importorskip("streamlit")
    from ui.panels.generate import bandwidth_words, headline_tiles

    cpu = {"device": "cpu", "variants": ["eager", "compiled"], "compiled_decode_tb_s": 0.00106, "unavailable": {
        "compiled_decode_bw_measured_pct": "on the CPU: the lab measures a GPU's memory bandwidth only",
        "compiled_decode_bw_pct": "on the CPU: no GPU memory bandwidth to compare with"}}
    labels = [t["label"] for row in headline_tiles(cpu) for t in row]
    assert "Decode memory bandwidth" not in labels
    assert bandwidth_words(cpu) == ("Compiled decode reads 1.06 GB/s of weights and cache, a rate with no share of a "
                                    "peak beside it: on the CPU the lab measures a GPU's memory bandwidth only.")
    gpu = {**cpu, "device": "cuda", "compiled_decode_tb_s": 1.42, "compiled_decode_bw_pct": 42.4,
           "mem_bw_datasheet_tb_s": 3.35}
    assert "Decode memory bandwidth" in [t["label"] for row in headline_tiles(gpu) for t in row]


def test_same_tokens_counts_positions_that_agree():
    assert figures.same_tokens_pct([[1, 2, 3, 4]], [[1, 2, 3, 4]]) == 100
    assert figures.same_tokens_pct([[1, 2, 3, 4], [5, 6, 7, 8]], [[1, 2, 9, 9], [5, 6, 7, 8]]) == 75


def test_launch_words_say_which_decode_step_waits_on_launches():
    words = launch_words(72.0, 8.0, "reduce-overhead")
    assert "eager launch-bound (72% idle)" in words and "compiled not launch-bound (8% idle)" in words
    assert "CUDA graphs" in words
    assert "would replay it as one CUDA graph" in launch_words(70.0, 65.0, "default")


def test_lengths_default_to_the_recipe_and_shrink_to_the_models_positions():
    gpt2 = sample_models.get("hf:gpt2")
    assert decoding.lengths(gpt2, "tiny", 0, 0) == (128, 256)  # 512 positions at tiny
    assert decoding.lengths(gpt2, "tiny", 16, 0) == (16, 256)
    cap = sample_models.get("captioner")
    assert decoding.max_positions(cap, "tiny") == 16
    assert decoding.lengths(cap, "tiny", 0, 0) == (4, 12)


@pytest.mark.parametrize("model, words", [
    ("hf:bert", "hf:bert is an encoder"),
    ("resnet50", "resnet50 does not generate text"),
    ("timm:resnet18", "timm:resnet18 does not generate text"),
])
def test_a_model_that_cannot_generate_is_refused_before_anything_runs(model, words, store):
    with pytest.raises(SpecError, match=words) as refused:
        runs.start(Experiment(model=model, task="generate", device="cpu"), store)
    assert "hf:gpt2" in str(refused.value)  # says what would work
    assert store.list() == []


def test_generation_settings_are_checked_against_the_model_and_the_task():
    with pytest.raises(SpecError, match="16 positions"):
        Experiment(model="captioner", task="generate", prompt_len=8, new_tokens=12)
    with pytest.raises(SpecError, match="need task=generate"):
        Experiment(model="captioner", kv_cache="dynamic")
    with pytest.raises(SpecError, match="compile=whole"):
        Experiment(model="captioner", task="generate", compile="regional")
    exp = Experiment(model="captioner", task="generate", kv_cache="dynamic", prompt_len=6, new_tokens=10)
    assert exp.label.endswith("dynamic KV, 6+10 tokens")


@pytest.mark.parametrize("static", [True, False])
def test_the_captioner_writes_with_its_cache_what_it_predicts_without_one(static):
    entry = sample_models.get("captioner")
    torch.manual_seed(0)
    model = entry.build("tiny").eval()
    images, prompt = torch.randn(2, 3, 32, 32), torch.randint(0, 512, (2, 4))
    with torch.no_grad():
        seq = prompt  # greedy by whole forward passes over the growing caption
        for _ in range(8):
            seq = torch.cat([seq, model(images, seq)[:, -1].argmax(-1, keepdim=True)], 1)
        cache = model.new_cache(2, 12, static, torch.float32, "cpu")
        tokens = [model.prefill(cache, images, prompt).argmax(-1)]
        for i in range(7):
            tokens.append(model.decode(cache, tokens[-1][:, None], torch.tensor([4 + i])).argmax(-1))
    assert torch.equal(torch.stack(tokens, 1), seq[:, 4:])
    assert cache.layers[0].k.shape[2] == (12 if static else 11)  # static: allocated whole; dynamic: what it holds


def _generate(store, timeout_s=600, **settings):
    exp = Experiment(task="generate", device="cpu", batch_size=2, rounds=2, timed_steps=2, cache="warm", **settings)
    record = runs.start(exp, store, timeout_s=timeout_s).wait()
    assert record.status == "finished", record.error
    return record


@pytest.fixture(scope="module")
def captioner_run(tmp_path_factory):
    """One real generate run of the tiny captioner (aot_eager: traced, eager kernels), shared by the tests below."""
    store = RunStore(tmp_path_factory.mktemp("generate") / "runs.sqlite")
    return _generate(store, model="captioner", backend="aot_eager", prompt_len=4, new_tokens=10)


def test_a_generation_run_records_its_figures_and_eager_and_compiled_write_the_same_tokens(captioner_run):
    record = captioner_run
    r = record.result
    assert r["tokens_match"] is True and r["tokens_same_pct"] == 100
    assert r["prompt_tokens"] == 4 and r["new_tokens"] == 10 and len(r["eager_tokens"]) == 10
    for variant in ("eager", "compiled"):
        assert r[f"{variant}_ttft_ms"] > 0 and r[f"{variant}_decode_tokens_per_s"] > 0
        assert r[f"{variant}_tokens_per_s"] == pytest.approx(2 * r[f"{variant}_decode_tokens_per_s"])
        assert r[f"{variant}_decode_bw_pct"] is None and "CPU" in r["unavailable"][f"{variant}_decode_bw_pct"]
        assert r[f"{variant}_decode_bw_measured_pct"] is None
        assert "CPU" in r["unavailable"][f"{variant}_decode_bw_measured_pct"]
        assert r[f"{variant}_decode_tb_s"] > 0
    assert r["mem_bw_measured_tb_s"] is None and r["mem_bw_datasheet_tb_s"] is None
    assert r["speedup"] > 0 and r["paired_rounds"] == 2
    assert r["compile_prefill_s"] is not None and r["compile_decode_s"] is not None
    assert set(r["compile_by_function_s"]) >= {"prefill", "decode"}
    assert r["kv_cache_gib"] > 0
    # a static cache: the decode step never recompiles; a shorter prompt recompiles the prefill only
    assert r["decode_recompiles"] == 0 and r["prompt_recompiles"] >= 1
    table = report.text_table(r, record.spec, "cpu")
    assert "Time to first token (ms)" in table and "Same tokens as eager" in table


def test_without_a_static_cache_the_compiled_decoder_recompiles_as_lengths_change(store):
    r = _generate(store, model="hf:gpt2", backend="aot_eager", kv_cache="dynamic", prompt_len=8,
                  new_tokens=6).result
    assert r["decode_recompiles"] >= 1  # the cache grew by a token: a new shape
    assert r["prompt_recompiles"] >= 1
    assert any("size mismatch" in why for why in r["prompt_recompile_reasons"])
    assert r["tokens_match"] is True


@pytest.mark.compile
def test_inductor_compiles_a_llama_decoder_that_writes_eagers_tokens(store):
    # Inductor compiles the prefill, the decode step, and the prefill again for the shorter prompt
    r = _generate(store, timeout_s=1200, model="hf:llama", prompt_len=8, new_tokens=8).result
    assert r["tokens_match"] is True
    assert r["graph_count"] >= 2 and r["graph_break_count"] == 0  # prefill and decode, the decode fullgraph


@pytest.fixture
def pages(tmp_path, monkeypatch):
    """The app's pages under AppTest, on a store of their own (the GPU machine has no Streamlit: skipped there)."""
    pytest.importorskip("streamlit")
    from tests import app_harness

    monkeypatch.setenv("COMPILE_LAB_DB", str(tmp_path / "runs.sqlite"))
    return app_harness, RunStore()


def test_the_run_page_offers_generation_and_shows_its_headline_in_tokens_per_second(pages, captioner_run):
    harness, db = pages
    app, texts = harness.app, harness.texts
    at = app()
    at.radio(key="run_task").set_value("generate").run()
    at.number_input(key="run_new_tokens").set_value(10).run()
    assert not at.exception
    # batch 1: a generation is timed per sequence, whichever of task and model was picked first
    assert plain("captioner/tiny bs1 fp32 generate, whole default, static KV, 4+10 tokens") in texts(at.caption)
    assert "Reads a 4-token prompt, then writes 10 tokens per sequence" in texts(at.caption)

    shown = insert_run(db, Experiment.from_dict(captioner_run.spec))
    db.finish(shown, result=captioner_run.result, env=captioner_run.env)
    at = app().switch_page("app_pages/compare.py").run()
    at.selectbox(key="compare_detail").set_value(shown).run()
    assert not at.exception
    # Tiles group thousands ("3,109.7"): how large a figure is depends on how busy the machine was
    metrics = {m.label: m.value.replace(",", "") for m in at.metric}
    assert metrics["Decode speedup"].endswith(" x")
    assert float(metrics["Eager tokens/s"]) > 0 and float(metrics["Compiled tokens/s"]) > 0
    assert float(metrics["Time to first token (ms)"]) > 0
    # the CPU: neither yardstick, so no tile; the rate read is said once, with its unit and why it has no share
    assert "Decode memory bandwidth" not in metrics
    assert re.search(r"Compiled decode reads [\d.,]+ [KMG]B/s of weights and cache, a rate with no share of a peak "
                     r"beside it: on the CPU the lab measures a GPU's memory bandwidth only", texts(at.caption))
    assert "Compiled wrote exactly eager's tokens (a 4-token prompt, 10 new tokens, greedy)." in texts(at.success)
    assert "a prompt one token shorter caused 1 recompilation(s)" in texts(at.caption)


def test_copy_as_code_reproduces_the_generation_figures(tmp_path):
    exp = Experiment(model="captioner", task="generate", device="cpu", backend="aot_eager", prompt_len=4,
                     new_tokens=8, batch_size=2)
    code = code_for(exp.to_dict(), "cpu")
    assert "compiled_decode = torch.compile(decoder.decode, backend='aot_eager', fullgraph=True)  # <--" in code
    script = tmp_path / "generate.py"
    script.write_text(code)
    out = subprocess.run([sys.executable, str(script)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})  # "runs as it is from the lab's folder"
    assert out.returncode == 0, out.stderr[-2000:]
    assert "same tokens as eager: True" in out.stdout
    assert re.search(r"compiled: [\d.]+ tokens/s per sequence, [\d.]+ for the batch, first token [\d.]+ ms",
                     out.stdout)
    assert re.search(r"decode speedup [\d.]+x \(median of 6 paired rounds\)", out.stdout)


def test_a_sweep_of_generation_crosses_mode_cache_and_batch(pages):
    harness, _ = pages
    at = harness.app().switch_page("app_pages/sweep.py").run()
    at.radio(key="sweep_task").set_value("generate").run()
    at.multiselect(key="sweep_compile").set_value(["whole"])
    at.multiselect(key="sweep_mode").set_value(["default", "reduce-overhead"])
    at.multiselect(key="sweep_kv_cache").set_value(["static", "dynamic"])
    at.multiselect(key="sweep_batches").set_value([1, 4]).run()
    assert not at.exception
    assert "**8 runs** to do." in harness.texts(at.markdown)


@pytest.mark.gpu
@pytest.mark.parametrize("model", ["captioner", "hf:gpt2"])
def test_on_a_gpu_cuda_graphs_replay_the_decode_step_and_its_bandwidth_share_is_measured(store, model):
    # fp32: with random weights a bf16 rounding difference can tip a near-tie between two logits. The captioner
    # tiny's 16 positions hold 4+12 tokens by default, too few to profile 6 decode steps (the idle share is n/a
    # then, with that reason): 2+14 is the shortest generation that profiles them.
    lengths = dict(prompt_len=2, new_tokens=14) if model == "captioner" else {}
    exp = Experiment(model=model, preset="tiny", task="generate", device="cuda", precision="fp32", batch_size=1,
                     mode="reduce-overhead", rounds=6, timed_s=2.0, **lengths)
    record = runs.start(exp, store, timeout_s=900).wait()
    assert record.status == "finished", record.error
    r = record.result
    assert r["tokens_match"] is True
    assert r["cudagraph_skip_count"] == 0 and r["decode_recompiles"] == 0
    # a copy on the GPU reaches at most its datasheet bandwidth, and a plain copy a good part of it
    assert 0.3 * r["mem_bw_datasheet_tb_s"] < r["mem_bw_measured_tb_s"] <= 1.02 * r["mem_bw_datasheet_tb_s"]
    assert "device-to-device copy" in r["mem_bw_method"]
    for variant in ("eager", "compiled"):
        assert 0 < r[f"{variant}_decode_bw_pct"] < 100
        assert r[f"{variant}_decode_bw_pct"] <= r[f"{variant}_decode_bw_measured_pct"] < 100
        assert 0 <= r[f"{variant}_decode_idle_pct"] <= 100
    assert "Decode step: eager" in r["launch_bound_words"]
    # where the compiled step's time goes, by kernel class, against the bytes it reads
    said = decode_words.words(r, record.spec)
    assert said[0].startswith("A compiled decode step takes") and said[1].startswith("Per token, profiled: ")


def test_a_decode_step_is_held_against_the_bytes_it_reads_and_says_what_to_try():
    # Llama-3.2-1B's shape on an H100 (BENCHMARKS.md): 1.72 ms per token at 48.1% of the measured copy bandwidth
    result = {"compiled_decode_ms_per_token": 1.72, "compiled_decode_bw_measured_pct": 48.1,
              "breakdown": {"compiled": {"ms": {"matmul": 1.10, "attention": 0.12, "pointwise": 0.30, "idle": 0.20}}}}
    said = decode_words.words(result, {"mode": "reduce-overhead", "kv_cache": "static"})
    assert said[0] == ("A compiled decode step takes 1.72 ms per token; the bytes it reads would take 0.827 ms at the "
                       "copy bandwidth measured on this GPU: it reaches 48% of it.")
    assert said[1].startswith("Per token, profiled: matrix products 1.1 ms, pointwise, norms and reductions 0.3 ms, "
                              "launch gaps (the GPU idle) 0.2 ms, attention 0.12 ms")
    assert any("coordinate-descent" in s for s in said) and not any("reduce-overhead" in s for s in said)
    # tuned already, no CUDA graphs (the GPU idle a third of the step) and a dynamic cache: the other advice
    idle = {**result, "breakdown": {"compiled": {"ms": {"matmul": 1.10, "idle": 0.6}}}}
    again = decode_words.words(idle, {"mode": "default", "kv_cache": "dynamic", "coordinate_descent": True})
    assert not any("coordinate-descent" in s for s in again)
    assert any("reduce-overhead" in s for s in again) and any("static KV cache" in s for s in again)
    table = decode_words.rows(result)
    assert table[0]["ms per token"] == 0.8273 and [r["what"] for r in table[1:3]] == ["matrix products",
                                                                                      "pointwise, norms and reductions"]
    # no profile: the floor, and why the rest is not known; the CPU (no bandwidth figure): nothing
    bare = {**result, "breakdown": {}, "unavailable": {"compiled_profiled_step_ms": "the profiler recorded no steps"}}
    assert decode_words.words(bare, {})[1] == ("Where the rest goes is not known: the decode step was not profiled "
                                               "(the profiler recorded no steps).")
    assert decode_words.words({"compiled_decode_ms_per_token": 3.0}, {}) == [] and decode_words.rows({}) == []


def test_a_decode_step_held_back_by_launches_without_cuda_graphs_is_told_to_replay_them_whatever_the_mode_name():
    # max-autotune-no-cudagraphs begins like max-autotune but replays no CUDA graph: its launch gaps are still there
    idle = {"compiled_decode_ms_per_token": 1.72, "compiled_decode_bw_measured_pct": 48.1,
            "breakdown": {"compiled": {"ms": {"matmul": 1.10, "idle": 0.6}}}}
    for mode, told in (("max-autotune-no-cudagraphs", True), ("default", True), ("reduce-overhead", False),
                       ("max-autotune", False)):
        said = decode_words.words(idle, {"mode": mode, "kv_cache": "static", "coordinate_descent": True})
        assert any("Try mode reduce-overhead" in s for s in said) is told, mode


def test_attention_far_above_its_bytes_is_named_as_what_keeps_decode_from_the_bandwidth():
    # the lab's best setting on an H100 (BENCHMARKS.md): 1.356 ms a token at 1.83 TB/s, a 0.0059 GiB static cache,
    # attention 0.156 ms (11.5% of the step) for 0.25% of the bytes; the batch-1 products as reductions, classed matmul
    result = {"compiled_decode_ms_per_token": 1.356, "compiled_decode_bw_measured_pct": 60.7,
              "compiled_decode_tb_s": 1.83, "kv_cache_gib": 0.00586,
              "breakdown": {"compiled": {"ms": {"matmul": 0.911, "attention": 0.156, "pointwise": 0.243,
                                                "idle": 0.043}}}}
    said = decode_words.words(result, {"mode": "reduce-overhead", "kv_cache": "static", "coordinate_descent": True})
    named = [s for s in said if s.startswith("Attention takes")]
    assert named == [named[0]] and named[0].startswith("Attention takes 12% of the step for 0.25% of the bytes")
    # attention in proportion to a long cache's bytes is not singled out, nor a small attention
    long_cache = {**result, "kv_cache_gib": 0.5}
    assert not any(s.startswith("Attention") for s in decode_words.words(long_cache, {}))
    small = {**result, "breakdown": {"compiled": {"ms": {"matmul": 1.2, "attention": 0.05, "idle": 0.1}}}}
    assert not any(s.startswith("Attention") for s in decode_words.words(small, {}))
