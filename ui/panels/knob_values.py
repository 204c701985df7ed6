"""The lab's side of the Run and Sweep pages' knobs, apart from the widgets that hold them and the Experiment they build
(ui.panels.knobs): this lab's limits as the boxes apply them (refused_by_lab), the note before a run far past the
model's practical batch (its memory and how long its steps take: cost_note), and the artifacts a warm run would load.
No Streamlit here.
"""
from __future__ import annotations

import math

from tcore.experiment.device import practical_defaults
from tcore.experiment.spec import Experiment, SpecError
from tcore.figures.paired import MIN_ROUNDS
from tcore.lab import api
from tcore.store import RunStore


def _lab_limits() -> api.Limits | None:
    """This lab's limits (tcore.lab.policy.limits, with the instructor's changes), or None where the settings cannot be
    read (the Run button then says why)."""
    try:
        return api.lab_limits(RunStore())
    except api.LimitsError:
        return None


def lab_limit(name: str) -> int | None:
    """A limit of this lab, or None where there is none or the settings cannot be read."""
    found = _lab_limits()
    value = None if found is None else getattr(found, name)
    return None if value is None else int(value)


def longest_run_min() -> int:
    """The longest time limit a run may ask for here, in whole minutes (at least 1)."""
    return max(int((lab_limit("max_run_s") or 36000 * 60) // 60), 1)


def artifacts_source(exp: Experiment, store, device: str | None = None) -> dict | None:
    """The stored artifacts a cache=artifacts run of `exp` would load ({run_id, torch, ...}), or None; `device`: the
    device check's answer where the caller has it.

    Whether their torch and device match this machine is checked by the run itself.
    """
    device = device or api.preflight(exp)[0]
    return api.artifacts_for(exp, device, store)


# The number boxes whose emptied value (None) is refused; timed_steps is None in seconds mode, 0 when emptied.
BOXES = ("batch_size", "timed_s", "rounds", "round_s", "target_pct", "warmup_steps", "max_fusion_size")


def refused_by_lab(values: dict, **given) -> None:
    """SpecError, saying what to change, for a box left empty, a batch past this lab's limit or a time limit
    (given as timeout_min, in minutes) past its longest run; the spec checks every other bound."""
    timeout_min = given.get("timeout_min")
    empty = [name for name in BOXES if name in values and values[name] is None]
    if empty:
        raise SpecError(f"{', '.join(empty)} {'is' if len(empty) == 1 else 'are'} empty: type a number")
    found = _lab_limits()
    if found is None:
        return
    batch = values.get("batch_size")
    if found.max_batch_size is not None and isinstance(batch, int) and batch > found.max_batch_size:
        raise SpecError(f"batch_size {batch:,} is over this lab's limit ({found.describe('max_batch_size')}); choose "
                        f"a batch size of at most {found.max_batch_size:,}")
    longest = longest_run_min()
    if "timeout_min" in given and (timeout_min is None or not 1 <= timeout_min <= longest):
        typed = "an empty box" if timeout_min is None else f"{timeout_min:g} min"
        raise SpecError(f"the time limit must be from 1 to {longest} min (this lab's longest run: "
                        f"{found.describe('max_run_s')} s), not {typed}")


# A batch this many times the model's practical one on the device is far enough past it to warn before it runs.
FAR_PAST_DEFAULT = 8


def cost_note(exp: Experiment, device: str) -> str | None:
    """Before a run far past the model's practical batch on `device` (where it runs: preflight's answer): its memory
    estimate against the memory there is, and how long its steps should take, scaled from the eager speed of this
    machine's earlier runs of the model. None for a run near the practical batch (a generate run counts sequences,
    and has its own defaults)."""
    usual = practical_defaults(exp.model, device, exp.task)["batch_size"]
    if exp.task == "generate" or exp.batch_size < FAR_PAST_DEFAULT * usual:
        return None
    where = "the GPU" if device == "cuda" else "the CPU"
    what = "weights, gradients, AdamW state and activations" if exp.task == "training" else "weights and activations"
    try:
        need_gib = api.estimate_memory_gib(exp)
        have_gib, have_words = api.device_memory_gib(device)
        memory = (f"It needs an estimated {need_gib:.3g} GiB ({what})"
                  + (f", of the {have_gib:.3g} GiB {have_words}." if have_gib else "."))
    except api.NoEstimate as e:
        memory = f"Its memory cannot be estimated ({e}): only the run's own out-of-memory guard applies."
    earlier = [(r.spec["batch_size"], r.result["eager_samples_per_s"], r.id) for r in RunStore().list(limit=200)
               if r.status == "finished" and r.result.get("eager_samples_per_s") and (r.device or device) == device
               and all(r.spec.get(k) == getattr(exp, k) for k in ("model", "preset", "task", "precision"))]
    timing = step_time_words(exp, earlier)
    return (f"**Batch {exp.batch_size:,} is {exp.batch_size / usual:.0f}× this model's practical batch on {where} "
            f"({usual}).** {memory} {timing}")


def step_time_words(exp: Experiment, earlier: list[tuple[int, float, str]]) -> str:
    """How long a step of `exp` should take, from earlier runs of the same model, preset, task and precision here
    (batch, eager samples/s, run id): the run at the nearest batch, its time per sample times this batch (a rough
    figure: a larger batch is often a little faster per sample). Then the least this run steps: each variant's first
    call, its warm-up steps and the fewest rounds (a compile on top)."""
    if not earlier:
        return ("No earlier run of this model, preset, task and precision on this machine says how long its steps "
                "take: expect each to take about as many times a practical batch's step.")
    batch, samples_per_s, run_id = min(earlier, key=lambda e: abs(math.log(e[0] / exp.batch_size)))
    step_s = exp.batch_size / samples_per_s
    variants = 2 if exp.has_compiled_variant else 1
    steps = variants * (1 + exp.warmup_steps + max(exp.rounds, MIN_ROUNDS))
    return (f"A step should take about {_seconds(step_s)} (run {run_id[-6:]} ran {samples_per_s:,.0f} "
            f"samples/s eager at batch {batch}), so its first calls, warm-ups and fewest rounds alone, {steps} steps, "
            f"take about {_seconds(steps * step_s)}"
            + (", and the compile comes on top." if exp.has_compiled_variant else "."))


def _seconds(s: float) -> str:
    """'0.31 s', '4.2 s', '2 min 05 s'."""
    return f"{s:.2g} s" if s < 10 else api.duration_words(s)
