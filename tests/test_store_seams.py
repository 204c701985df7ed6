"""The store is reached one way: its methods. Nothing outside tcore/store opens its connections, so
the store's locking and schema live in one place."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRIVATE = {"_connect", "_write", "_open"}
# Everything but the store itself, and the tests (which write rows by hand to set up a case: tests/helpers.py).
OUTSIDE_THE_STORE = [p for p in ROOT.glob("**/*.py")
                     if not {".venv", "tests"} & set(p.relative_to(ROOT).parts)
                     and p.relative_to(ROOT).parts[:2] != ("tcore", "store")]


def _private_calls(path: Path) -> list[str]:
    return [f"{path.relative_to(ROOT)}:{node.lineno} .{node.attr}" for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Attribute) and node.attr in PRIVATE]


def test_nothing_outside_the_store_opens_its_connections():
    assert len(OUTSIDE_THE_STORE) > 20
    assert any(p.parts[-2:] == ("outputs", "artifact_handover.py") for p in OUTSIDE_THE_STORE)
    assert [call for p in OUTSIDE_THE_STORE for call in _private_calls(p)] == []


def test_the_store_parts_import_no_part_for_its_schema():
    """Each part reads its tables from the one schema; no part imports another for a schema string."""
    for path in (ROOT / "tcore" / "store").glob("*.py"):
        names = {a.name for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.ImportFrom)
                 for a in node.names}
        assert not {"SCHEMA", "QUEUE_SCHEMA", "QUEUE_COLUMNS"} & names, path.name


def _opened_stores(path: Path) -> list[str]:
    """Calls that open a store of their own (RunStore(...)) in `path`."""
    return [f"{path.relative_to(ROOT)}:{node.lineno}" for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "RunStore"]


def test_the_lab_is_handed_its_store_and_never_opens_one_from_a_path():
    """tcore/lab (artifacts, tlparse, runs, ...) takes the RunStore its caller has: one way in, no db_path."""
    lab = sorted((ROOT / "tcore" / "lab").rglob("*.py"))
    assert any(p.name == "tlparse.py" for p in lab)
    assert [call for p in lab for call in _opened_stores(p)] == []
    params = [f"{p.relative_to(ROOT)}:{node.lineno} {a.arg}" for p in lab for node in ast.walk(ast.parse(p.read_text()))
              if isinstance(node, ast.FunctionDef) for a in node.args.args + node.args.kwonlyargs if a.arg == "db_path"]
    assert params == []
