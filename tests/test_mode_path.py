"""The path a knob takes from its widget to torch.compile, for `mode` on the Run page: the files in order, each
function handing the experiment that carries it to the next. A newcomer follows it here (docs/design.md says it in
words); a hop that moves or a detour through a file already passed fails this test first.

The experiment itself (tcore/experiment/spec.py: the field, its check, its JSON, compile_kwargs) is what carries the
knob, read at several hops: it is the vehicle, not a stop on the way.
"""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# (file, function, the name it calls to hand the knob on), in the order the knob travels
PATH = [
    ("ui/panels/knobs.py", "compile_knobs", "selectbox"),  # the "Mode" widget; build() then makes the Experiment
    ("app_pages/run.py", "submit_run", "submit"),  # the Run button's callback
    ("ui/panels/queue.py", "submit", "queue"),  # the page side ends: the lab's one door
    ("tcore/lab/api.py", "queue", "start"),
    ("tcore/lab/run/runs.py", "start", "LiveRun"),  # checked against the lab's limits, queued in the store
    ("tcore/lab/run/liverun.py", "Launching._start_and_follow", "RunHandle"),  # its turn: a worker for it
    ("tcore/lab/launch/handles.py", "RunHandle.__init__", "envelope"),  # on the worker's stdin
    ("tcore/worker/__main__.py", "main", "run"),  # the worker process
    ("tcore/worker/measurement.py", "run", "measure"),  # then Measurement.compile calls apply_compile
    ("tcore/worker/compile.py", "apply_compile", "compile"),  # torch.compile(model, **compile_kwargs(exp))
]
PAGE_SIDE = ("app_pages/", "ui/")


def _function(path: str, qualname: str) -> ast.FunctionDef:
    body = ast.parse((ROOT / path).read_text()).body
    *holders, name = qualname.split(".")
    for holder in holders:
        body = next(n for n in body if isinstance(n, ast.ClassDef) and n.name == holder).body
    return next(n for n in body if isinstance(n, ast.FunctionDef) and n.name == name)


def _called(node: ast.AST) -> set[str]:
    return {c.func.attr if isinstance(c.func, ast.Attribute) else getattr(c.func, "id", "")
            for c in ast.walk(node) if isinstance(c, ast.Call)}


def test_each_hop_hands_the_knob_to_the_next():
    for path, function, callee in PATH:
        assert callee in _called(_function(path, function)), (path, function, callee)
    widget = _function("ui/panels/knobs.py", "compile_knobs")
    assert any(isinstance(c, ast.Call) and getattr(c.func, "attr", "") == "selectbox" and c.args
               and getattr(c.args[0], "value", None) == "Mode" for c in ast.walk(widget))
    assert "Experiment" in _called(_function("ui/panels/knobs.py", "build"))
    assert "apply_compile" in _called(_function("tcore/worker/measurement.py", "Measurement.compile"))
    kwargs = ast.unparse(_function("tcore/experiment/spec.py", "compile_kwargs"))
    assert "kwargs['mode'] = exp.mode" in kwargs


def test_the_path_is_short_and_passes_no_file_twice():
    files = [path for path, _, _ in PATH]
    assert len(files) == len(set(files)) == 10
    assert len([f for f in files if f.startswith(PAGE_SIDE)]) == 3
    assert all(not f.startswith(PAGE_SIDE) for f in files[3:])  # once in the lab, it never comes back to a page
