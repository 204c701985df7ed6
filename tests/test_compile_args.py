"""torch.compile's arguments are one dict: what the worker passes is what copy-as-code writes out."""
import pytest

from tcore.experiment.spec import TORCH_DEFAULTS, Experiment, call_args, compile_kwargs
from tcore.export.snippet import code_for

EXPS = [Experiment(), Experiment(backend="aot_eager"), Experiment(mode="max-autotune", fullgraph=True),
        Experiment(dynamic=False), Experiment(compile="regional", dynamic=True, mode="reduce-overhead")]


@pytest.mark.parametrize("exp", EXPS, ids=lambda e: e.label)
def test_the_written_arguments_are_the_passed_ones_less_torch_s_defaults(exp):
    written = eval(f"dict({call_args(exp)})")  # as the pasted program passes them
    passed = compile_kwargs(exp)
    assert {**{k: TORCH_DEFAULTS[k] for k in passed}, **written} == passed
    code = code_for(exp.to_dict(), "cpu")
    assert (f"compile({call_args(exp)})  # <--" in code if exp.compile == "regional" else
            f"torch.compile(model{', ' + call_args(exp) if call_args(exp) else ''})  # <--" in code)


def test_a_mode_goes_to_inductor_only():
    assert "mode" not in compile_kwargs(Experiment(backend="aot_eager"))
    assert compile_kwargs(Experiment(mode="max-autotune"))["mode"] == "max-autotune"
