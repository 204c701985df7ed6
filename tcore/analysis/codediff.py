"""What is in Inductor's generated programs: the kernels they define and the library calls they make, so two
runs' code can be compared by count before it is compared line by line.

Inductor's output code (one Python module per compiled graph) defines each generated kernel once, as
`<name> = async_compile.triton('<name>', ...)` on a GPU or `<name> = async_compile.cpp_pybinding(...)` on
the CPU, and calls the libraries directly for what it does not generate (`extern_kernels.mm(...)` for a
cuBLAS matmul, `torch.ops.aten.<op>.<overload>(...)` for a fallback). The names say the kind: triton_poi
(pointwise), triton_red and triton_per (reductions), triton_tem (a matmul or convolution template, as
max-autotune writes), cpp_fused (a C++ loop nest).
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

_DEFINED = re.compile(r"^(\w+) = async_compile\.(?:triton|cpp_pybinding|cpp)\(", re.M)
_EXTERN = re.compile(r"\bextern_kernels\.(\w+)\(")
_FALLBACK = re.compile(r"\btorch\.ops\.aten\.(\w+)\.\w+\(")
KINDS = (("triton_poi", "pointwise"), ("triton_red", "reduction"), ("triton_per", "persistent reduction"),
         ("triton_tem", "template (matmul/conv)"), ("cpp_fused", "C++ loop nest"), ("", "other"))
KERNELS_MEANS = ("Kernels Inductor generated (Triton on a GPU, C++ on the CPU), counted where its code defines "
                 "them, over all of the run's programs: fewer usually means more fusion. Library calls "
                 "(cuBLAS matmuls, aten fallbacks) are counted apart.")


@dataclass(frozen=True)
class Kernels:
    """The kernels and library calls in a run's generated programs."""

    by_kind: Counter = field(default_factory=Counter)   # kind -> generated kernels defined
    library: Counter = field(default_factory=Counter)   # library function -> calls in the code

    @property
    def total(self) -> int:
        return sum(self.by_kind.values())

    @property
    def library_calls(self) -> int:
        return sum(self.library.values())


def kind(name: str) -> str:
    return next(words for prefix, words in KINDS if name.startswith(prefix))


def kernels(programs: list[str]) -> Kernels:
    by_kind, library = Counter(), Counter()
    for code in programs:
        by_kind.update(kind(name) for name in _DEFINED.findall(code))
        library.update(_EXTERN.findall(code))
        library.update(f"aten.{op}" for op in _FALLBACK.findall(code))
    return Kernels(by_kind, library)


def kernel_words(a: Kernels, b: Kernels) -> str:
    """One sentence on how B's kernels differ from A's, by kind."""
    if not a.total and not b.total:
        return "Neither run's code defines a generated kernel."
    changes = []
    for _, words in KINDS:
        before, after = a.by_kind.get(words, 0), b.by_kind.get(words, 0)
        if before != after:
            changes.append(f"{words} {before} → {after}")
    library = "" if a.library_calls == b.library_calls else (
        f"; library calls {a.library_calls} → {b.library_calls}")
    if not changes:
        return f"The same kernels by kind in both: {a.total} generated{library or ''}."
    return f"Generated kernels {a.total} → {b.total} ({b.total - a.total:+d}): " + ", ".join(changes) + library + "."
