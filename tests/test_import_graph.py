"""No module in tcore/, ui/ or sample_models/ imports, directly or through others, a module that imports it back; each
package leans only on the layers below it.

Imports inside functions count: a lazy import is a circle postponed (it breaks the day someone moves it to the top), so
the graph is every import statement in a module's source, wherever it stands. Importing a module inside a package runs
the package's __init__.py first, so a module that imports from a package it is not part of imports that package too: a
package whose __init__ imports its parts is in a circle with any part's import that leads back to the importer.
"""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("tcore", "ui", "sample_models")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for package in PACKAGES for p in (ROOT / package).glob("**/*.py")
           if "__pycache__" not in p.parts}


def _resolve(name: str) -> str | None:
    """The module of ours that importing `name` runs: `name` itself, or the nearest package above it."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _imported(module: str, path: Path) -> set[str]:
    """The modules of ours that `module` imports anywhere in its source (top level, functions, branches)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {_resolve(a.name) for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from . import x, from ..lab import y
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:  # `from pkg import mod` imports the module pkg.mod; else the name is in pkg
                found.add(_resolve(f"{base}.{alias.name}") if f"{base}.{alias.name}" in MODULES else _resolve(base))
    found.discard(None)
    found |= {package for name in found for package in _packages_above(name) if not _inside(module, package)}
    found.discard(module)
    return found


def _packages_above(name: str) -> list[str]:
    """The packages whose __init__ runs before `name` (tcore.figures for tcore.figures.paired), tcore itself aside."""
    parts = name.split(".")
    return [p for p in (".".join(parts[:i]) for i in range(2, len(parts))) if p in MODULES]


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def import_graph() -> dict[str, set[str]]:
    return {module: _imported(module, path) for module, path in MODULES.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (Tarjan), each as a -> ... -> a."""
    index, low, stack, on_stack, components = {}, {}, [], set(), []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(component)

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return [_a_cycle_through(graph, component) for component in components]


def _a_cycle_through(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """The shortest way from the component's first module back to itself, inside the component."""
    start = min(component)
    paths, seen = [[start]], {start}
    while paths:
        path = paths.pop(0)
        for w in sorted(graph[path[-1]] & component):
            if w == start:
                return path + [start]
            if w not in seen:
                seen.add(w)
                paths.append(path + [w])
    raise AssertionError(f"no cycle in a strongly connected component: {component}")


def test_the_graph_sees_every_module_and_imports_inside_functions():
    graph = import_graph()
    assert len(graph) > 50 and "tcore.lab.queue.scheduler" in graph and "tcore.worker.measurement" in graph
    # tcore.cli imports the scheduler only where a command needs it, inside a function
    assert any(m.startswith("tcore.lab") for m in graph["tcore.cli"])


def test_the_cycle_finder_names_a_cycle_and_passes_a_line():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_importing_a_part_of_another_package_runs_that_package_first():
    # verdicts is a part of tcore.figures, whose __init__ imports verdicts: no edge back to its own package
    graph = import_graph()
    assert ("tcore.figures" in graph["tcore.worker.measurement"]
            and "tcore.figures" not in graph["tcore.figures.verdicts"])


# Which of tcore's packages each may import, through any chain: the shared layers (what a run is, the machine, the
# figures) lean on nothing that reads records, writes exports, runs the lab or the worker; the worker never reaches
# the lab side, the store, the analysis of finished records or the exports.
MAY_REACH = {
    "tcore.experiment": {"tcore.experiment"},
    "tcore.host": {"tcore.experiment", "tcore.host"},
    "tcore.store": {"tcore.experiment", "tcore.store"},
    "tcore.figures": {"tcore.experiment", "tcore.figures"},
    "tcore.analysis": {"tcore.experiment", "tcore.figures", "tcore.analysis"},
    "tcore.export": {"tcore.experiment", "tcore.figures", "tcore.export"},
    "tcore.worker": {"tcore.experiment", "tcore.host", "tcore.figures", "tcore.worker"},
}


# The store keeps records and leans on what a run is (tcore.experiment), nothing that reads or explains records: a
# result stored before today's figures is rewritten by the lab, which hands the store the upgrade
# (tcore.lab.outputs.stored_results).
def test_the_store_leans_on_what_a_run_is_and_on_nothing_that_reads_records():
    graph = import_graph()
    upward = {(m, w) for m in graph if _inside(m, "tcore.store") for w in graph[m]
              if w.startswith("tcore.") and ".".join(w.split(".")[:2]) not in ("tcore.experiment", "tcore.store")}
    assert upward == set()


def _module_level_imports(path: Path) -> set[str]:
    """The names a module imports as it is imported: its top-level statements (inside a top-level if or try too), not
    its functions' and not what only a type checker reads (if TYPE_CHECKING)."""
    names, todo = set(), list(ast.parse(path.read_text(), str(path)).body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.If) and not (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
            todo += node.body + node.orelse
        elif isinstance(node, ast.Try):
            todo += node.body + node.orelse + node.finalbody + [n for h in node.handlers for n in h.body]
    return names


def test_what_a_run_is_imports_the_model_registry_only_where_it_checks_or_names_a_model():
    # sample_models imports torch and the model libraries: reading or writing an experiment must not load them
    offenders = {m: sorted(n for n in _module_level_imports(MODULES[m]) if _inside(n, "sample_models"))
                 for m in MODULES if _inside(m, "tcore.experiment")}
    assert {m: n for m, n in offenders.items() if n} == {}


def _reached(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for w in graph[todo.pop()] - seen:
            seen.add(w)
            todo.append(w)
    return seen


def test_each_package_of_tcore_reaches_only_the_layers_below_it():
    graph = import_graph()
    for package, allowed in MAY_REACH.items():
        modules = [m for m in graph if _inside(m, package)]
        assert modules, package
        beyond = {m: sorted(w for w in _reached(graph, m)
                            if w.startswith("tcore") and ".".join(w.split(".")[:2]) not in allowed)
                  for m in modules}
        assert {m: w for m, w in beyond.items() if w} == {}, package


def test_no_module_is_part_of_an_import_cycle():
    graph = import_graph()
    assert any(m.startswith("ui.") for m in graph) and any(m.startswith("sample_models.") for m in graph)
    found = cycles(graph)
    assert found == [], "import cycles:\n" + "\n".join(" -> ".join(c) for c in found)


def test_the_lab_never_reaches_the_pages_and_the_models_never_reach_the_lab():
    graph = import_graph()
    for package, forbidden in (("tcore", ("ui",)), ("sample_models", ("tcore", "ui"))):
        beyond = {m: sorted(w for w in _reached(graph, m) if w.split(".")[0] in forbidden)
                  for m in graph if _inside(m, package)}
        assert {m: w for m, w in beyond.items() if w} == {}, package


# ui/ by kind: the words beside the charts (no Streamlit, no Plotly), the charts (Plotly, no Streamlit), and the
# panels that draw them on a page with Streamlit. A kind leans only on the kinds before it.
UI_KINDS = [("words", ()), ("charts", ("plotly",)), ("panels", ("plotly", "streamlit"))]


def _third_party(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_ui_kinds_lean_only_on_the_kinds_before_them():
    graph = import_graph()
    for i, (kind, libraries) in enumerate(UI_KINDS):
        allowed = {f"ui.{k}" for k, _ in UI_KINDS[: i + 1]}
        modules = [m for m in graph if _inside(m, f"ui.{kind}")]
        assert len(modules) > 1, kind
        beyond = {m: sorted(w for w in _reached(graph, m)
                            if w.startswith("ui.") and ".".join(w.split(".")[:2]) not in allowed)
                  for m in modules}
        assert {m: w for m, w in beyond.items() if w} == {}, kind
        drawn_with = {m: sorted(_third_party(MODULES[m]) & {"plotly", "streamlit"} - set(libraries)) for m in modules}
        assert {m: libs for m, libs in drawn_with.items() if libs} == {}, kind


def test_the_model_sources_lean_on_the_interface_not_on_the_registry():
    graph = import_graph()
    sources = [m for m in graph if _inside(m, "sample_models.sources") or m == "sample_models.interface"]
    assert "sample_models.interface" in graph["sample_models.sources.common"]
    assert {m: "sample_models" for m in sources if "sample_models" in graph[m]} == {}


# The lab's rooms by job, each leaning only on the rooms below it: its settings; what a run leaves behind (outputs);
# starting a worker (launch); what the lab allows (policy); when runs start and how they share a device (queue); a
# run's life in the lab process (run). The lab's features (sweeps, the ladder, calibration...) stand on all of them.
LAB_ROOMS = ["settings", "outputs", "launch", "policy", "queue", "run"]


def test_the_labs_rooms_lean_only_on_the_rooms_below_them():
    graph = import_graph()
    for i, room in enumerate(LAB_ROOMS):
        allowed = {f"tcore.lab.{r}" for r in LAB_ROOMS[: i + 1]} | {"tcore.lab"}
        modules = [m for m in graph if _inside(m, f"tcore.lab.{room}")]
        assert len(modules) > 1, room  # the room and what is in it
        beyond = {m: sorted(w for w in _reached(graph, m)
                            if w.startswith("tcore.lab") and ".".join(w.split(".")[:3]) not in allowed)
                  for m in modules}
        assert {m: w for m, w in beyond.items() if w} == {}, room


# The app's side (the app, its server, its pages and ui/) reaches the lab through one module, its API: a page draws,
# the lab decides, and what a page may ask of the lab reads in one file.
APP_SIDE = [ROOT / "app.py", ROOT / "serve.py", *sorted((ROOT / "app_pages").glob("*.py")),
            *sorted(p for p in (ROOT / "ui").glob("**/*.py") if "__pycache__" not in p.parts)]
LAB_API = "tcore.lab.api"


def _lab_imports(path: Path) -> set[str]:
    """The modules of tcore.lab that `path` names in an import, anywhere in its source."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names if _inside(a.name, "tcore.lab")}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if node.module == "tcore":
                names |= {f"tcore.{a.name}" for a in node.names if a.name == "lab"}
            elif node.module == "tcore.lab":
                names |= {f"tcore.lab.{a.name}" for a in node.names}
            elif _inside(node.module, "tcore.lab"):
                names.add(node.module)
    return names


def test_the_app_side_imports_nothing_from_the_lab_but_its_api():
    found = {str(p.relative_to(ROOT)): _lab_imports(p) for p in APP_SIDE}
    assert found["app.py"] == found["app_pages/system.py"] == found["ui/panels/live.py"] == {LAB_API}
    assert {p: sorted(n) for p, n in found.items() if n - {LAB_API}} == {}


def test_the_rule_for_the_app_side_sees_every_way_of_naming_a_lab_module(tmp_path):
    page = tmp_path / "page.py"
    page.write_text("import tcore.lab.run.runs\nfrom tcore import lab\nfrom tcore.lab import sweeps, api\n"
                    "def f():\n    from tcore.lab.queue.scheduler import TICK_S\n")
    assert _lab_imports(page) == {"tcore.lab.run.runs", "tcore.lab", "tcore.lab.sweeps", LAB_API,
                                  "tcore.lab.queue.scheduler"}
