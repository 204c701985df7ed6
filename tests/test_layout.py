"""The engine's folders show its process boundary: nothing outside tcore/worker imports from inside it."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# the project's own code: not tests or benchmarks, nor a hidden folder (the virtual environment, a checkout copied
# in beside it to run on another machine)
OUTSIDE_THE_WORKER = [p for p in ROOT.glob("**/*.py")
                      if not {"tests", "bench"} & set(p.relative_to(ROOT).parts)
                      and not any(part.startswith(".") for part in p.relative_to(ROOT).parts)
                      and "worker" not in p.relative_to(ROOT).parts[:2]]


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return names


def test_the_app_and_command_line_side_import_nothing_from_inside_the_worker():
    assert len(OUTSIDE_THE_WORKER) > 20  # the app, its pages, ui/ and the lab side of tcore
    offenders = {str(p.relative_to(ROOT)): sorted(n for n in _imports(p) if n.startswith("tcore.worker"))
                 for p in OUTSIDE_THE_WORKER}
    assert {p: n for p, n in offenders.items() if n} == {}


def test_the_worker_imports_nothing_from_the_lab_side_or_the_store():
    inside = list((ROOT / "tcore" / "worker").glob("*.py"))
    offenders = {str(p.relative_to(ROOT)): sorted(n for n in _imports(p) if n.startswith(("tcore.lab", "tcore.store")))
                 for p in inside}
    assert {p: n for p, n in offenders.items() if n} == {}


def test_no_two_modules_share_a_name():
    """A module's name says which it is: two files named alike (two fork servers, two `runs`) leave every import line,
    traceback and search asking which one is meant."""
    found: dict[str, list[str]] = {}
    for folder in ("tcore", "ui", "app_pages", "sample_models"):
        for path in (ROOT / folder).glob("**/*.py"):
            if path.name not in ("__init__.py", "__main__.py") and "__pycache__" not in path.parts:
                found.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    assert len(found) > 100
    assert {name: paths for name, paths in found.items() if len(paths) > 1} == {}
