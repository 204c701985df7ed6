"""The app's server over a workshop day: many runs one after another in one process, and what it holds after them."""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from bench.load.sessions import QUICK


def rss_mib() -> float:
    """This process's resident memory now (MiB), from /proc."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


def server_memory(run_count: int, device: str = "cpu", every: int = 25) -> int:
    """`run_count` runs one after another in this process, as the app's server runs its pages' runs (runs.serve,
    then runs.start per run); every `every` runs, the process's resident memory and what its run registry holds.
    What a workshop day costs the server: its registry must stop growing (tcore.lab.run.registry). On "cuda" the runs
    compile with Inductor and sample power, so each ended run would hold its generated code and power samples
    were they not let go."""
    from tcore.experiment.spec import Experiment
    from tcore.lab.run import registry, runs
    from tcore.store import RunStore

    tmp = Path(tempfile.mkdtemp(prefix="compile-lab-memory-"))
    store = RunStore(tmp / "runs.sqlite")
    runs.serve(store)
    exp = Experiment(**QUICK) if device == "cpu" else Experiment(**{**QUICK, "device": "cuda", "backend": "inductor"})
    t0 = time.time()
    print(f"{run_count} runs of {exp.label} in one process (store {store.path})")
    print(f"{'runs':>5} {'rss_mib':>8} {'held_runs':>9} {'held_power_samples':>18} {'held_code_chars':>15} {'s':>6}")
    for i in range(1, run_count + 1):
        record = runs.start(exp, store).wait()
        if record is None or record.status != "finished":
            print(f"run {i} did not finish: {record and record.error}", file=sys.stderr)
            return 1
        if i % every == 0 or i in (1, run_count):
            held = [r for r in (registry.live(run_id) for run_id in list(registry._LIVE)) if r is not None]
            print(f"{i:5d} {rss_mib():8.1f} {registry.count():9d} {sum(len(r.power_samples) for r in held):18d} "
                  f"{sum(len(c) for r in held for c in r.code):15d} {time.time() - t0:6.0f}", flush=True)
    return 0
