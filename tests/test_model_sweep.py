"""The breadth sweep's list and table (bench/model_sweep.py): what it covers, and that a refused pair is a reason."""
import importlib.util

from tcore.lab.launcher import REPO_ROOT

spec = importlib.util.spec_from_file_location("model_sweep", REPO_ROOT / "bench" / "model_sweep.py")
sweep = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sweep)


def test_the_list_covers_every_source_and_kind():
    data = sweep.load()
    by_source = {}
    for name in data["models"]:
        by_source.setdefault(name.split(":")[0], []).append(name)
    assert len(by_source["hf"]) >= 25 and len(by_source["timm"]) >= 25 and len(by_source["torchvision"]) >= 10
    assert by_source["diffusers"] == ["diffusers:flux"]
    assert {"hf:t5", "hf:bart", "hf:bert", "hf:gpt2"} <= set(data["models"])  # decoders, encoders, encoder-decoders
    assert set(data["quick"]) <= set(data["models"])
    assert set(data["tasks"]) == {"inference", "training", "compiled-optimizer", "dynamic", "regional", "reduce-overhead"}


def test_a_pair_the_lab_refuses_is_a_reason_not_a_crash(store):
    row = sweep.run_pair("hf:t5gemma", "inference", ["--device", "cpu"], store, 60)
    assert row["status"] == "refused" and "decoder_input_ids" in row["reason"]
    assert row["command"].startswith("python -m tcore run --model hf:t5gemma")


def test_a_preset_too_big_for_the_machine_steps_down_to_one_that_fits_and_says_so(store, no_outside_limits,
                                                                                monkeypatch):
    """The lab refuses captioner small under a 0.01 GiB limit per run (it needs about 0.13 GiB): the sweep runs the
    pair at tiny, the next smaller preset, for real, and the row keeps the refusal it stepped down from."""
    monkeypatch.setenv("COMPILE_LAB_MAX_MEMORY_GIB", "0.01")
    row = sweep.run_pair("captioner", "inference", ["--device", "cpu", "--preset", "small", "--backend", "eager",
                                                    "--warmup-steps", "1", "--timed-steps", "2", "--rounds", "2"],
                         store, 120)
    assert row["status"] == "figure", row
    assert row["preset"] == "tiny" and row["command"].endswith("--preset tiny")
    assert [r["preset"] for r in row["refused_at"]] == ["small"]
    assert row["refused_at"][0]["reason"].startswith("this run needs an estimated")
    assert sweep.smaller_preset("captioner", "tiny") is None  # nothing smaller: the refusal stays the reason


def test_the_table_has_a_cell_per_pair_and_lists_the_reasons():
    rows = [{"model": "hf:gpt2", "task": "inference", "status": "figure", "speedup": 1.5, "wall_s": 12.0},
            {"model": "hf:gpt2", "task": "training", "status": "timeout", "reason": "stopped", "phase": "compiling",
             "wall_s": 90.0}]
    text = sweep.table(rows, "cpu", "header")
    assert "| hf:gpt2 | 1.50x · 12 s | timeout · 90 s |" in text
    assert "1 gave a figure (50%)" in text and "hf:gpt2 training: **timeout** (phase compiling): stopped" in text
