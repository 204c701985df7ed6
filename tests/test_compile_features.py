"""torch's newer compile features as the lab uses them: graph breaks' registry entries read from torch's own message,
hierarchical compilation with its check against eager, set_stance probes, and each feature greyed out (never a
crash) on a torch without it. Cheap backends (eager, aot_eager) throughout: what is tested is Dynamo's side."""
import dataclasses
import re

import pytest
import torch

from tcore.experiment.spec import Experiment, SpecError
from tcore.host import features
from tcore.worker import break_registry, diagnostics, stances
from tcore.worker.build import build, clone, compare
from tcore.worker.compile import apply_compile, mark_nested_regions
from ui.words import stance_words

TINY = dict(model="captioner", preset="tiny", batch_size=2, device="cpu")


# --- graph breaks by registry type ----------------------------------------------------------------------------------
def _branch_on_item(x):
    if x.sum().item() > 0:  # a data-dependent branch: Dynamo breaks the graph here
        return x + 1
    return x - 1


@pytest.mark.skipif(not features.available("graph_break_registry"), reason=features.missing("graph_break_registry")
                    or "")
def test_a_break_carries_its_registry_type_read_from_torchs_own_message():
    torch._dynamo.reset()
    with diagnostics.BreakRecorder().attached() as breaks:
        torch.compile(_branch_on_item, backend="eager")(torch.randn(3))
    (found,) = breaks.summary()
    entry = found["registry"]
    assert re.fullmatch(r"GB\d{4}", entry["gb_id"])
    assert "item()" in entry["gb_type"] and entry["explanation"] and entry["hints"]
    assert entry["link"] == break_registry.page(entry["gb_id"])
    # torch's registry file agrees: the type maps to the id the message linked
    assert break_registry.lookup_ids()[entry["gb_type"]] == entry["gb_id"]


def test_a_message_without_its_link_is_looked_up_by_type():
    message = ("Graph Break Reason: Encountered graph break when attempting to trace CALL: a call:\n\n"
               "Some break type\n  Explanation: Why it broke,\n    on two lines.\n  Hint: Do this.\n"
               "  Hint: Or that,\n    continued.\n\n  Developer debug context: ctx\n")
    entry = break_registry.parse(message, {"Some break type": "GB0042"})
    assert entry == {"gb_id": "GB0042", "gb_type": "Some break type", "explanation": "Why it broke, on two lines.",
                     "hints": ["Do this.", "Or that, continued."], "context": "ctx",
                     "link": "https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0042.html"}
    assert break_registry.parse("Graph Break Reason: call_function UserDefinedObjectVariable") is None  # older torch


def test_the_registry_words_sit_beside_the_labs_own():
    from ui.words import graph_words

    b = {"reason": "Unsupported Tensor.item() call", "count": 1,
         "registry": {"gb_id": "GB0124", "gb_type": "Unsupported Tensor.item() call", "explanation": "Why.",
                      "hints": ["Do this."], "link": break_registry.page("GB0124")}}
    words = graph_words.registry_words(b)
    assert "[GB0124](https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0124.html)" in words
    assert "- hint: Do this." in words and "its page is online" in words  # a workshop may be offline
    assert graph_words.registry_words({"reason": "x"}) is None
    # PyTorch's own deliberate break (before the optimizer step): torch's hint to remove the call is not the user's
    own = dict(b, file="/site-packages/torch/optim/optimizer.py",
               registry=dict(b["registry"], hints=["Remove the torch._dynamo.graph_break() call."]))
    theirs = graph_words.registry_words(own)
    assert "Remove the torch._dynamo.graph_break() call" not in theirs and "PyTorch's own source" in theirs


# --- hierarchical compilation --------------------------------------------------------------------------------------
def test_hierarchical_needs_repeated_blocks(monkeypatch):
    import sample_models

    assert Experiment(**TINY, compile="hierarchical").compile == "hierarchical"
    no_blocks = dataclasses.replace(sample_models.get("captioner"), block_classes=())  # a model that lists none
    monkeypatch.setitem(sample_models.MODELS, "captioner", no_blocks)
    with pytest.raises(SpecError, match="lists none"):
        Experiment(**TINY, compile="hierarchical")


