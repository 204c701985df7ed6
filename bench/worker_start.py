"""How long a CPU run's worker takes to start, forked from the fork server or started afresh.

    python bench/worker_start.py                    # 6 tiny eager runs in one lab process, each way
    python bench/worker_start.py --runs 10 --json bench/results/worker-start-cpu.json
    python bench/worker_start.py --runs 4 --backend inductor   # and each way's cold compile time

For each way (the fork server on, then $COMPILE_LAB_FORK_SERVER=0), a fresh lab process (a child
Python, so neither inherits the other's server) queues --runs tiny CPU runs one after another on its
own store, each with the `eager` backend (no compile: the worker's start is a large part of the run),
and reports per run: the seconds from queueing to the run's record (wall), the worker's own "imports
done in X s" line from its log (0.0 s for a forked worker), and the CPU seconds the whole machine was
busy meanwhile (from /proc/stat: run it on an otherwise quiet machine). The first run of the fork-server
way includes the server's imports.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, os, re, sys, tempfile, time
from pathlib import Path
from tcore.experiment.spec import Experiment
from tcore.lab.run import runs
from tcore.store import RunStore

store = RunStore(Path(tempfile.mkdtemp()) / "runs.sqlite")
exp = Experiment(model="captioner", preset="tiny", batch_size=2, device="cpu", backend=sys.argv[2], warmup_steps=1,
                 timed_steps=2, rounds=1, cache="cold")
def machine_cpu():  # the whole machine's busy CPU time: forked workers are the server's children, not ours
    fields = [int(v) for v in open("/proc/stat").readline().split()[1:8]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")
rows = []
for i in range(int(sys.argv[1])):
    t0, c0 = time.perf_counter(), machine_cpu()
    live = runs.start(exp, store)
    while live.handle is None and not live.done:
        time.sleep(0.01)
    log_path = live.handle.log_path if live.handle else None
    first = ""
    while log_path and not first and not live.done:
        first = log_path.read_text().split("\n", 1)[0] if log_path.exists() else ""
        time.sleep(0.01)
    record = live.wait(600)
    imports = re.search(r"imports done in ([0-9.]+) s", first)
    rows.append({"run": i + 1, "status": record.status, "wall_s": round(time.perf_counter() - t0, 2),
                 "worker_imports_s": float(imports[1]) if imports else None,
                 "forked": bool(live.handle and live.handle.worker.forked),
                 "compile_s": record.result.get("compile_s")})
    time.sleep(0.5)  # the ended worker's exit reaches the lab, so its CPU is counted
    rows[-1]["machine_cpu_s"] = round(machine_cpu() - c0, 2)
print(json.dumps(rows))
"""


def one_way(runs: int, fork_server: bool, backend: str) -> list[dict]:
    env = dict(os.environ, PYTHONPATH=str(REPO), COMPILE_LAB_SPARE_WORKERS="0")
    if not fork_server:
        env["COMPILE_LAB_FORK_SERVER"] = "0"
    done = subprocess.run([sys.executable, "-c", CHILD, str(runs), backend], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=1800)
    if done.returncode != 0:
        sys.exit(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--backend", default="eager", help="inductor: also compare the cold compile time each way")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    out = {"backend": args.backend, "machine": os.uname().nodename, "cpus": os.cpu_count(),
           "load_at_start": os.getloadavg()[0], "ways": {}}
    for name, fork_server in (("fork server", True), ("afresh", False)):
        rows = one_way(args.runs, fork_server, args.backend)
        out["ways"][name] = rows
        later = rows[1:]
        words = [f"first run {rows[0]['wall_s']:.2f} s (machine {rows[0]['machine_cpu_s']:.1f} CPU-s)",
                 f"later runs median {statistics.median(r['wall_s'] for r in later):.2f} s",
                 f"worker imports {statistics.median(r['worker_imports_s'] for r in later):.1f} s",
                 f"machine {statistics.median(r['machine_cpu_s'] for r in later):.1f} CPU-s per run",
                 f"forked {sum(r['forked'] for r in rows)}/{len(rows)}"]
        if args.backend != "eager":  # each run's compile is a cold one: the figure must not depend on the way
            compiles = [r["compile_s"] for r in rows]
            words.append(f"cold compile median {statistics.median(compiles):.2f} s "
                         f"({', '.join(f'{c:.2f}' for c in compiles)})")
        words.append("all finished" if all(r["status"] == "finished" for r in rows) else "NOT all finished")
        print(f"{name}: " + "; ".join(words))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
