"""Which fields of a spec change what a run compiles: what two runs must share to be compared, or to share caches."""
from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping

# Fields that say how long and how carefully to measure, and what to record on the side (a TORCH_TRACE): they
# change neither the compiled code nor what a figure means.
MEASUREMENT_FIELDS = frozenset({"warmup_steps", "timed_s", "timed_steps", "rounds", "round_s", "target_pct", "seed",
                                "torch_trace"})
# Fields that say where a compile's work comes from (fresh or reused caches) or which device kind was asked for
# (the run records the one it resolved to): they do not change what gets compiled.
PROVENANCE_FIELDS = frozenset({"cache", "device"})


def settings(spec: dict[str, Any], *, ignoring: frozenset[str] | set[str] = frozenset()) -> dict[str, Any]:
    """A spec's fields less the measurement ones and `ignoring`: two runs with equal settings ran the same experiment.

    settings(spec, ignoring=PROVENANCE_FIELDS) is what was compiled (the compile-artifacts key); a page that
    varies a field itself (cold vs warm, whole vs regional) ignores that field too.
    """
    return {k: v for k, v in spec.items() if k not in MEASUREMENT_FIELDS and k not in ignoring}


def same_compile(a: dict[str, Any], b: dict[str, Any], *, varying: frozenset[str] | set[str] = frozenset()) -> bool:
    """Whether two specs compile the same thing, but for the fields in `varying` (what a comparison varies on
    purpose, e.g. the scope). Everything that changes the compile counts: model, preset, batch, precision,
    backend, mode, options, shape schedule and remedy, graph break... Only how long it was timed, which
    caches it started from and the device kind asked for do not. The one definition the pages use."""
    ignoring = PROVENANCE_FIELDS | set(varying)
    return settings(a, ignoring=ignoring) == settings(b, ignoring=ignoring)


def compile_key(spec: dict[str, Any], device: str) -> str:
    """The settings that determine what gets compiled, on which kind of device, as a short hash: what compile
    artifacts are stored under, and how similar runs' compile times are found."""
    compiled = settings(spec, ignoring=PROVENANCE_FIELDS)
    return hashlib.sha256(json.dumps([compiled, device], sort_keys=True).encode()).hexdigest()[:16]


def machine(env: Mapping[str, Any], device: str | None) -> tuple[str | None, str | None, str | None]:
    """What makes two runs' machines the same: the device kind, the host's name and its GPU (or CPU) model."""
    return device, env.get("hostname"), env.get("gpu") if device == "cuda" else env.get("cpu")


def same_setting(a: Mapping[str, Any], b: Mapping[str, Any], ignoring: frozenset[str] = frozenset()) -> bool:
    """Two specs that measure the same speedup: equal but for how long they were timed (measurement fields), the
    caches the compile started from and the device kind asked for (the run records the one it got); and `ignoring`."""
    ignored = PROVENANCE_FIELDS | ignoring
    return settings(dict(a), ignoring=ignored) == settings(dict(b), ignoring=ignored)
