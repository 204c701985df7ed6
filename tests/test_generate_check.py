"""The decode check's three ways through transformers' own generate() (bench/generate_ways.py, which
bench/generate_check.py runs): the arguments each gets, feature-detected on the installed transformers, and a way this
transformers lacks said instead of a figure."""
import importlib.util
from types import SimpleNamespace

import pytest

from tcore.lab.settings.config import REPO_ROOT


def script(name: str):
    """bench/NAME.py as a module (bench/ is a folder of scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check, ways = script("generate_check"), script("generate_ways")  # the driver and its report; what a way's process runs
transformers = pytest.importorskip("transformers")


def args(**kw):
    return SimpleNamespace(**{"new_tokens": 8, "device": "cpu", "backend": "inductor", "mode": "default", **kw})


def model(generation_config=None):
    return SimpleNamespace(generation_config=generation_config or transformers.GenerationConfig())


@pytest.mark.parametrize("way", list(ways.GENERATE_WAYS))
def test_every_way_generates_exactly_n_greedy_tokens_with_a_static_cache(way):
    kwargs, why_not = ways.generate_kwargs(model(), args(), way)
    assert why_not is None
    assert kwargs["do_sample"] is False and kwargs["max_new_tokens"] == kwargs["min_new_tokens"] == 8
    assert kwargs["cache_implementation"] == "static"


def test_the_uncompiled_way_and_the_recipe_turn_the_automatic_compile_off_and_the_automatic_way_keeps_it():
    for way in ("generate_static", "generate_compiled_forward"):
        assert ways.generate_kwargs(model(), args(device="cuda"), way)[0]["disable_compile"] is True
    on_gpu, _ = ways.generate_kwargs(model(), args(device="cuda", mode="reduce-overhead"), "generate_auto_compile")
    assert "disable_compile" not in on_gpu and "compile_config" not in on_gpu  # transformers' own defaults there


def test_on_the_cpu_the_automatic_compile_is_asked_for_with_the_backend_of_the_check():
    kwargs, _ = ways.generate_kwargs(model(), args(backend="aot_eager"), "generate_auto_compile")
    config = kwargs["compile_config"]
    assert isinstance(config, transformers.CompileConfig) and config._compile_all_devices is True
    assert config.backend == "aot_eager" and config.mode is None  # a mode is Inductor's


def test_a_transformers_without_the_automatic_compile_says_so_instead_of_a_figure():
    class Old:  # a generation config from before disable_compile and CompileConfig
        cache_implementation = None

    kwargs, why_not = ways.generate_kwargs(model(Old()), args(), "generate_auto_compile")
    assert kwargs is None and "has no automatic compile in generate()" in why_not
    static, _ = ways.generate_kwargs(model(Old()), args(), "generate_static")
    assert "disable_compile" not in static
    line = check.way_line("generate_auto_compile", {"unavailable": why_not})
    assert line.strip().startswith("generate_auto_compile") and "n/a (transformers" in line


def test_a_check_split_over_two_calls_goes_on_only_from_the_same_settings_on_the_same_gpu(tmp_path):
    """--resume keeps the first call's ways (the lab and the loop) so that the end covers them all, and refuses, before
    anything runs, a file timed with other settings or on another machine: every figure printed comes from one GPU."""
    import argparse
    import json

    settings = {"model": "hf:llama", "new_tokens": "256", "skip": "['generate']", "lab_timeout": "420"}
    first = {"machine": "h100", "device": "NVIDIA H100", "settings": settings, "lab": {"speedup": 9.0},
             "loop_eager": {"decode_tokens_per_s": 40.0}}
    path = tmp_path / "first.json"
    path.write_text(json.dumps(first))
    parser = argparse.ArgumentParser()
    now = {"machine": "h100", "device": "NVIDIA H100", "settings": {**settings, "skip": "['lab', 'loop']",
                                                                   "lab_timeout": "None"}}
    kept = check.resumed(path, now, parser)
    assert kept["lab"] == {"speedup": 9.0} and kept["loop_eager"] == {"decode_tokens_per_s": 40.0}
    assert kept["resumed_from"]["ways"] == ["lab", "loop_eager"] and kept["settings"] == now["settings"]
    for other in ({**now, "settings": {**now["settings"], "new_tokens": "128"}}, {**now, "device": "NVIDIA H200"}):
        with pytest.raises(SystemExit):
            check.resumed(path, other, parser)