def _captured(exp):
    """The model compiled with nested regions marked, through a backend that keeps Dynamo's graphs."""
    torch._dynamo.reset()
    w = build(exp, "cpu")
    with torch.no_grad():
        reference = clone(w.model(*w.batches[0].inputs))
    graphs = []

    def keep(gm, example_inputs):
        graphs.append(gm)
        return gm.forward
    mark_nested_regions(w.entry.repeated_blocks(w.model))
    with torch.no_grad():
        out = clone(torch.compile(w.model, backend=keep)(*w.batches[0].inputs))
    return w, graphs, out, reference


@pytest.mark.skipif(not features.available("nested_compile_region"), reason="this torch has no nested regions")
def test_hierarchical_compiles_each_block_as_a_nested_region_and_matches_eager():
    exp = Experiment(**TINY, compile="hierarchical", backend="eager")
    w, graphs, out, reference = _captured(exp)
    (graph,) = graphs  # still one whole-model graph
    regions = [n for n in graph.graph.nodes if n.target is torch.ops.higher_order.invoke_subgraph]
    assert len(regions) == len(w.entry.repeated_blocks(w.model)) == 4  # 2 encoder + 2 decoder blocks
    assert compare(out, reference, "fp32")["correctness_ok"]
    # the eager model is untouched by the marking: same class name, same result
    assert [type(b).__name__ for b in w.entry.repeated_blocks(w.model)] == ["EncoderBlock"] * 2 + ["DecoderBlock"] * 2


@pytest.mark.skipif(not features.available("nested_compile_region"), reason="this torch has no nested regions")
def test_the_check_against_eager_catches_a_silently_wrong_nested_region():
    """A per-instance bound wrapper (instead of the lab's subclass) compiled the tiny captioner to a wrong result on
    torch 2.14 without any error: the run's correctness check is what says so."""
    import types

    torch._dynamo.reset()
    w = build(Experiment(**TINY), "cpu")
    with torch.no_grad():
        reference = clone(w.model(*w.batches[0].inputs))
        for block in w.entry.repeated_blocks(w.model):
            block.forward = types.MethodType(torch.compiler.nested_compile_region(type(block).forward), block)
        out = clone(torch.compile(w.model, backend="eager")(*w.batches[0].inputs))
    truly_equal = all(torch.allclose(a, b, rtol=1e-3, atol=1e-4) for a, b in zip(out, reference))
    if truly_equal:
        pytest.skip("this torch compiles per-instance nested regions correctly: nothing wrong to catch")
    assert compare(out, reference, "fp32")["correctness_ok"] is False
    assert compare([t + 0 for t in reference], reference, "fp32")["correctness_ok"] is True


def test_hierarchical_on_a_torch_without_nested_regions_says_which_torch_brings_them(monkeypatch):
    monkeypatch.delattr(torch.compiler, "nested_compile_region")
    assert "2.8" in features.missing("nested_compile_region")
    w = build(Experiment(**TINY), "cpu")
    with pytest.raises(RuntimeError, match=r"nested_compile_region.*torch 2\.8 brings it"):
        apply_compile(w.model, Experiment(**TINY, compile="hierarchical"), w.entry.repeated_blocks(w.model))


# --- stances ---------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def probed():
    exp = Experiment(**TINY, backend="eager", shape_count=3)
    return {p["stance"]: p for p in stances.probe_all(exp)}


def test_fail_on_recompile_proves_a_shape_stable_and_names_the_guard_a_new_one_fails(probed):
    p = probed["fail_on_recompile"]
    again = p["calls"][1]
    assert again["stance"] == "fail_on_recompile" and not again["compiled"] and again["correctness_ok"]
    assert p["raised"] is True
    (guard,) = p["failed_guards"]
    assert "tokens" in guard and f"expected {p['sizes'][0]}, actual {p['sizes'][1]}" in guard


def test_eager_on_recompile_runs_new_shapes_eagerly_without_compiling(probed):
    p = probed["eager_on_recompile"]
    new_shapes = [c for c in p["calls"][1:-1]]
    assert new_shapes and all(not c["compiled"] and c["correctness_ok"] for c in new_shapes)
    assert p["compiles"] == 1  # the warm-up's, only


