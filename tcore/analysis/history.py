"""Earlier runs of the same setting on the same machine: which runs count, and what their headlines say together.

A rerun that disagrees with the runs before it should be seen at once, beside the headline; and the spread of those
headlines is what tcore.figures.rerun learns the spread between processes from. Pure, tested on the CPU; which runs
are of the same setting on the same machine is tcore.experiment.comparable's, which the store's query applies.
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from tcore.experiment.comparable import PROVENANCE_FIELDS, machine, same_setting, settings
from tcore.figures import rerun
from tcore.figures.rerun import setting_kind, within_sigma


@dataclass(frozen=True)
class Point:
    """One earlier run's headline, as a dot."""

    run_id: str
    created_at: float
    speedup: float
    low: float | None
    high: float | None
    within: float = 0.0  # the run's own σ in log space (tcore.figures.rerun.within_sigma)
    cache: str | None = None  # the cache its compile started from (cold, warm, artifacts)


@dataclass(frozen=True)
class History:
    """The runs of one setting on one machine, oldest first, and their spread. `reset_at`: when the instructor last
    reset this machine's spread (tcore.lab.calibrate.reset): runs created before it stay listed but teach nothing."""

    points: list[Point]
    reset_at: float | None = None

    @property
    def speedups(self) -> list[float]:
        return [p.speedup for p in self.points]

    @property
    def withins(self) -> list[float]:
        return [p.within for p in self.points]

    @property
    def median(self) -> float | None:
        return statistics.median(self.speedups) if self.points else None

    @property
    def before_reset(self) -> list[Point]:
        """The runs created before the instructor's last reset of the machine's spread."""
        return [p for p in self.points if self.reset_at is not None and p.created_at < self.reset_at]

    def teaching(self) -> History:
        """The runs a spread between processes is learned from: those with an interval of their own, created since the
        instructor's last reset of the machine's spread (a reset says the earlier runs no longer describe it)."""
        gone = {p.run_id for p in self.before_reset}
        return History([p for p in self.points if rerun.teaches(p.low, _pct(p.within)) and p.run_id not in gone],
                       self.reset_at)

    @property
    def spread_pct(self) -> float | None:
        """The standard deviation of the log-speedups, in %; None under 2 runs."""
        if len(self.points) < 2:
            return None
        return 100 * (math.exp(statistics.stdev(math.log(s) for s in self.speedups)) - 1)

    def words(self, current: float | None = None, cache: str | None = None) -> str:
        """'4 earlier runs of this setting on this machine: 1.51–1.53x, median 1.52x (σ 0.4%); this run 1.52x.', and
        which of them teach its spread (teaching_words; `cache`: this run's)."""
        n = len(self.points)
        if n == 0:
            return "No earlier run of this setting on this machine: rerun it to see how far the figure moves."
        runs = f"{n} earlier run{'s' if n != 1 else ''} of this setting on this machine"
        said = (f"{runs}: {min(self.speedups):.2f}–{max(self.speedups):.2f}x, median {self.median:.2f}x" if n > 1
                else f"{runs}: {self.speedups[0]:.2f}x")
        if self.spread_pct is not None:
            said += f" (σ {self.spread_pct:.1f}%)"
        if _ratio(current) is not None and self.median:
            said += f"; this run {current:.2f}x, {100 * (current / self.median - 1):+.1f}% from their median"
        return said + "." + self.teaching_words(cache)

    def teaching_words(self, cache: str | None = None) -> str:
        """Which of the runs teach the setting's spread between processes, and why the others do not; and, where they
        compiled from other caches than `cache` (this run's), why they count alike. '' where every run teaches."""
        n, taught, before = len(self.points), len(self.teaching().points), len(self.before_reset)
        said = ""
        if before:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.reset_at))
            said += (f" {before} of them ran before the instructor's reset of this machine's spread ({when}, the "
                     f"server's clock): {'it is' if before == 1 else 'they are'} listed, but teach the interval "
                     "nothing.")
        if taught != n:
            noisy = sum(1 for p in self.points if p.low is not None and not rerun.teaches(p.low, _pct(p.within)))
            why = (f"; {noisy} of them had rounds spreading wider than ± {rerun.MAX_TEACHING_WITHIN_PCT:.0f}% of "
                   f"their own, too wide to see a spread between processes" if noisy else "")
            said += (f" The interval's spread between processes learns from {taught} of the {n} (runs since the "
                     f"reset with an interval of their own{why})." if before else
                     f" The interval's spread between processes learns from {taught} of the {n} (those with an "
                     f"interval of their own; one or two rounds' ratio can land anywhere{why}).")
        others = sorted({p.cache for p in self.points if p.cache and cache and p.cache != cache})
        if others:
            said += (f" Runs that compiled from another cache ({', '.join(others)}) count alike: the cache changes "
                     "how long the compile takes, not the compiled code or its speedup.")
        return said


def _pct(within: float) -> float:
    """A Point's own σ (log space) back in %, as its result stated it (speedup_within_pct)."""
    return 100 * math.expm1(within)


def _ratio(value: Any) -> float | None:
    """`value` where it can be a ratio of two rates (finite, above 0), else None: a store written by hand or by a broken
    version can hold NaN, an infinity or -1e308, and one such run broke the Compare page for the whole room (the log of
    its speedup) and `tcore show` (a dot at NaN)."""
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) and value > 0 else None


