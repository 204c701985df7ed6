"""The load test's report: what the store says happened to every run (overlaps, lost, duplicated, stuck, touched by
someone else), what became of the runs each fault hit, the wait estimates against the waits, and page latency."""
from __future__ import annotations

import re
import statistics
import time
from collections import Counter

from bench.load.faults import Faults
from bench.load.sessions import CANCELS, DELETES_OTHERS, owner_of


def overlaps(records) -> int:
    """Pairs of runs whose [started_at, finished_at] intersect on the same device slot."""
    count = 0
    by_slot: dict[str, list] = {}
    for r in records:
        if r.started_at is not None:
            by_slot.setdefault(r.device_slot, []).append((r.started_at, r.finished_at or time.time()))
    for spans in by_slot.values():
        spans.sort()
        count += sum(1 for (_, end), (start, _) in zip(spans, spans[1:]) if start < end)
    return count


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def ended_by(rows: dict[str, dict], ids: list[str], names: dict[int, str]) -> str:
    """How the runs `ids` ended, and which process owned them at their end."""
    counts = Counter((rows[i]["status"], names.get(rows[i]["owner_pid"], f"pid {rows[i]['owner_pid']}"))
                     for i in ids if i in rows)
    return ", ".join(f"{n} {status} under {who}" for (status, who), n in sorted(counts.items())) or "none"


def report(args, *, out: list[dict], records: list, final: dict[str, dict], stuck: list[str], faults: Faults,
           latencies: list[float], page_failures: list[str], t0: float, db: str, tmp) -> int:
    """Print what happened, from the store (`records`, and `final`: its rows once every process but the app ended)
    and from what the sessions said (`out`); 1 if any run overlapped, was lost, duplicated, stuck, or touched by
    someone other than its owner, or a stopped command line's exit code disagreed with its run."""
    names = faults.names
    out = list(out)
    etas = {o["run_id"]: o["eta_seen"] for o in out if "eta_seen" in o}
    seen = {o["run_id"]: o["seen_at"] for o in out if o.get("seen_at") is not None}
    out = [o for o in out if "eta_seen" not in o]
    submitted = [o["run_id"] for o in out if "run_id" in o]
    refused = [o for o in out if "refused" in o]
    stored = Counter(r.id for r in records)
    cli_runs = {r.id for r in records if r.owner and re.fullmatch(r"[^:]+:\d+", r.owner)}  # Proc.name, host:pid
    lost = [i for i in submitted if i not in stored]
    duplicated = sum(n - 1 for n in Counter(submitted).values()) + sum(
        1 for i in stored if i not in set(submitted) and i not in cli_runs)
    overlapping = overlaps(records)
    failed = Counter(r.error_kind for r in records if r.status == "failed")
    positions = [o["position"] for o in out if o.get("position")]
    touched = [o["touched_others"] for o in out if "touched_others" in o]
    refused_others = sum(1 for o in out if "refused_others" in o)
    cancelled_not_by_owner = [r for r in records if r.error_kind == "cancelled" and r.owner != owner_of(CANCELS)]

    print(f"sessions: {args.sessions} in {args.processes} processes, {args.runs_per_session} run(s) each, "
          f"plus {len(cli_runs)} command-line run(s)")
    print(f"runs submitted: {len(submitted) + len(cli_runs)}   refused before queueing: {len(refused)}")
    print(f"  finished: {sum(r.status == 'finished' for r in records)}")
    print(f"  failed: {sum(failed.values())}" + (f" ({', '.join(f'{k}: {n}' for k, n in sorted(failed.items()))})"
                                                 if failed else ""))
    print(f"  overlapping on the same device slot: {overlapping}")
    print(f"  lost: {len(lost)}")
    print(f"  duplicated: {duplicated}")
    print(f"  stuck (queued or running {args.settle_s:.0f} s after every process but the app ended): {len(stuck)}")
    print(f"queue position on submission: max {max(positions, default=0)}; "
          f"runs that showed an ETA while waiting: {sum(e is not None for e in etas.values())} of {len(submitted)}")
    # The first estimate a waiting run showed against the wait that followed it (until its run was claimed).
    started = {r.id: r.started_at for r in records if r.started_at is not None}
    pairs = sorted((etas[i], started[i] - seen[i]) for i in seen if i in started and etas[i] is not None)
    if pairs:
        ratios = [actual / max(estimate, 1.0) for estimate, actual in pairs]
        print(f"estimated against actual wait, {len(pairs)} runs: actual/estimate median "
              f"{statistics.median(ratios):.2f}, range {min(ratios):.2f}-{max(ratios):.2f}; within a factor of 1.5: "
              f"{sum(1 / 1.5 <= r <= 1.5 for r in ratios)} of {len(ratios)}; (estimate s, actual s): "
              + ", ".join(f"({e:.0f}, {a:.0f})" for e, a in pairs))
    for line in faults.faults:
        print(line)
    for what, at in faults.report_later:
        running, queued = at.get("running", []), at.get("queued", [])
        print(f"{what}: {len(running)} of its runs running, {len(queued)} waiting")
        if running:
            print(f"  the running ones: {ended_by(final, running, names)}"
                  + "".join(f"; {final[i]['error_kind']}" for i in running[:1] if final[i]['error_kind']))
        if queued:
            print(f"  the waiting ones: {ended_by(final, queued, names)}")
        if "stopped command line" in what:
            print("\n".join(faults.cli_results))
    print(f"runs cancelled or deleted by someone other than their owner: {len(touched) + len(cancelled_not_by_owner)} "
          f"({refused_others} attempts by {owner_of(DELETES_OTHERS)} refused)")
    for r in refused:
        print(f"refusal seen by {r['owner']}: {r['refused'][:160]}")
    if latencies:
        print(f"page latency (GET / and /_stcore/health, {len(latencies)} requests, {len(page_failures)} failed, "
              f"the app's restart included): p50 {pct(latencies, 50):.1f} ms, p95 {pct(latencies, 95):.1f} ms, "
              f"max {max(latencies):.1f} ms")
    print(f"total wall time: {time.time() - t0:.1f} s   store: {db}   app log: {tmp / 'app.log'}")
    return 1 if (overlapping or lost or duplicated or stuck or touched or cancelled_not_by_owner
                 or faults.disagreements) else 0

