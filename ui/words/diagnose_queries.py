"""Which stored runs the Diagnose page sets side by side: the dynamic-shape strategies, the four-way cache
comparison, runs that compiled the same thing, and a run's counterpart with one setting changed.
"""
from __future__ import annotations

from typing import Any

import pandas as pd

from tcore.experiment.comparable import compile_key, same_compile, settings

# The ways a varying shape can be compiled, run side by side on the Diagnose page.
# name -> (title, the Experiment fields that make it, what it costs)
STRATEGIES = {
    "static": ("dynamic=False", dict(dynamic=False, shape_remedy="none"),
               "Always static: every new size compiles again, until the recompile limit; past it the function "
               "runs eagerly. Costs one compile per shape, then the speedup for new shapes."),
    "automatic": ("dynamic=None (default)", dict(dynamic=None, shape_remedy="none"),
                  "Static first; on the first size change it recompiles once with that size symbolic. Costs "
                  "two compiles, and the symbolic graph may be a little slower."),
    "dynamic": ("dynamic=True", dict(dynamic=True, shape_remedy="none"),
                "Symbolic sizes from the first compile: one compile for every size. Costs some static "
                "optimisations (and, on a GPU, CUDA graphs per size)."),
    "mark_dynamic": ("mark_dynamic", dict(dynamic=False, shape_remedy="mark_dynamic"),
                     "The varying dimension is marked dynamic before the first call, everything else stays "
                     "static: one compile. Costs a line of code where the inputs are made."),
    "buckets": ("buckets", dict(dynamic=False, shape_remedy="buckets"),
                "Inputs are padded up to a few fixed sizes, each compiled during warm-up: one compile per "
                "bucket, none later. Costs the work spent on padding."),
}


def strategy_of(spec: dict) -> str | None:
    """Which of STRATEGIES a run with a shape schedule used; None for a run with one fixed shape."""
    if not spec.get("shape_count"):
        return None
    remedy = spec.get("shape_remedy", "none")
    if remedy != "none":
        return remedy
    return {False: "static", None: "automatic", True: "dynamic"}[spec.get("dynamic")]


def four_way(records: list, base: dict) -> dict[tuple[str, str], Any]:
    """(scope, "cold" | "warm") -> the newest finished run of each, from `records` (newest first).

    Cold is a run with fresh caches (or artifacts that could not be loaded); "warm" here is one that loaded compile
    artifacts (the page says "artifacts loaded"). Only runs that compile what `base` (the four-way's own experiment)
    compiles, but for the scope, count (tcore.experiment.comparable.same_compile): an aot_eager run, a shape schedule or
    another batch is another compile and would compare unlike with like.
    """
    def temperature(rec) -> str | None:
        cache, loaded = rec.spec.get("cache", "cold"), rec.result.get("cache_artifacts")
        if cache == "cold" or (cache == "artifacts" and loaded != "loaded"):
            return "cold"
        return "warm" if cache == "artifacts" else None  # the local "warm" cache is not a portable warm start

    cells: dict[tuple[str, str], Any] = {}
    for rec in records:
        if (rec.status == "finished" and rec.spec.get("compile") in ("whole", "regional")
                and rec.result.get("compile_s") is not None and same_compile(rec.spec, base, varying={"compile"})):
            key = (rec.spec["compile"], temperature(rec))
            if key[1] and key not in cells:
                cells[key] = rec
    return cells

def settings_key(rec) -> str:
    """What a run compiled, whatever its cache mode and timing (tcore.experiment.comparable.compile_key)."""
    return compile_key(rec.spec, rec.device or rec.result.get("device") or "cpu")


def same_settings(rec, records: list) -> list:
    """The finished compiled runs among `records` (newest first) that compiled what `rec` did, `rec` included."""
    key = settings_key(rec)
    return [r for r in records if r.status == "finished" and r.result.get("compile_s") is not None
            and settings_key(r) == key]


CACHE_COLUMNS = ["id", "label", "settings", "cache", "cache_artifacts", "compile_s", "fx_graph_cache_hits",
                 "fx_graph_cache_misses", "aot_autograd_cache_hits"]


def cache_frame(records: list) -> pd.DataFrame:
    """One row per run for diagnose_charts.cold_warm_chart: its settings (a key and the label) and cache figures."""
    return pd.DataFrame([{"id": r.id, "label": r.label, "settings": settings_key(r), "cache": r.spec.get("cache"),
                          **{c: r.result.get(c) for c in CACHE_COLUMNS[4:]}} for r in records], columns=CACHE_COLUMNS)


# What makes two runs of a schedule comparable, whatever strategy each used.
_SCHEDULE_FIELDS = ("model", "preset", "batch_size", "precision", "task", "compile", "backend", "shape_count",
                    "shape_order", "recompile_limit")


def strategy_runs(records: list) -> dict[str, Any]:
    """strategy -> its newest finished run, among runs (newest first) with the newest schedule run's settings."""
    done = [r for r in records if r.status == "finished" and strategy_of(r.spec)]
    out: dict[str, Any] = {}
    for rec in done:
        if all(rec.spec.get(k) == done[0].spec.get(k) for k in _SCHEDULE_FIELDS):
            out.setdefault(strategy_of(rec.spec), rec)
    return {name: out[name] for name in STRATEGIES if name in out}


def counterpart(rec, records: list, **changes):
    """The newest finished run among `records` whose settings (cache included) are `rec`'s with `changes`."""
    want = settings({**rec.spec, **changes})
    return next((r for r in records if r.status == "finished" and r.id != rec.id and settings(r.spec) == want), None)


def without_the_break(rec, records: list) -> list:
    """The finished runs among `records` (newest first) that compiled what `rec` did but for its graph break, on the
    device kind `rec` ran on: the only runs its break's cost may be read against."""
    def ran_on(r) -> str | None:
        return r.device or r.result.get("device")

    return [r for r in records if r.status == "finished" and not r.spec.get("graph_break") and ran_on(r) == ran_on(rec)
            and same_compile(r.spec, rec.spec, varying={"graph_break"})]


def stored_twin(spec: dict, records: list, device: str):
    """The newest finished run among `records` (newest first) of `spec`'s setting (what it compiles, whatever its
    cache and timing) that ran on `device` kind here, or None: a section reuses it rather than measure it again."""
    return next((r for r in records if r.status == "finished" and r.result.get("speedup") is not None
                 and (r.device or r.result.get("device")) == device and same_compile(r.spec, spec)), None)
