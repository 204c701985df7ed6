"""Before a run: whether its setting can be expected to give the same headline again on this machine, from the
store's earlier runs of it here (their spread; a host-bound verdict on one of them, or on one at a larger batch) and
the device (tcore.figures.rerun.outlook), for the Run page and the command line."""
from __future__ import annotations

import socket

from tcore import figures
from tcore.analysis import history
from tcore.experiment.spec import Experiment
from tcore.figures import rerun
from tcore.host import machine
from tcore.lab.run.runs import preflight
from tcore.store import RunStore


def machine_env(device: str) -> dict:
    """What tcore.analysis.history.machine compares runs' machines by, for this machine."""
    gpus, _ = machine.gpus() if device == "cuda" else ([], None)
    return {"hostname": socket.gethostname(), "cpu": machine.cpu_model(), "gpu": gpus[0]["name"] if gpus else None}


Earlier = tuple[str, history.History, int]  # earlier()'s answer: device, the runs' history, how many host-bound


def earlier(exp: Experiment, store: RunStore, device: str | None = None) -> Earlier:
    """(device, the finished runs of `exp`'s setting on this machine, how many of those that teach its spread were
    host-bound); `device`: the device check's answer where the caller has it (the Run page's), else checked here.
    The runs are those of any cache: the cache changes the compile time, not the compiled code or its speedup."""
    device = device or preflight(exp)[0]
    records = [r for r in store.same_setting(exp.to_dict(), device, machine_env(device)) if r.result.get("speedup")]
    past = history.history(records, store.lab.spread_reset_at())
    teaching = {p.run_id for p in past.teaching().points}
    bound = sum(figures.follows_host(r.result, r.device) for r in records if r.id in teaching)
    return device, past, bound


def earlier_compile_s(exp: Experiment, store: RunStore, device: str) -> tuple[float, bool] | None:
    """(compile_s, at the same batch) of the newest finished run of `exp`'s setting on this machine that compiled
    from the same kind of cache (cold, warm, artifacts: a warm compile takes a fraction of a cold one); one at
    another batch where none ran at this one; None for a setting never compiled here. What the live compile's
    estimate of the time left is made from."""
    env = machine_env(device)
    for ignoring in (frozenset(), frozenset({"batch_size"})):
        found = [r for r in store.same_setting(exp.to_dict(), device, env, ignoring=ignoring)
                 if r.spec.get("cache") == exp.cache and (r.result or {}).get("compile_s")]
        if found:
            return found[-1].result["compile_s"], not ignoring
    return None


def bound_at_larger_batch(exp: Experiment, store: RunStore, device: str) -> int | None:
    """The smallest batch above `exp`'s at which an earlier run of its setting here was host-bound, on a GPU."""
    if device != "cuda":
        return None  # on the CPU the host is the device: nothing is host-bound
    others = store.same_setting(exp.to_dict(), device, machine_env(device), ignoring=frozenset({"batch_size"}))
    batches = [r.spec["batch_size"] for r in others if r.spec.get("batch_size", 0) > exp.batch_size
               and r.result.get("speedup") and figures.follows_host(r.result, r.device)]
    return min(batches) if batches else None


def outlook(exp: Experiment, store: RunStore, found: Earlier | None = None,
            device: str | None = None) -> rerun.Outlook | None:
    """What the lab expects of reruns of `exp` here; None when nothing compiled gives a speedup to rerun. found: what
    earlier() answered already (the command line prints it too), so the store is not asked twice."""
    if not exp.has_compiled_variant:
        return None
    device, past, bound = found or earlier(exp, store, device)
    # the spread is learned from runs with an interval of their own, created since the instructor's last reset
    taught = past.teaching()
    if bound and 2 * bound < len(taught.points):  # the setting's kind is its history's majority (rerun.setting_kind)
        bound = 0
    larger = bound_at_larger_batch(exp, store, device) if not bound else None
    env = machine_env(device)
    spread = history.machine_spread(store.headlines(device), env, device,
                                    rerun.kind(device, bool(bound or larger)), exclude=exp.to_dict())
    return rerun.outlook(taught.speedups, device, bound, (larger, exp.batch_size) if larger else None, spread,
                          taught.withins, gpu=env.get("gpu"),
                          untaught=len(past.points) - len(past.before_reset) - len(taught.points))


def words(exp: Experiment, store: RunStore, found: Earlier | None = None,
          device: str | None = None) -> str | None:
    """The note said before a run of `exp` whose headline may move by more than ± HOLD_PCT between reruns."""
    ahead = outlook(exp, store, found, device)
    return ahead.words() if ahead is not None else None
