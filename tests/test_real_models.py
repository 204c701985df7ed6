"""Real models by SOURCE:NAME (sample_models.sources): each source builds, runs eager and compiled, finds its
repeated blocks and trains a step; published sizes; the spec, the CLI catalog, the file interface, offline.

Compiles here use aot_eager (traces forward and backward, generates no code): whether a real model goes
through Dynamo and the lab's compile path is the point, not Inductor's code, which the built-ins test.
"""
import json
import os
import subprocess
import sys

import pytest
import torch

import sample_models
from sample_models import sources
from tcore.experiment.spec import Experiment, SpecError
from tcore.worker.compile import apply_compile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = "file:examples/my_model.py"
# One small model per source, each with the block classes the lab should find for regional compilation.
MODELS = {
    "torchvision:resnet18": {"BasicBlock"},
    "timm:efficientnet_b0": {"InvertedResidual"},
    "hf:llama": {"LlamaDecoderLayer"},
    "hf:bert": {"BertLayer", "BertEmbeddings"},
    "diffusers:flux": {"FluxTransformerBlock", "FluxSingleTransformerBlock"},
    EXAMPLE: {"Block"},
}


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch):
    monkeypatch.chdir(REPO)  # file:examples/... is relative to where the lab runs
    # these tests build models as a worker does: a worker is where a model file may be imported
    monkeypatch.setattr(sources.file_models, "_IMPORTS_ALLOWED", True)


def _leaves(out):
    return [t for t in torch.utils._pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]


@pytest.mark.parametrize("name", MODELS)
def test_each_source_builds_runs_eager_and_compiled_finds_its_blocks_and_trains(name):
    entry = sample_models.get(name)
    exp = Experiment(model=name, preset=entry.default_preset["cpu"], batch_size=2, device="cpu",
                     compile="regional", backend="aot_eager")
    torch.manual_seed(0)
    model = entry.build(exp.preset).eval()
    batch = entry.make_batch(exp.preset, 2, generator=torch.Generator().manual_seed(0))
    blocks = entry.repeated_blocks(model)
    assert {type(b).__name__ for b in blocks} == MODELS[name]
    assert len(blocks) >= 2, "regional compilation needs copies to share a compile"
    with torch.no_grad():
        eager = model(*batch.inputs)
    torch._dynamo.reset()
    compiled = apply_compile(model, exp, blocks, entry.repeated_call)
    with torch.no_grad():
        out = compiled(*batch.inputs)
    assert any(getattr(b, "_compiled_call_impl", None) is not None for b in blocks), "no block was compiled"
    for c, e in zip(_leaves(out), _leaves(eager), strict=True):
        torch.testing.assert_close(c, e, rtol=1e-4, atol=1e-4)

    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss = entry.loss(compiled(*batch.inputs), batch)
    loss.backward()
    opt.step()
    assert loss.dim() == 0 and torch.isfinite(loss)
    assert all(torch.isfinite(p).all() for p in model.parameters())


@pytest.mark.parametrize("name, preset, published", [
    ("hf:bert", "full", 110e6),              # bert-base-uncased
    ("hf:llama", "3.2-1b", 1.24e9),          # Llama-3.2-1B
    ("diffusers:flux", "full", 11.9e9),      # Flux.1 [dev]'s transformer
    ("torchvision:vit_b_16", "full", 86.6e6),
])
def test_real_presets_have_the_published_parameter_counts(name, preset, published):
    count = sample_models.get(name).param_count(preset)
    assert abs(count - published) / published < 0.01, count


def test_a_decoders_card_says_generate_keeps_a_kv_cache():
    """The card said "use_cache=False" whatever the task, beside task=generate, which decodes with a KV cache."""
    gpt2 = sample_models.get("hf:gpt2").description
    assert "inference and training run one forward over the whole sequence (use_cache=False" in gpt2
    assert "task=generate decodes a token at a time with transformers' KV cache, static or dynamic" in gpt2
    bert = sample_models.get("hf:bert").description  # an encoder never generates: its card says nothing of it
    assert "one forward over the whole sequence (use_cache=False)" in bert and "generate" not in bert


