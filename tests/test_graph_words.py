"""What the compiler did, in words whose numbers agree with the lists under them, so a
reader who counts the list finds the number the sentence gave.

The figures are a real run's (captioner/tiny with the deliberate graph break, aot_eager on this CPU): Dynamo's
counter said 2 graph breaks while its log listed 3 (two at captioner.py:74, one at :97), and the code after each
break recompiled on a guard over the number .item() returned.
"""
from ui.words import graph_words

PATH = "/work/main/sample_models/captioner.py"
SOURCE = "if x.abs().mean().item() > 1e4:"
ITEM = "Unsupported Tensor.item() call with capture_scalar_outputs=False"


def _guard(n: int, value: str, line: int) -> str:
    return (f"{n}/0: ___stack0 == {value}                         # {SOURCE}  # main/sample_models/captioner.py:{line}"
            f" in torch_dynamo_resume_in_forward_at_{line}\nUser stack trace:\n  File \"{PATH}\", line {line}")


GRAPH_BREAK_RUN = {
    "graph_count": 6, "graph_break_count": 2, "recompile_count": 2,
    "graph_breaks": [
        {"reason": ITEM, "file": PATH, "line": 74, "count": 1, "skipped_frame": True, "source": SOURCE},
        {"reason": ITEM, "file": PATH, "line": 74, "count": 1, "skipped_frame": False, "source": SOURCE},
        {"reason": ITEM, "file": PATH, "line": 97, "count": 1, "skipped_frame": False, "source": SOURCE}],
    "recompiles": [
        {"compile_id": "2/1", "frame": "torch_dynamo_resume_in_forward_at_74",
         "reason": _guard(2, "0.46689173579216003", 74)},
        {"compile_id": "4/1", "frame": "torch_dynamo_resume_in_forward_at_97",
         "reason": _guard(4, "1.111936092376709", 97)}],
}


def test_the_break_count_is_the_length_of_the_list_under_it_and_each_number_says_what_it_counts():
    words = graph_words.graph_words(GRAPH_BREAK_RUN)
    assert words[0] == ("Dynamo compiled **6 graphs**: 4 pieces of the model between its graph breaks, plus 2 "
                        "recompilations of them (below).")
    assert words[1].startswith("**2 graph breaks**, counted by place in the code")
    listed = [w for w in words if w.startswith("- graph break")]
    assert len(listed) == 2  # one per place: 74 (met twice) and 97; it listed three under "2 graph breaks" before
    assert "`captioner.py:74`" in listed[0] and "Dynamo met it 2 times" in listed[0] and "inside a loop" in listed[0]
    assert "`captioner.py:97`" in listed[1] and "met it" not in listed[1]


def test_a_recompile_on_the_value_item_returned_is_explained_in_words():
    words = graph_words.graph_words(GRAPH_BREAK_RUN)
    recompiles = [w for w in words if w.startswith("- recompile")]
    assert recompiles[0] == ("- recompile 2/1 of the rest of `forward` after the break at line 74 (Dynamo's resume "
                             "function): the guard `___stack0 == 0.4669` failed (a new value, see below)")
    assert not any("User stack trace" in w or "0.46689173579216003" in w for w in words)  # no raw guard line
    (why,) = [w for w in words if w.startswith("**Recompiled on a value nobody chose.**")]
    assert "`.item()` at `captioner.py:74`" in why
    assert "each new value fails the guard and compiles again" in why
    assert "capture_scalar_outputs = True" in why and "keep the value a tensor" in why


def test_a_shape_recompile_is_not_taken_for_a_value_guard():
    assert graph_words.value_guard("0/0: tensor 'tokens' size mismatch at index 1. expected 8, actual 16") is None
    assert graph_words.value_guard("0/0: L['scale'] == 0.5") == {"guard": "L['scale'] == 0.5", "value": "0.5",
                                                          "source": "", "place": None, "item": False}
