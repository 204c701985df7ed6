"""Copy as code for real models: the snippet builds the model as its library does (transformers' from_config,
diffusers' config class, timm's create_model), hands Inductor the same graphs as the run's own path, and runs
wherever it is pasted, needing only torch and that library; a built-in model's snippet says where to run it.

The check is tests/test_snippet.py's (tests/snippet_probe.py records what Dynamo hands Inductor, without
generating code), on one model per kind of source and compile call.
"""
import os
import subprocess
import sys

import pytest

from tcore.experiment.spec import Experiment
from tcore.export.snippet import code_for
from tests.test_snippet import assert_same_graphs, probed

CASES = {
    # decoder layers from _no_split_modules, training with the compiled optimizer
    "hf:llama regional training": Experiment(model="hf:llama", preset="tiny", batch_size=2, device="cpu",
                                             compile="regional", task="training", compile_optimizer=True),
    # diffusers' own compile_repeated_blocks, image tokens marked dynamic
    "diffusers:flux regional mark_dynamic": Experiment(model="diffusers:flux", preset="tiny", batch_size=1,
                                                       device="cpu", compile="regional", shape_count=3,
                                                       shape_remedy="mark_dynamic"),
    # a convolutional timm model: bf16 weights and channels_last
    "timm whole bf16 channels_last": Experiment(model="timm:resnet18", preset="tiny", batch_size=2, device="cpu",
                                                precision="bf16", channels_last=True),
}


@pytest.fixture(scope="module")
def probes():
    return probed(CASES)


@pytest.mark.parametrize("case", CASES.keys())
def test_a_real_model_s_snippet_compiles_the_same_graphs_as_the_run(probes, case):
    assert_same_graphs(probes[case])


def test_the_snippet_builds_a_real_model_in_its_library_s_words():
    llama = code_for(CASES["hf:llama regional training"].to_dict(), "cpu")
    assert "config = AutoConfig.for_model('llama', hidden_size=64," in llama and "use_cache=False)" in llama
    assert "model = AutoModelForCausalLM.from_config(config)  # <--" in llama
    assert "blocks = {'LlamaDecoderLayer'}" in llama
    flux = code_for(CASES["diffusers:flux regional mark_dynamic"].to_dict(), "cpu")
    assert "model = FluxTransformer2DModel(patch_size=1," in flux and "model.compile_repeated_blocks()  # <--" in flux
    vision = code_for(CASES["timm whole bf16 channels_last"].to_dict(), "cpu")
    assert "model = timm.create_model('resnet18', pretrained=False)" in vision


# Copied and pasted elsewhere: each program runs from a folder outside the lab, with nothing of the lab's on its path
# (it failed with "No module named 'sample_models'" there). backend=eager keeps each to Dynamo's side (seconds); the
# timing section runs as written, with the fewest rounds.
PASTED = {
    "hf:llama regional training": CASES["hf:llama regional training"].replace(backend="eager"),
    "diffusers:flux regional mark_dynamic": CASES["diffusers:flux regional mark_dynamic"].replace(backend="eager"),
    "timm whole bf16 channels_last": CASES["timm whole bf16 channels_last"].replace(backend="eager"),
    "hf:gpt2 generate": Experiment(model="hf:gpt2", preset="tiny", batch_size=1, device="cpu", task="generate",
                                   backend="eager", prompt_len=8, new_tokens=8, rounds=1),
}


def _outside_the_lab(tmp_path, code: str) -> subprocess.CompletedProcess:
    path = tmp_path / "pasted.py"
    path.write_text(code)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, str(path)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)


@pytest.mark.parametrize("exp", PASTED.values(), ids=PASTED.keys())
def test_a_real_model_s_snippet_runs_wherever_it_is_pasted(exp, tmp_path):
    code = code_for(exp.replace(round_s=0.05, timed_s=0.5).to_dict(), "cpu")
    assert "sample_models" not in code and "tcore" not in code
    done = _outside_the_lab(tmp_path, code)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "speedup" in done.stdout, done.stdout


def test_a_real_model_s_snippet_names_what_to_install_at_its_top():
    head = code_for(CASES["timm whole bf16 channels_last"].to_dict(), "cpu").splitlines()[1]
    assert "it needs torch and timm (pip install timm)" in head
    llama = code_for(CASES["hf:llama regional training"].to_dict(), "cpu").splitlines()[1]
    assert "transformers (pip install transformers)" in llama


def test_a_built_in_model_s_snippet_runs_from_any_folder_and_says_where_the_lab_should_be(tmp_path):
    """Python looks for imports in the script's folder, not the one it is started from: the program puts the lab's
    folder on its path itself ("cd LAB && python this.py" failed for a file saved elsewhere). Only its opening runs
    here (the imports and the model), so no compile."""
    from sample_models.sources import LAB

    code = code_for(Experiment(model="captioner", preset="tiny", batch_size=2, device="cpu").to_dict(), "cpu")
    opening = code[:code.index("batches = ")] + "print('built', type(model).__name__)\n"
    done = _outside_the_lab(tmp_path, opening)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "built" in done.stdout
    moved = _outside_the_lab(tmp_path, opening.replace(repr(str(LAB)), repr(str(tmp_path / "gone"))))
    assert moved.returncode != 0
    assert "This program builds a Compile Lab sample model, from the lab's folder" in moved.stderr
    assert "Traceback" not in moved.stderr  # the sentence alone, not a ModuleNotFoundError's stack