def test_eager_then_compile_is_per_function_and_the_probe_says_which_compiled_when(probed):
    """torch's stance holds each function's first call eager and compiles its second. The model's forward: eager on
    call 1, compiled on call 2, once for every size. The block and attention forwards, called more than once per step,
    reach their second call inside call 1 and compile there: the probe said "the first call runs eagerly" beside a
    first call that compiled four times."""
    p = probed["eager_then_compile"]
    first, second, third = p["calls"]
    assert p["top"].startswith("captioner.py:") and p["top"].endswith(" forward")
    assert not first["top"] and first["compiled"] and p["top"] not in first["where"]  # the inner functions only
    assert p["inner_compiled_first"] == first["where"]
    assert any(f.startswith("captioner.py:") for f in first["where"])
    assert "ran eagerly, yet" in first["note"] and "second call" in first["note"]
    assert second["top"] and p["top_compiled_at_call"] == 2
    assert not third["compiled"]  # the third size reuses what the second call compiled: dynamic from two sizes
    assert all(c["correctness_ok"] for c in p["calls"])
    words = " ".join(stance_words.probe_words(p))
    assert "per function, not per call of the model" in words
    assert "ran eagerly on call 1 and compiled on call 2, once for every size" in words
    assert f"Yet call 1 was not all eager: {len(first['where'])} compiles ran inside it" in words


def test_the_other_probes_words_say_what_their_calls_did(probed):
    fail = " ".join(stance_words.probe_words(probed["fail_on_recompile"]))
    assert "the same size ran again under the stance without a compile" in fail
    assert "A new size raised instead of recompiling" in fail and "size mismatch at index 1" in fail
    eager = " ".join(stance_words.probe_words(probed["eager_on_recompile"]))
    assert "2 new sizes ran eagerly, none compiling" in eager and "1 compile in all: the warm-up's" in eager


def test_a_stance_this_torch_lacks_is_reported_not_run(monkeypatch):
    monkeypatch.delattr(torch.compiler, "set_stance")
    out = stances.probe(Experiment(**TINY, backend="eager", shape_count=3), "eager_then_compile")
    assert out == {"stance": "eager_then_compile", "unavailable": features.missing("eager_then_compile")}
    assert "2.8" in out["unavailable"]


def test_every_feature_is_detected_not_version_compared(monkeypatch):
    assert all(isinstance(row["available"], bool) for row in features.table())
    monkeypatch.delattr(torch.compiler, "save_cache_artifacts")
    assert features.missing("mega_cache") == ("this torch has no torch.compiler.save_cache_artifacts / "
                                              "load_cache_artifacts (Mega-Cache): torch 2.7 brings it")


def test_the_run_page_greys_hierarchical_on_a_torch_without_nested_regions(monkeypatch, tmp_path):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("COMPILE_LAB_DB", str(tmp_path / "runs.sqlite"))
    monkeypatch.delattr(torch.compiler, "nested_compile_region")
    at = AppTest.from_file("../app.py", default_timeout=300).run()
    radio = at.radio(key="run_compile")
    assert "hierarchical" in radio.options[-1] and "needs torch 2.8" in radio.options[-1]  # shown, never hidden
    radio.set_value("hierarchical").run()
    assert not at.exception
    assert any("torch 2.8 brings it" in w.value for w in at.warning)


# --- error_on_graph_break -------------------------------------------------------------------------------------------
@pytest.mark.skipif(not features.available("error_on_graph_break"), reason=features.missing("error_on_graph_break")
                    or "")
def test_error_on_graph_break_turns_the_break_into_an_error_and_off_leaves_it_a_split():
    from tcore.worker.compile import graph_break_errors

    exp = Experiment(**TINY, graph_break=True, backend="eager")
    w = build(exp, "cpu")
    torch._dynamo.reset()
    with torch.no_grad(), graph_break_errors(exp):
        torch.compile(w.model, backend="eager")(*w.batches[0].inputs)  # off: the break splits the graph, no error
    torch._dynamo.reset()
    with pytest.raises(Exception, match=r"item\(\)"), torch.no_grad(), \
            graph_break_errors(exp.replace(error_on_graph_break=True)):
        torch.compile(w.model, backend="eager")(*w.batches[0].inputs)
    torch._dynamo.reset()
    # copy-as-code wraps the compiled model the same way: the wrapped call raises too
    wrapped = torch._dynamo.error_on_graph_break(True)(torch.compile(w.model, backend="eager"))
    with pytest.raises(Exception, match=r"item\(\)"), torch.no_grad():
        wrapped(*w.batches[0].inputs)


def test_error_on_graph_break_is_refused_where_it_would_do_nothing():
    with pytest.raises(SpecError, match="beside fullgraph"):
        Experiment(**TINY, fullgraph=True, error_on_graph_break=True)
    with pytest.raises(SpecError, match="needs something compiled"):
        Experiment(**TINY, compile="off", error_on_graph_break=True)


