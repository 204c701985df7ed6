"""skip_full_mask on a tiny encoder (hf:bert, tiny preset), traced by Dynamo without Inductor: the compiled graph
loses the all-true attention mask eager skips, and a padded batch keeps its mask."""
import pytest
import torch

import sample_models
from sample_models.sources import hf_masks

transformers = pytest.importorskip("transformers")
from transformers import masking_utils  # noqa: E402


@pytest.fixture(scope="module")
def bert():
    torch.manual_seed(0)
    return sample_models.get("hf:bert").build("tiny").eval()


def traced(model, *inputs) -> dict:
    """What Dynamo's graph of model(*inputs) holds: the call's tensors it takes, and how often SDPA gets a mask."""
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    try:
        with torch.no_grad():
            torch.compile(model, backend=backend, fullgraph=True)(*inputs)
    finally:
        torch._dynamo.reset()
    (gm,) = graphs
    sdpa = [n for n in gm.graph.nodes if n.op == "call_function" and "scaled_dot_product" in str(n.target)]
    masks = [n.kwargs.get("attn_mask", n.args[3] if len(n.args) > 3 else None) for n in sdpa]
    return {"sdpa": len(sdpa), "masked": sum(m is not None for m in masks),
            # the call's own tensors among the graph's inputs (weights and buffers are inputs too)
            "inputs": sum(n.op == "placeholder" and n.name.startswith(("l_args_", "l_kwargs_"))
                          for n in gm.graph.nodes)}


def ids(batch=2, seq=16):
    return torch.randint(5, 1000, (batch, seq), generator=torch.Generator().manual_seed(0))


def test_an_all_true_mask_is_traced_into_the_graph_and_the_knob_drops_it(bert):
    tokens = ids()
    full = torch.ones_like(tokens)
    before = traced(bert, tokens, full)
    assert before == {"sdpa": 2, "masked": 2, "inputs": 2}  # transformers keeps it while tracing
    with hf_masks.skipping_full_masks():
        after = traced(bert, *hf_masks.without_full_mask((tokens, full), 1))
    assert after == {"sdpa": 2, "masked": 0, "inputs": 1}  # no mask input, no mask


def declines_under_compile(original):
    """transformers 5.17's guard: never skip while compiling (its is_tracing(None) is true under torch.compile)."""
    def guard(padding_mask, *args, **kwargs):
        return False if torch.compiler.is_compiling() else original(padding_mask, *args, **kwargs)
    return guard


def test_with_the_older_guard_the_lab_s_unmasked_batch_gets_a_mask_and_the_knob_removes_it(bert, monkeypatch):
    monkeypatch.setattr(masking_utils, "_ignore_bidirectional_mask_sdpa",
                        declines_under_compile(masking_utils._ignore_bidirectional_mask_sdpa))
    tokens = ids()  # the lab's masked-LM batch: token ids only, as eager skips the mask
    assert traced(bert, tokens)["masked"] == 2  # what the GPU's transformers does: the mask is built while tracing
    with hf_masks.skipping_full_masks():
        assert traced(bert, tokens)["masked"] == 0
    assert traced(bert, tokens)["masked"] == 2  # and transformers' own function is back after the block


def test_a_padded_batch_keeps_its_mask(bert):
    tokens = ids()
    padded = torch.ones_like(tokens)
    padded[1, -4:] = 0
    assert hf_masks.without_full_mask((tokens, padded), 1)[1] is padded
    with hf_masks.skipping_full_masks():
        found = traced(bert, tokens, padded)
    assert found == {"sdpa": 2, "masked": 2, "inputs": 2}


def test_eager_outputs_are_the_same_with_the_knob(bert):
    tokens = ids()
    padded = torch.ones_like(tokens)
    padded[0, -3:] = 0
    with torch.no_grad():
        plain = [bert(tokens).logits, bert(tokens, padded).logits]
        with hf_masks.skipping_full_masks():
            skipped = [bert(*hf_masks.without_full_mask((tokens, torch.ones_like(tokens)), 1)).logits,
                       bert(tokens, padded).logits]
    for a, b in zip(plain, skipped):
        torch.testing.assert_close(a, b)


def test_the_snippet_writes_the_same_hook_and_it_skips_the_mask(bert, monkeypatch):
    from tcore.experiment.spec import Experiment
    from tcore.export.snippet import code_for

    code = code_for(Experiment(model="hf:bert", device="cpu", backend="eager", skip_full_mask=True).to_dict(), "cpu")
    assert "install()  # <--" in code and "without_full_mask" not in code  # an encoder's batch carries no mask
    assert "install()" not in code_for(Experiment(model="hf:bert", device="cpu").to_dict(), "cpu")
    hook = code[code.index("# skip_full_mask"):code.index("install()  # <--")]
    namespace = {"torch": torch}
    exec(compile(hook, "snippet", "exec"), namespace)
    monkeypatch.setattr(masking_utils, "_ignore_bidirectional_mask_sdpa",
                        declines_under_compile(masking_utils._ignore_bidirectional_mask_sdpa))
    registry = masking_utils.ALL_MASK_ATTENTION_FUNCTIONS._global_mapping
    original = registry["sdpa"]
    try:
        namespace["install"]()
        assert traced(bert, ids())["masked"] == 0
    finally:
        registry["sdpa"] = original
