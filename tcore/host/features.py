"""Which of torch's newer compile features the installed torch has, found by looking (never by its version string).

Each feature says what it is, how to detect it, and the torch release that brings it, so that an option this
torch lacks can be shown greyed out with that release rather than hidden or left to crash. The releases are
when each became usable from Python as named here (torch's release notes and docs); detection decides.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from sample_models.first_imports import IMPORT_LOCK


def _has(dotted: str) -> Callable[[], bool]:
    """A detector for an attribute path under torch, e.g. "compiler.set_stance"."""
    def detect() -> bool:
        import importlib

        import torch

        obj = torch
        for part in dotted.split("."):
            if not hasattr(obj, part):
                # a submodule that torch does not import eagerly (torch._dynamo, torch._inductor)
                try:
                    obj = importlib.import_module(f"{obj.__name__}.{part}") if hasattr(obj, "__path__") else None
                except ImportError:
                    return False
                if obj is None:
                    return False
            else:
                obj = getattr(obj, part)
        return True
    return detect


def _stance(name: str) -> Callable[[], bool]:
    """Whether torch.compiler.set_stance knows this stance: the names are a Literal (StanceStr) in newer torch, and
    the strings its eval-frame callback compares against in any torch (set_stance itself checks only on use)."""
    def detect() -> bool:
        import inspect
        import typing

        import torch

        if not hasattr(torch.compiler, "set_stance"):
            return False
        import torch._dynamo.eval_frame as ef

        known = typing.get_args(getattr(ef, "StanceStr", None))
        if known:
            return name in known
        return f'"{name}"' in inspect.getsource(ef)
    return detect


def _aot_compile() -> bool:
    """torch.compile(...).aot_compile(...) and torch.compiler.load_compiled_function to load what it saved."""
    import torch

    if not hasattr(torch.compiler, "load_compiled_function"):
        return False
    return hasattr(torch.compile(lambda: None, fullgraph=True), "aot_compile")  # compiles nothing until called


# The features whose check has run once in this process, under IMPORT_LOCK (sample_models.first_imports): only a
# first check imports anything.
_checked_once: set[str] = set()


@dataclass(frozen=True)
class Feature:
    name: str
    what: str                # in words, for the greyed-out option's caption
    brought_by: str          # the torch release that brings it
    detect: Callable[[], bool]

    @property
    def available(self) -> bool:
        if self.name in _checked_once:
            return self.detect()  # imports nothing now, and takes no lock: a page never waits for another's model
        with IMPORT_LOCK:  # its first check may import torch._dynamo or torch._inductor, in a page's thread
            found = self.detect()
            _checked_once.add(self.name)
            return found

    def missing_words(self) -> str:
        """Why an option is greyed out: what this torch lacks and which torch brings it."""
        return f"this torch has no {self.what}: torch {self.brought_by} brings it"


FEATURES: dict[str, Feature] = {f.name: f for f in (
    Feature("mega_cache", "torch.compiler.save_cache_artifacts / load_cache_artifacts (Mega-Cache)", "2.7",
            _has("compiler.save_cache_artifacts")),
    Feature("aot_compile", "torch.compile(...).aot_compile with torch.compiler.load_compiled_function", "2.12",
            _aot_compile),
    Feature("aoti", "AOTInductor packages (torch._inductor.aoti_compile_and_package / aoti_load_package)", "2.6",
            lambda: _has("_inductor.aoti_compile_and_package")() and _has("_inductor.aoti_load_package")()
            and _has("export.export")()),
    Feature("nested_compile_region", "torch.compiler.nested_compile_region (hierarchical compilation)", "2.8",
            _has("compiler.nested_compile_region")),
    Feature("set_stance", "torch.compiler.set_stance", "2.6", _has("compiler.set_stance")),
    Feature("fail_on_recompile", "fail_on_recompile stance", "2.6", _stance("fail_on_recompile")),
    Feature("eager_on_recompile", "eager_on_recompile stance", "2.6", _stance("eager_on_recompile")),
    Feature("eager_then_compile", "eager_then_compile stance", "2.8", _stance("eager_then_compile")),
    Feature("graph_break_registry", "graph-break registry (GBxxxx types with explanations and pages)", "2.8",
            _has("_dynamo.exc.get_gbid_documentation_link")),
    Feature("error_on_graph_break", "torch._dynamo.error_on_graph_break", "2.9", _has("_dynamo.error_on_graph_break")),
)}


def available(name: str) -> bool:
    return FEATURES[name].available


def missing(name: str) -> str | None:
    """None where this torch has the feature, else the words for its greyed-out option."""
    feature = FEATURES[name]
    return None if feature.available else feature.missing_words()


def table() -> list[dict]:
    """Every feature with whether this torch has it: for the System page and the command line."""
    return [{"feature": f.name, "what": f.what, "available": f.available, "brought_by": f.brought_by}
            for f in FEATURES.values()]