def test_error_on_graph_break_on_a_torch_without_it_is_greyed_and_a_run_says_why(monkeypatch, tmp_path):
    from streamlit.testing.v1 import AppTest

    from tcore.worker.compile import graph_break_errors

    monkeypatch.delattr(torch._dynamo, "error_on_graph_break")
    with pytest.raises(RuntimeError, match=r"torch 2\.9 brings it"):
        graph_break_errors(Experiment(**TINY, error_on_graph_break=True))
    monkeypatch.setenv("COMPILE_LAB_DB", str(tmp_path / "runs.sqlite"))
    at = AppTest.from_file("../app.py", default_timeout=300).run()
    toggle = at.toggle(key="run_error_on_graph_break")
    assert toggle.disabled and "needs torch 2.9" in toggle.label


# --- the Diagnose page's words for stances ---------------------------------------------------------------------------
SCHEDULE_RUN = {
    "compile_events": [
        {"compile_id": "0/0", "frame": "forward", "kind": "compile", "reason": ""},
        {"compile_id": "0/1", "frame": "forward", "kind": "recompile",
         "reason": "0/0: tensor 'tokens' size mismatch at index 1. expected 5, actual 11"}],
    "schedule": [{"size": 5, "compiles": [], "eager_ms": 10.0, "compiled_ms": 5.0},
                 {"size": 11, "compiles": ["0/1"], "eager_ms": 20.0, "compiled_ms": 3000.0},
                 {"size": 5, "compiles": [], "eager_ms": 10.0, "compiled_ms": 5.0}],
}


def test_the_diagnose_page_says_where_fail_on_recompile_would_stop_a_schedule_with_the_guard():
    from ui.words.stance_words import stance_words

    fail, eager = stance_words(SCHEDULE_RUN)
    assert "stopped at its first recompilation" in fail and "size mismatch at index 1. expected 5, actual 11" in fail
    assert "0.02 s of eager steps in place of 3.00 s" in eager
    (stable,) = stance_words({"compile_events": SCHEDULE_RUN["compile_events"][:1], "schedule": []})
    assert stable.startswith("**Stable**")


def test_the_stance_words_grey_out_on_a_torch_without_stances(monkeypatch):
    from ui.words.stance_words import stance_words

    monkeypatch.delattr(torch.compiler, "set_stance")
    lines = stance_words(SCHEDULE_RUN)
    assert lines == ["`fail_on_recompile`: this torch has no fail_on_recompile stance: torch 2.6 brings it.",
                     "`eager_on_recompile`: this torch has no eager_on_recompile stance: torch 2.6 brings it."]


# --- the optimizer step's backend -----------------------------------------------------------------------------------
def test_a_run_whose_backend_generates_no_kernels_compiles_its_optimizer_step_by_that_backend(monkeypatch):
    """A run with backend=eager and the optimizer compiled had handed its AdamW step to Inductor: kernels generated
    (a minute of g++ on the CPU) in a run whose backend promises none. The step and its copy-as-code take the run's."""
    import torch._inductor.compile_fx as compile_fx

    from tcore.export.snippet import code_for
    from tcore.worker.compile import make_optimizer, optimizer_step

    reached = []
    monkeypatch.setattr(compile_fx, "compile_fx", lambda *a, **k: reached.append(a) or a[0].forward)
    torch._dynamo.reset()
    backend = "eager"  # aot_eager goes the same way (spec.EAGER_KERNEL_BACKENDS), only slower to trace
    exp = Experiment(**TINY, task="training", compile_optimizer=True, backend=backend)
    model = torch.nn.Linear(4, 4)
    optimizer = make_optimizer(model, exp, "cpu")
    model(torch.randn(2, 4)).sum().backward()
    optimizer_step(optimizer, exp)()
    assert reached == [] and float(optimizer.state[model.weight]["step"]) == 1.0  # it stepped, by no Inductor
    assert f"@torch.compile(backend='{backend}', fullgraph=False)  # <--\ndef optimizer_step():" in code_for(
        exp.to_dict(), "cpu")
    torch.compile(lambda x: x + 1)(torch.randn(2))  # the recorder sees what does reach Inductor
    assert reached, "compile_fx is no longer where Inductor starts: this test no longer tests anything"
