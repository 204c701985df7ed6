"""Copy as code for real models: the snippet builds the model as its library does (transformers' from_config,
diffusers' config class, timm's create_model) and hands Inductor the same graphs as the run's own path.

The check is tests/test_snippet.py's (tests/snippet_probe.py records what Dynamo hands Inductor, without
generating code), on one model per kind of source and compile call.
"""
import pytest

from tcore.experiment.spec import Experiment
from tcore.export.snippet import code_for
from tests.test_snippet import test_the_snippet_compiles_the_same_graphs_as_the_run as same_graphs

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


@pytest.mark.parametrize("exp", CASES.values(), ids=CASES.keys())
def test_a_real_model_s_snippet_compiles_the_same_graphs_as_the_run(exp):
    same_graphs(exp)


def test_the_snippet_builds_a_real_model_in_its_library_s_words():
    llama = code_for(CASES["hf:llama regional training"].to_dict(), "cpu")
    assert "config = AutoConfig.for_model('llama', hidden_size=64," in llama and "use_cache=False)" in llama
    assert "model = AutoModelForCausalLM.from_config(config)  # <--" in llama
    assert "blocks = {'LlamaDecoderLayer'}" in llama
    flux = code_for(CASES["diffusers:flux regional mark_dynamic"].to_dict(), "cpu")
    assert "model = FluxTransformer2DModel(patch_size=1," in flux and "model.compile_repeated_blocks()  # <--" in flux
    vision = code_for(CASES["timm whole bf16 channels_last"].to_dict(), "cpu")
    assert "model = timm.create_model('resnet18', pretrained=False)" in vision
