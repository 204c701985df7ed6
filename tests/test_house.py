"""The engine's classes stay small enough to read: none offers more than MAX_PUBLIC public methods (its bases' counted),
and a class made of parts (two bases or more) has each attribute written by one part alone, the class itself counted as
one: the part that writes a piece of state owns it, and the others ask it."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_PUBLIC = 25


def _classes(root: Path, package: str = "tcore") -> dict[str, tuple[ast.ClassDef, dict[str, str]]]:
    """Every class under `root`/`package` as module.Class -> (its definition, the names its module can see: a class
    of its own or one it imports from the package, as module.Class)."""
    found = {}
    for path in sorted((root / package).glob("**/*.py")):
        module = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        tree = ast.parse(path.read_text(), str(path))
        names = {node.name: f"{module}.{node.name}" for node in tree.body if isinstance(node, ast.ClassDef)}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(package) and not node.level:
                names.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names})
        found.update({f"{module}.{node.name}": (node, names) for node in tree.body if isinstance(node, ast.ClassDef)})
    return found


def _bases(name: str, classes: dict) -> list[str]:
    """The classes of the package that `name` names as its bases (a name imported through a package's __init__ is
    followed to the module that defines it)."""
    node, names = classes[name]
    out = []
    for base in node.bases:
        if isinstance(base, ast.Name) and base.id in names:
            target = names[base.id]
            if target not in classes:  # imported from a package that imports it in turn
                target = next((c for c in classes if c.rsplit(".", 1)[1] == base.id
                               and c.startswith(target.rsplit(".", 1)[0])), None)
            if target is not None:
                out.append(target)
    return out


def _with_bases(name: str, classes: dict) -> list[str]:
    return [name] + [c for base in _bases(name, classes) for c in _with_bases(base, classes)]


def public_methods(name: str, classes: dict) -> set[str]:
    return {n.name for c in _with_bases(name, classes) for n in classes[c][0].body
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and not n.name.startswith("_")}


def _written(node: ast.ClassDef) -> set[str]:
    """The attributes `node` assigns on self (self.x = ..., self.x: T = ..., self.x += ..., a, self.x = ...)."""
    out = set()
    for n in ast.walk(node):
        targets = n.targets if isinstance(n, ast.Assign) else \
            [n.target] if isinstance(n, (ast.AugAssign, ast.AnnAssign)) else []
        while targets:
            t = targets.pop()
            if isinstance(t, (ast.Tuple, ast.List)):
                targets += t.elts
            elif isinstance(t, ast.Starred):
                targets.append(t.value)
            elif isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                out.add(t.attr)
    return out


def shared_state(name: str, classes: dict) -> dict[str, list[str]]:
    """For a class of two bases or more: each attribute that two of its parts write (the class itself, and each base
    with what that base inherits), with the parts that write it."""
    bases = _bases(name, classes)
    if len(bases) < 2:
        return {}
    parts = {name: _written(classes[name][0])}
    parts.update({b: set().union(*(_written(classes[c][0]) for c in _with_bases(b, classes))) for b in bases})
    every = set().union(*parts.values())
    return {a: sorted(p for p, w in parts.items() if a in w) for a in sorted(every)
            if sum(a in w for w in parts.values()) > 1}


CLASSES = _classes(ROOT)


def test_no_class_offers_more_than_a_reader_can_hold():
    assert len(CLASSES) > 100 and "tcore.store.RunStore" in CLASSES and "tcore.lab.run.liverun.LiveRun" in CLASSES
    assert len(public_methods("tcore.store.RunStore", CLASSES)) > 10  # what it inherits (its runs, its file) counts
    large = {name: len(public_methods(name, CLASSES)) for name in CLASSES}
    assert {name: n for name, n in large.items() if n > MAX_PUBLIC} == {}


def test_no_two_parts_of_a_class_write_the_same_attribute():
    assert len(_bases("tcore.lab.run.liverun.LiveRun", CLASSES)) == 3
    assert {name: s for name in CLASSES if (s := shared_state(name, CLASSES))} == {}


def test_the_rules_see_a_large_class_and_state_that_two_parts_write(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "parts.py").write_text(
        "class Starting:\n    def start(self):\n        self.phase, self._started = 'starting', True\n"
        "class Following:\n    def follow(self, event):\n        self.phase = event\n"
        "    def wait(self):\n        self.handle.waiting = True\n")
    methods = "".join(f"    def verb_{i}(self):\n        pass\n" for i in range(MAX_PUBLIC))
    (tmp_path / "pkg" / "run.py").write_text(
        "from pkg.parts import Following, Starting\n"
        f"class Run(Starting, Following):\n    def __init__(self):\n        self.count: int = 0\n{methods}"
        "    def bump(self):\n        self.count += 1\n")
    classes = _classes(tmp_path, "pkg")
    assert len(public_methods("pkg.run.Run", classes)) == MAX_PUBLIC + 4  # its own, start, follow, wait
    # phase: two parts; handle is only read there (its attribute is the handle's); count: the class's own alone
    assert shared_state("pkg.run.Run", classes) == {"phase": ["pkg.parts.Following", "pkg.parts.Starting"]}