def test_inputs_follow_the_libraries_harnesses():
    llama = sample_models.get("hf:llama")
    tokens, = llama.make_batch("tiny", 3).inputs
    assert tokens.dtype == torch.int64 and tokens.shape == (3, 32) and int(tokens.max()) < 1024
    assert llama.make_batch("tiny", 3, seq_len=7).inputs[0].shape == (3, 7)  # the varying dimension
    assert llama.default_preset["cuda"] == "3.2-1b" and llama.presets["3.2-1b"]["seq_len"] == 1024
    assert llama.source.config("llama", llama.presets["tiny"]).use_cache is False
    assert sample_models.get("hf:bert").presets["full"]["seq_len"] == 512  # BERT-like, as the dynamo harness
    vit = sample_models.get("timm:vit_tiny_patch16_224")
    assert vit.presets["full"]["image_size"] == 224 and not vit.supports_channels_last  # fixed input size, no convs
    assert vit.presets["tiny"]["image_size"] == 64  # so tiny is built small through timm's own arguments
    effnet = sample_models.get("timm:efficientnet_b0")
    assert effnet.presets["full"]["image_size"] == 224 and effnet.supports_channels_last
    flux = sample_models.get("diffusers:flux")
    latents, text, pooled, t, img_ids, txt_ids, guidance = flux.make_batch("tiny", 2).inputs
    assert latents.shape == (2, 64, 4) and img_ids.shape == (64, 3) and txt_ids.shape == (16, 3)
    assert flux.repeated_call == "compile_repeated_blocks" and flux.varying_dim == "image tokens"


def test_the_memory_estimate_builds_real_models_without_memory():
    from tcore.lab.policy.limits import estimate_memory_gib

    flux = estimate_memory_gib(Experiment(model="diffusers:flux", preset="full", batch_size=1, precision="bf16",
                                          device="cpu"))
    assert 22 < flux < 30  # 11.9 B bf16 weights (~22 GiB) and the activations
    llama = estimate_memory_gib(Experiment(model="hf:llama", preset="tiny", batch_size=2, device="cpu",
                                           task="training"))  # fake tensors: the decoder looks at its ids
    assert 0 < llama < 0.1


def test_the_spec_names_what_is_wrong_before_anything_runs():
    with pytest.raises(SpecError, match="timm has no model named 'resnet_nope'.*tcore models timm"):
        Experiment(model="timm:resnet_nope", device="cpu")
    with pytest.raises(SpecError, match="SOURCE:NAME with SOURCE one of torchvision, timm, hf, diffusers, file"):
        Experiment(model="keras:resnet", device="cpu")
    with pytest.raises(SpecError, match="no causal LM, masked-LM encoder or encoder-decoder of model type 'clip'"):
        Experiment(model="hf:clip", device="cpu")
    with pytest.raises(SpecError, match="shows its own graph breaks"):
        Experiment(model="hf:gpt2", preset="tiny", graph_break=True, device="cpu")
    with pytest.raises(SpecError, match="channels_last applies to convolutional models only"):
        Experiment(model="hf:gpt2", preset="tiny", channels_last=True, device="cpu")
    with pytest.raises(SpecError, match="no Python file there"):
        Experiment(model="file:examples/missing.py", device="cpu")


