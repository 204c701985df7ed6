"""What differs between a worker started by a local run and one started by a Ray task: prints every difference.

    python bench/ray_env_diff.py                      # on the GPU machine: ResNet-50 eager, where eager through \
Ray read slower
    python bench/ray_env_diff.py --device cpu --model captioner --batch-size 2 --timed-steps 200   # a CPU machine

In one process (as bench/ray_vs_local.py does): one run through local worker processes, then the same run through a
local Ray cluster, backend eager (no compile to wait for). While each one measures, the worker process and the
process that started it (this one locally; the Ray task's worker process through Ray) are read from /proc: the
environment, niceness, scheduling policy, CPU affinity, cgroup, rlimits, OOM score, threads, what its stdin,
stdout and stderr are, and, over a few seconds of the measuring phase, the CPU each used and how often the worker
was preempted (involuntary context switches). Then torch's threads and eager samples/s from each run's record.

Every fact that differs is printed; per-run paths (cache folders, TORCH_TRACE) are set apart as expected.
Writes nothing. Exit code 0 when the only differences are the expected ones.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
WINDOW_S = 3.0  # of the measuring phase, for CPU use and preemptions
# Differences that are the point of each run being its own (fresh caches, its own folder) or Ray's bookkeeping
# that nothing in torch reads.
EXPECTED_ENV = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "TORCH_TRACE", "COMPILE_LAB_SAVE_", "COMPILE_LAB_LOAD_",
                "COMPILE_LAB_RAY_ADDRESS", "RAY_", "PYTHONPATH")
# Differ, and cost no speed: Ray makes its workers (and so their children) the OOM killer's first pick.
HARMLESS = {"oom_score_adj": "Ray's workers are the OOM killer's first pick; no effect on speed"}
READS_TORCH = ("OMP_", "MKL_", "KMP_", "GOMP_", "CUDA_", "NCCL_", "TORCH", "PYTORCH_", "NVIDIA_", "LD_", "CUBLAS",
               "CUDNN", "TRITON", "MALLOC", "PYTHON")


def _stat(pid: int) -> list[str]:
    return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()  # fields from the state (field 3) on


def _status(pid: int) -> dict[str, str]:
    return dict(line.split(":", 1) for line in open(f"/proc/{pid}/status").read().splitlines() if ":" in line)


def _cpu_s(pid: int) -> float:
    fields = _stat(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def process_facts(pid: int) -> dict[str, object]:
    """What the kernel says about one process, from outside it."""
    environ = dict(kv.split("=", 1) for kv in open(f"/proc/{pid}/environ", "rb").read().decode(errors="replace")
                   .split("\0") if "=" in kv)
    fds = {}
    for fd in (0, 1, 2):
        try:
            fds[fd] = os.readlink(f"/proc/{pid}/fd/{fd}").split(":")[0].split("/")[-1]  # pipe, null, a file's name
        except OSError as e:
            fds[fd] = f"unreadable ({e.strerror})"
    maps = open(f"/proc/{pid}/maps").read()
    return {
        "environ": environ,
        "niceness": int(_stat(pid)[16]),
        "niceness_of_each_thread": sorted({int(_stat_task(pid, t)[16]) for t in os.listdir(f"/proc/{pid}/task")}),
        "scheduling_policy": os.sched_getscheduler(pid),
        "cpu_affinity": sorted(os.sched_getaffinity(pid)),
        "cgroup": open(f"/proc/{pid}/cgroup").read().strip(),
        "rlimits": open(f"/proc/{pid}/limits").read().strip(),
        "oom_score_adj": open(f"/proc/{pid}/oom_score_adj").read().strip(),
        "threads": len(os.listdir(f"/proc/{pid}/task")),
        "stdin_stdout_stderr": fds,
        "imports_torch": "libtorch" in maps,
        "rss_mib": int(_status(pid)["VmRSS"].split()[0]) // 1024,
        "program": open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode()[:120],
    }


def _stat_task(pid: int, tid: str) -> list[str]:
    try:
        return open(f"/proc/{pid}/task/{tid}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        return ["0"] * 17  # the thread ended meanwhile


def over_window(worker: int, parent: int) -> dict[str, float]:
    """CPU each used and the worker's preemptions over WINDOW_S of its measuring phase."""
    def read():
        return (_cpu_s(worker), _cpu_s(parent),
                sum(int(_status_task(worker, t).get("nonvoluntary_ctxt_switches", 0))
                    for t in os.listdir(f"/proc/{worker}/task")))
    w0, p0, n0 = read()
    time.sleep(WINDOW_S)
    w1, p1, n1 = read()
    return {"worker_cpu_pct": round(100 * (w1 - w0) / WINDOW_S), "parent_cpu_pct": round(100 * (p1 - p0) / WINDOW_S),
            "worker_preemptions_per_s": round((n1 - n0) / WINDOW_S)}


def _status_task(pid: int, tid: str) -> dict[str, str]:
    try:
        return dict(line.split(":", 1) for line in open(f"/proc/{pid}/task/{tid}/status").read().splitlines()
                    if ":" in line)
    except OSError:
        return {}