def history(records: Sequence[Any], reset_at: float | None = None) -> History:
    """The finished runs with a speedup among `records` (RunRecords), oldest first; `reset_at`: when the instructor
    last reset the machine's spread (None: never). A figure that cannot be a speedup leaves its run out, and an
    interval end or σ that cannot be one is read as not stated."""
    points = []
    for r in records:
        result = r.result or {}
        if r.status != "finished" or (speedup := _ratio(result.get("speedup"))) is None:
            continue
        within = result.get("speedup_within_pct")
        points.append(Point(r.id, r.created_at, speedup, _ratio(result.get("speedup_low")),
                            _ratio(result.get("speedup_high")),
                            within_sigma(within if _ratio(within) is not None else None), (r.spec or {}).get("cache")))
    return History(sorted(points, key=lambda p: p.created_at), reset_at)


def dots(h: History, current: float | None = None, width: int = 40) -> str:
    """The speedups as dots on one text line, for the CLI: '1.45x |  ·  ··•· ·| 1.62x' (• this run, where its speedup
    can be one)."""
    current = _ratio(current)
    values = h.speedups + ([current] if current is not None else [])
    if not values:
        return ""
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0
    line = [" "] * width
    for s in h.speedups:
        line[round((s - lo) / span * (width - 1))] = "·"
    if current is not None:
        line[round((current - lo) / span * (width - 1))] = "•"
    return f"{lo:.2f}x |{''.join(line)}| {hi:.2f}x"


@dataclass(frozen=True)
class Spread:
    """How far one kind of run's headline moves between fresh processes on one machine, learned from every setting it
    has run more than once: the variance of their log-speedups about each setting's own mean (the scatter), less
    what each run's own rounds and drift explain (within), each pooled over the settings (tcore.figures.rerun.
    between_of takes the within out of the scatter's upper bound)."""

    sigma_log: float  # the pooled standard deviation between processes, in log space: scatter less within
    dof: int          # its degrees of freedom: the runs less one per setting
    runs: int
    settings: int
    scatter_log: float | None = None  # the headlines' pooled scatter about their settings' means (None: sigma_log)
    within_log: float = 0.0           # the root mean square of the runs' own σ (rerun.within_sigma), pooled alike
    oldest_at: float | None = None    # when the oldest and the newest run it rests on were created (epoch s)
    newest_at: float | None = None

    @property
    def scatter(self) -> float:
        return self.sigma_log if self.scatter_log is None else self.scatter_log

    @property
    def sigma_pct(self) -> float:
        return 100 * (math.exp(self.sigma_log) - 1)


def machine_spread(rows: Sequence[tuple[Mapping[str, Any], Mapping[str, Any], float, str | None]],
                   env: Mapping[str, Any], device: str | None, kind: str,
                   exclude: Mapping[str, Any] | None = None) -> Spread | None:
    """The spread between processes of runs of `kind` on this machine, from `rows` (store.headlines: spec, env,
    speedup, kind and, where stored, the run's own spread in %), or None where no setting of that kind ran twice here.
    A setting is of the kind most of its runs were stated as (tcore.figures.rerun.setting_kind).
    `exclude`: a setting left out (the run's own, whose history is pooled on its own terms)."""
    here = machine(env, device)
    groups: dict[str, list[tuple[float, float, float | None, str | None]]] = {}
    for spec, their_env, speedup, their_kind, *more in rows:
        if not speedup or speedup <= 0 or machine(their_env, device) != here:
            continue
        if exclude is not None and same_setting(spec, exclude):
            continue
        key = repr(sorted(settings(dict(spec), ignoring=PROVENANCE_FIELDS).items()))
        own, created = (more + [None, None])[:2]
        if not rerun.teaches(0.0, own):  # its own rounds too wide to see a spread between processes
            continue
        groups.setdefault(key, []).append((math.log(speedup), within_sigma(own), created, their_kind))
    # a setting counts for the kind most of its runs were stated as (setting_kind), all its runs with it: a setting
    # whose runs were split between kinds by one process's reading would otherwise teach each kind half its scatter
    groups = {key: [(x, w, t) for x, w, t, _ in found] for key, found in groups.items()
              if (kinds := [k for *_, k in found if k]) and setting_kind(
                  device, [k == "cuda-host-bound" for k in kinds]) == kind}
    squares = owns = dof = runs = counted = 0
    times: list[float] = []
    for found in groups.values():
        if len(found) < 2:
            continue
        pairs = [(x, w) for x, w, _ in found]
        times += [t for *_, t in found if t is not None]
        logs = [x for x, _ in pairs]
        squares += (len(pairs) - 1) * statistics.variance(logs)
        owns += (len(pairs) - 1) * statistics.fmean(w * w for _, w in pairs)
        dof += len(pairs) - 1
        runs += len(pairs)
        counted += 1
    if dof == 0:
        return None
    scatter, within = math.sqrt(squares / dof), math.sqrt(owns / dof)
    return Spread(math.sqrt(max(0.0, scatter ** 2 - within ** 2)), dof, runs, counted, scatter, within,
                  min(times, default=None), max(times, default=None))