def test_the_catalog_lists_and_filters_each_source():
    assert "torchvision:vit_b_16" in sample_models.catalog("torchvision")
    assert len(sample_models.catalog("timm")) > 1000
    assert sample_models.catalog("timm", "efficientnet_b0") [0] == "timm:efficientnet_b0"
    assert all(n.startswith("timm:convnext") for n in sample_models.catalog("timm", "convnext*"))
    assert {"hf:llama", "hf:bert", "hf:gpt2"} <= set(sample_models.catalog("hf"))
    assert sample_models.catalog("builtin") == ["captioner", "resnet50", "flux"]
    done = subprocess.run([sys.executable, "-m", "tcore", "models", "hf", "gpt2"], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0 and "hf:gpt2" in done.stdout.split(), done.stderr


def test_a_model_file_uses_its_own_presets_loss_and_blocks():
    entry = sample_models.get(EXAMPLE)
    assert list(entry.presets) == ["tiny", "full"] and entry.default_batch["cpu"] == 4
    assert "two-block MLP" in entry.description and not entry.supports_channels_last
    model = entry.build("tiny")
    batch = entry.make_batch("tiny", 4, generator=torch.Generator().manual_seed(0))
    out = model(*batch.inputs)
    assert torch.equal(entry.loss(out, batch), torch.nn.functional.mse_loss(out, batch.target))
    assert entry.param_count("full") > 200e6  # the GPU-sized preset, counted on meta
    code = "\n".join(entry.build_code("tiny"))
    assert "spec_from_file_location" in code and "my_model.build('tiny')" in code


def test_a_file_without_the_interface_says_what_it_needs(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\n")
    with pytest.raises(SpecError, match=r"(?s)defines no build\(\) or make_batch\(\).*PRESETS"):
        Experiment(model=f"file:{bad}", device="cpu")


OFFLINE_PROBE = """
import os, socket
def refuse(*args, **kwargs):
    raise OSError("network refused by the test")
socket.socket.connect = refuse
socket.create_connection = refuse
import sample_models
import huggingface_hub.constants
assert huggingface_hub.constants.HF_HUB_OFFLINE, "hub access is not forced offline"
for name in ("hf:gpt2", "timm:resnet18", "torchvision:mobilenet_v3_small", "diffusers:flux"):
    entry = sample_models.get(name)
    model = entry.build("tiny")
    model(*entry.make_batch("tiny", 1).inputs)
from transformers import AutoConfig
try:
    AutoConfig.from_pretrained("bert-base-uncased")  # what the lab never calls: it needs the hub
except OSError as e:
    print("REFUSED", type(e).__name__)
print("OFFLINE OK")
"""


def test_nothing_reaches_for_the_network():
    """With sockets refused and no HF_* variables set, every source builds; a hub download fails offline."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_"))}
    done = subprocess.run([sys.executable, "-c", OFFLINE_PROBE], cwd=REPO, capture_output=True, text=True,
                          timeout=300, env={**env, "PYTHONPATH": REPO})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "REFUSED" in done.stdout and "OFFLINE OK" in done.stdout


def test_a_construction_that_needs_a_download_says_why(tmp_path):
    needy = tmp_path / "needy.py"
    needy.write_text(
        "import torch\nfrom transformers import AutoModel\n"
        "def build(preset):\n    return AutoModel.from_pretrained('bert-base-uncased')\n"
        "def make_batch(preset, batch_size, device, generator):\n"
        "    return (torch.zeros(batch_size, 4, dtype=torch.long),), torch.zeros(batch_size)\n")
    with pytest.raises(SpecError, match="never downloads"):
        Experiment(model=f"file:{needy}", device="cpu")


def test_a_file_path_is_kept_where_the_worker_finds_it(tmp_path):
    assert sources.file_model("examples/my_model.py", REPO) == EXAMPLE  # inside the lab: relative, as labels read
    assert sources.file_model("file:../m.py", tmp_path / "sub") == f"file:{tmp_path / 'm.py'}"  # elsewhere: absolute


def test_a_real_model_runs_end_to_end_through_the_command_line(tmp_path):
    """The whole path once (a worker process, records, labels, the regional blocks it names), on the cheapest
    real model: the example file, from another folder, with Dynamo's eager backend."""
    done = subprocess.run(
        [sys.executable, "-m", "tcore", "run", "--model", f"file:{REPO}/examples/my_model.py", "--device", "cpu",
         "--compile", "regional", "--backend", "eager", "--task", "training", "--warmup-steps", "1",
         "--timed-steps", "2", "--rounds", "1", "--db", str(tmp_path / "runs.sqlite"), "--json", "--quiet"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": REPO})
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads(done.stdout)
    assert record["spec"]["model"] == EXAMPLE and record["label"].startswith(EXAMPLE + "/tiny bs4 fp32 training")
    result = record["result"]
    assert result["regional_blocks"] == {"Block": 2} and result["regional_call"] == "block.compile"
    assert result["repeated_block_shapes"] == {"Block": {"copies": 2, "shapes": 1}}  # what the advisor reads
    assert result["correctness_ok"] and result["graph_break_count"] == 0


def test_the_advisor_suggests_regional_compilation_for_a_whole_compiled_real_model():
    """Real models have no built-in block classes: the advisor asks the entry whether it repeats blocks (a
    whole-compiled real model's result once crashed here)."""
    from tcore.analysis import advice
    spec = Experiment(model="torchvision:resnet18", preset="tiny", device="cpu", compile="whole").to_dict()
    result = {"variants": ["eager", "compiled"], "speedup": 1.2, "compile_s": 20.0, "breakeven_steps": 1e6}
    titles = [s.title for s in advice.suggest(spec, result, "cpu")]
    assert "Try regional compilation" in titles


def test_models_read_in_parallel_threads_of_a_fresh_process_all_build():
    """Two people's pages (threads of one server) reading library models for the first time at once: in a fresh
    process without the library lock, torchvision raised "partially initialized module 'torchvision.models'" for one
    of them, and the Run page kept a pick it could not make (seen as a flaky browser test)."""
    code = (
        "import threading\nfrom sample_models import sources\n"
        "names = ['torchvision:resnet18', 'torchvision:vit_b_16', 'torchvision:convnext_tiny', 'timm:resnet50',\n"
        "         'torchvision:mobilenet_v3_small', 'timm:efficientnet_b0']\nerrors = []\n"
        "def build(n):\n    try:\n        sources.entry(n)\n    except Exception as e:\n"
        "        errors.append(f'{n}: {type(e).__name__}: {e}')\n"
        "threads = [threading.Thread(target=build, args=(n,)) for n in names]\n"
        "[t.start() for t in threads]\n[t.join() for t in threads]\nprint(errors)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "PYTHONPATH": REPO})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"