def one_run(exp, store, mode: str) -> dict[str, object]:
    from tcore.lab.launch import cluster
    from tcore.lab.run import runs

    if mode == "ray":
        os.environ[cluster.ADDRESS_ENV] = "local"
    else:
        os.environ.pop(cluster.ADDRESS_ENV, None)
    run = runs.start(exp, store, owner=f"env-diff-{mode}")
    deadline = time.time() + 600
    while not (run.phase == "measuring" and run.handle is not None and (mode == "local" or run.handle.remote)):
        if run.record is not None or time.time() > deadline:
            raise SystemExit(f"the {mode} run ended before it measured: {run.record and run.record.error}")
        time.sleep(0.05)
    time.sleep(1.0)  # into the timed steps
    pid = run.handle.pid if mode == "local" else run.handle.remote["pid"]
    parent = int(_stat(pid)[1])  # ppid
    facts = {"worker": process_facts(pid), "parent": process_facts(parent), **over_window(pid, parent)}
    record = run.wait(3600)
    if record.status != "finished":
        raise SystemExit(f"the {mode} run failed: {record.error}")
    facts.update(torch_threads=record.env.get("torch_threads"),
                 eager_samples_per_s=record.result["eager_samples_per_s"], notes=list(run.notes))
    return facts


def differences(local: dict, ray: dict) -> list[tuple[str, str, object, object]]:
    """(kind, name, local, ray) for every fact that differs; kind "expected" or "DIFFERS"."""
    rows = []
    for who in ("worker", "parent"):
        le, re_ = local[who]["environ"], ray[who]["environ"]
        for k in sorted(set(le) | set(re_)):
            if le.get(k) != re_.get(k):
                expected = who == "parent" or k.startswith(EXPECTED_ENV)
                if who == "worker" and k.startswith(READS_TORCH) and not k.startswith(EXPECTED_ENV):
                    expected = False
                expected = expected or k in ("PWD", "OLDPWD", "_")  # the shell's, read by nothing
                rows.append(("expected" if expected else "DIFFERS", f"{who} env {k}", le.get(k), re_.get(k)))
        for k in local[who]:
            if k not in ("environ", "program", "rss_mib", "threads") and local[who][k] != ray[who][k]:
                # the parent is this lab process locally and Ray's worker process through Ray: it differs by nature
                # in what it is (niceness of Ray's own threads, torch imported or not); what matters is what it costs
                # the machine (CPU, memory), printed below
                kind = "expected" if who == "parent" else "harmless" if k in HARMLESS else "DIFFERS"
                rows.append((kind, f"{who} {k}", local[who][k], ray[who][k]))
    for k in ("torch_threads",):
        if local[k] != ray[k]:
            rows.append(("DIFFERS", k, local[k], ray[k]))
    if local["worker"]["threads"] != ray["worker"]["threads"]:
        rows.append(("DIFFERS", "worker threads (torch's intra- and inter-op pools among them)",
                     local["worker"]["threads"], ray["worker"]["threads"]))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--batch-size", type=int, default=None, help="default: the model's practical default")
    parser.add_argument("--timed-steps", type=int, default=None, help="long enough to read the measuring phase")
    args = parser.parse_args()
    out = Path(tempfile.mkdtemp(prefix="ray-env-diff-"))
    os.environ.setdefault("COMPILE_LAB_CACHE_DIR", str(out / "cache"))
    os.environ.setdefault("COMPILE_LAB_SPARE_WORKERS", "0")

    from tcore.experiment.device import practical_defaults
    from tcore.experiment.spec import Experiment
    from tcore.store import RunStore

    knobs = practical_defaults(args.model, args.device, "inference")
    knobs.update({k: v for k, v in (("batch_size", args.batch_size), ("timed_steps", args.timed_steps)) if v})
    exp = Experiment(model=args.model, device=args.device, cache="cold", backend="eager", **knobs)
    store = RunStore(out / "runs.sqlite")
    facts = {mode: one_run(exp, store, mode) for mode in ("local", "ray")}
    local, ray = facts["local"], facts["ray"]

    print(f"{exp.label}: worker started locally vs by a Ray task (this machine, a local Ray cluster)")
    rows = differences(local, ray)
    width = max((len(name) for _, name, _, _ in rows), default=10)
    for kind, name, lv, rv in sorted(rows, key=lambda r: (r[0] != "DIFFERS", r[0] != "harmless", r[1])):
        print(f"  {kind:8s} {name:{width}s}  local: {str(lv)[:70]!s:70s}  ray: {str(rv)[:70]}")
    print("  measured over", f"{WINDOW_S:g} s of the measuring phase:")
    for k in ("worker_cpu_pct", "parent_cpu_pct", "worker_preemptions_per_s"):
        print(f"    {k:26s} local {local[k]:>6}  ray {ray[k]:>6}")
    for who in ("parent",):
        print(f"    {who} imports torch: local {local[who]['imports_torch']}, ray {ray[who]['imports_torch']}; "
              f"RSS local {local[who]['rss_mib']} MiB, ray {ray[who]['rss_mib']} MiB; threads local "
              f"{local[who]['threads']}, ray {ray[who]['threads']}")
    print(f"    eager samples/s            local {local['eager_samples_per_s']:.4g}  "
          f"ray {ray['eager_samples_per_s']:.4g}"
          "  (one run each: a hint, not a measurement; bench/ray_vs_local.py measures)")
    for note in ray["notes"]:
        print(f"    note on the Ray run: {note}")
    differ = [r for r in rows if r[0] == "DIFFERS"]
    print(f"{len(differ)} unexpected difference(s)")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
