"""A generation on the CPU finishes: its defaults write a few dozen tokens, a run stopped at its limit is told what it
can lower, and its worker log says the phase it was in."""
import time
import types

import pytest

from tcore.experiment.device import CPU_NEW_TOKENS, CPU_PROMPT_TOKENS, practical_defaults
from ui.words import run_words
from ui.words.store_words import plain


def test_the_cpus_generate_defaults_write_a_few_dozen_tokens():
    """hf:llama tiny at 128 + 256 tokens ran past a 600 s limit in its first compiled call on a 2-core CPU."""
    cpu = practical_defaults("hf:llama", "cpu", "generate")
    assert (cpu["prompt_len"], cpu["new_tokens"]) == (CPU_PROMPT_TOKENS, CPU_NEW_TOKENS)
    assert CPU_PROMPT_TOKENS + CPU_NEW_TOKENS <= 64
    assert (practical_defaults("captioner", "cpu", "generate")["prompt_len"],  # its own defaults are shorter
            practical_defaults("captioner", "cpu", "generate")["new_tokens"]) == (4, 12)
    gpu = practical_defaults("hf:llama", "cuda", "generate")
    assert (gpu["prompt_len"], gpu["new_tokens"]) == (0, 0)  # the model's defaults: gpt-fast's 128 + 256
    assert practical_defaults("hf:llama", "cpu", "inference")["new_tokens"] == 0


def test_the_command_line_takes_the_cpus_generate_lengths():
    import argparse

    from tcore.lab.run.flags import add_spec_args, experiment_from_args

    parser = argparse.ArgumentParser()
    add_spec_args(parser)
    exp = experiment_from_args(parser.parse_args(["--model", "hf:llama", "--task", "generate", "--device", "cpu"]))
    assert (exp.prompt_len, exp.new_tokens) == (CPU_PROMPT_TOKENS, CPU_NEW_TOKENS)
    asked = experiment_from_args(parser.parse_args(["--model", "hf:llama", "--task", "generate", "--device", "cpu",
                                                    "--new-tokens", "100"]))
    assert asked.new_tokens == 100


LLAMA = {"model": "hf:llama", "preset": "tiny", "task": "generate", "mode": "default", "compile": "whole",
         "cache": "cold", "batch_size": 1}


def test_a_timeout_names_what_this_run_can_lower():
    """"Pick a smaller preset" was offered for a tiny preset, the smallest there is, stuck compiling."""
    words = run_words.timeout_words({"kind": "timeout", "phase": "compiling"}, LLAMA)
    assert "smaller preset" not in words
    assert "New tokens and Prompt tokens" in words and "mode=lite" in words and "cache=warm" in words
    assert "raise 'Stop the run after'" in words
    bigger = run_words.timeout_words({"kind": "timeout", "phase": "measuring"},
                                     {**LLAMA, "task": "inference", "preset": "3.2-1b", "batch_size": 8})
    assert "a smaller preset (tiny)" in bigger and "batch size" in bigger and "timed seconds" in bigger
    assert "New tokens" not in bigger and "mode=" not in bigger


def test_a_timeout_at_the_labs_longest_run_says_who_can_raise_it_not_the_runs_own_limit():
    """A run stopped at the lab's longest run was told to raise 'Stop the run after', which cannot go past it."""
    capped = run_words.timeout_words({"kind": "timeout", "phase": "compiling"}, LLAMA, limit_s=30.0, longest_s=30.0,
                                     longest_by="compile-lab.toml")
    assert "raise 'Stop the run after'" not in capped and "mode=lite" in capped
    assert capped.endswith("What stopped it is this lab's longest run, 30 s, set by compile-lab.toml: 'Stop the run "
                           "after' cannot go past it, so a longer run needs a larger max_run_s (compile-lab.toml).")
    below = run_words.timeout_words({"kind": "timeout", "phase": "compiling"}, LLAMA, limit_s=60.0, longest_s=600.0)
    assert below.endswith("Or raise 'Stop the run after' under Advanced.")


def test_each_phase_goes_into_the_worker_log(capsys):
    """A timed-out run's log held one line ("worker ready"): the phase it was stopped in was in the events alone."""
    from tcore.worker.hostspeed import HostSpeed
    from tcore.worker.phases import Phases

    said = []
    run = types.SimpleNamespace(emit=said.append, sampler=None, t_start=0.0, host=HostSpeed(read=lambda: 10.0))
    before = time.time()
    Phases.phase(run, "compiling")
    assert [{k: v for k, v in e.items() if k != "at"} for e in said] == [{"type": "phase", "phase": "compiling"}]
    assert before <= said[0]["at"] <= time.time()  # when the phase began, in the worker's clock
    assert capsys.readouterr().err.startswith("phase: Compiling (first call) (+")


def test_the_run_page_offers_the_cpus_lengths_for_generate(tmp_path, monkeypatch):
    pytest.importorskip("streamlit")
    from tests import app_harness

    monkeypatch.setenv("COMPILE_LAB_DB", str(tmp_path / "runs.sqlite"))
    at = app_harness.app()
    at.radio(key="run_source").set_value("hf").run()  # hf:gpt2, tiny
    at.radio(key="run_task").set_value("generate").run()
    assert not at.exception
    said = app_harness.texts(at.caption)
    assert f"Reads a {CPU_PROMPT_TOKENS}-token prompt, then writes {CPU_NEW_TOKENS} tokens" in said
    assert plain(f"static KV, {CPU_PROMPT_TOKENS}+{CPU_NEW_TOKENS} tokens") in said  # the label, shown as text
