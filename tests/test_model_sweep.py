"""The breadth sweep's list and table (bench/model_sweep.py): what it covers, and that a refused pair is a reason."""
import importlib.util

import pytest

from tcore.lab.settings.config import REPO_ROOT

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
    assert set(data["crossed"]) == {"inference", "training", "compiled-optimizer", "dynamic", "regional",
                                    "reduce-overhead"}


def test_the_quick_list_is_the_gpu_sitting_s_pairs_over_every_source_task_and_mode():
    """`--quick` is at least 40 pairs: the built-ins and the four libraries, the three tasks, the three modes."""
    data = sweep.load()
    pairs = data["quick"]
    assert len(pairs) >= 40 and len(set(pairs)) == len(pairs)
    sources = {m.split(":")[0] if ":" in m else "builtin" for m, _ in pairs}
    assert sources == {"builtin", "torchvision", "timm", "hf", "diffusers"}
    assert {m for m, _ in pairs} >= {"captioner", "resnet50", "flux"}
    flags = {t: data["tasks"][t] for _, t in pairs}
    tasks = {f[f.index("--task") + 1] if "--task" in f else "inference" for f in flags.values()}
    modes = {f[f.index("--mode") + 1] if "--mode" in f else "default" for f in flags.values()}
    assert tasks == {"inference", "training", "generate"}
    assert modes == {"default", "reduce-overhead", "max-autotune-no-cudagraphs"}
    for t, f in flags.items():  # a mode is Inductor's: under the CPU dry run's aot_eager it runs under inductor
        assert "--mode" not in f or f[-2:] == ["--backend", "inductor"], t
    assert all(m in data["models"] or ":" not in m for m, _ in pairs)  # the libraries' models are in the whole list


def test_a_named_list_with_a_pair_that_is_not_model_and_task_is_refused_when_read(tmp_path):
    text = sweep.DATA.read_text().replace('"captioner inference",', '"captioner inferencing",', 1)
    (tmp_path / "sweep.toml").write_text(text)
    with pytest.raises(ValueError, match="'captioner inferencing' is not \"MODEL TASK\""):
        sweep.load(tmp_path / "sweep.toml")


def test_a_reason_that_is_the_lab_s_limit_names_the_knob_that_lifts_it():
    timeout = sweep.limit_knob("timeout", "stopped at the 240 s time limit, in the phase 'Compiling'", 240)
    assert "--timeout (now 240 s" in timeout and "max_run_s" in timeout and "--at-once" not in timeout
    held = sweep.limit_knob("timeout", "stopped at the 240 s time limit, in the phase 'Measuring', waiting for the GPU "
                                       "while other runs of the room held it", 240)
    assert "--at-once" in held
    assert "--batch-size" in sweep.limit_knob("oom", "CUDA out of memory", 240)
    assert sweep.limit_knob("crashed", "device-side assert", 240) == ""


def test_pairs_at_once_are_queued_together_and_each_gives_its_row(store, no_outside_limits):
    """Two pairs at once: the second is in the lab's queue before the first ends (on the CPU they then run in turn)."""
    data = {"tasks": {"inference": [], "training": ["--task", "training"]}}
    flags = ["--device", "cpu", "--preset", "tiny", "--backend", "eager", "--warmup-steps", "1", "--timed-steps", "2",
             "--rounds", "2"]
    rows = list(sweep.sweep([("captioner", "inference"), ("captioner", "training")], data, flags, store, 120, 2))
    assert sorted(r["task"] for r in rows) == ["inference", "training"]
    assert all(r["status"] == "figure" and r["run_s"] > 0 for r in rows), rows
    records = {r["task"]: store.get(r["run_id"]) for r in rows}
    first, second = sorted(records.values(), key=lambda r: r.finished_at)
    assert second.queued_at < first.finished_at


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


def test_a_check_that_raises_is_a_row_with_its_traceback_and_the_sweep_goes_on(store, monkeypatch):
    from tcore.lab.run import flags

    def raises(args):
        raise RuntimeError("a check before the run raised")

    monkeypatch.setattr(flags, "experiment_from_args", raises)
    rows = list(sweep.sweep([("captioner", "inference"), ("resnet50", "inference")], {"tasks": {"inference": []}},
                            ["--device", "cpu"], store, 60, 1))
    assert [r["status"] for r in rows] == ["raised", "raised"]
    assert rows[0]["reason"] == "RuntimeError: a check before the run raised" and rows[0]["raw_trace_in_message"]
    assert "Traceback" in rows[0]["traceback"]
