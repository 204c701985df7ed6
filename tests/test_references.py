"""Comments, docstrings, the README and docs/ name only modules and names that exist: a dotted tcore or sample_models
name in words must resolve."""
import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = re.compile(r"\b(?:tcore|sample_models)(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
# where the words are this project's: the engine, its sample models, the pages, the benches, the tests, the README
# and the documents
SCANNED = [*(p for folder in ("tcore", "sample_models", "ui", "app_pages", "bench", "tests")
             for p in sorted((ROOT / folder).rglob("*.py"))), ROOT / "app.py", ROOT / "README.md",
           ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "bench" / "README.md"]


def resolves(reference: str) -> bool:
    """Whether the longest importable prefix of `reference` is a module that has the rest as attributes."""
    parts = reference.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


def test_every_named_module_and_name_exists():
    dangling = []
    for path in SCANNED:
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            for ref in REFERENCE.findall(line):
                ref = ref.rstrip(".")
                if ref.endswith((".py", ".md", ".toml")) or ref.split(".")[-1] in ("py", "md"):
                    continue  # a file's name, not a module
                if not resolves(ref):
                    dangling.append(f"{path.relative_to(ROOT)}:{lineno}: {ref}")
    assert dangling == []


def test_no_words_point_at_files_outside_the_repository():
    """NOTES.md and 'the walk-through' are a session's notes, not in the repository: a reader cannot follow them."""
    stale = [f"{path.relative_to(ROOT)}:{n}" for path in SCANNED
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if ("NOTES.md" in line or "walk-through" in line) and path != Path(__file__)]
    assert stale == []
