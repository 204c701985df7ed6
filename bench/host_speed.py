"""Does a host read slower after its cores were kept busy, for how long, and does it depend on how many were busy?

A host-bound run's eager figure is one CPU thread's launch rate. This times a fixed pure-Python loop (the reference,
pinned to one core) at rest, then keeps K other cores busy for --busy-s seconds (busy loops, or real Inductor compiles
with --load compile, as a room's neighbours do), then times the reference every --every-s seconds for --after-s
seconds. Beside each reading it keeps what the host exposes: the time the hypervisor stole (/proc/stat), the kernel's
idea of the core's clock (/proc/cpuinfo), CPU pressure (/proc/pressure/cpu), the other processes still using CPU. With
--eager MODEL it also times that model's eager steps on the GPU (a host-bound loop: its launch rate) at rest and
right after each load, so the reference loop's change can be read as the figure's.

    python bench/host_speed.py --busy 15 8 4 --busy-s 60 --after-s 40 --out R.json
    python bench/host_speed.py --busy 15 --load compile --eager resnet50 --out R.json
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path

REFERENCE_N = 2_000_000  # about 0.1-0.2 s of one core: long against the timer, short against the host's moves


def reference_s() -> float:
    """Seconds for a fixed pure-Python loop on this process's core."""
    t0 = time.perf_counter()
    x = 0
    for i in range(REFERENCE_N):
        x += i & 7
    return time.perf_counter() - t0


def host_facts() -> dict:
    """What the host exposes: stolen and busy jiffies so far, the clock the kernel reports, CPU pressure."""
    facts: dict = {}
    with open("/proc/stat") as f:
        cpu = f.readline().split()[1:]
    facts["steal_jiffies"] = int(cpu[7]) if len(cpu) > 7 else None
    facts["busy_jiffies"] = sum(int(v) for v in cpu[:3])
    try:
        mhz = [float(line.split(":")[1]) for line in open("/proc/cpuinfo") if line.startswith("cpu MHz")]
        facts["mhz_mean"] = round(statistics.fmean(mhz), 1) if mhz else None
    except OSError:
        facts["mhz_mean"] = None
    try:
        facts["cpu_pressure"] = open("/proc/pressure/cpu").readline().strip()
    except OSError:
        facts["cpu_pressure"] = None
    return facts


def _busy(core: int, until: float) -> None:
    os.sched_setaffinity(0, {core})
    x = 0
    while time.time() < until:
        for i in range(100_000):
            x += i & 7


def _compile(core: int, until: float) -> None:
    """Real Inductor compiles, one after another, each cold (a fresh cache dir), as a room's neighbours compile."""
    import tempfile

    os.sched_setaffinity(0, {core})
    os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
    n = 0
    while time.time() < until:
        with tempfile.TemporaryDirectory() as cache:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
            import torch

            torch._dynamo.reset()
            model = torch.nn.Sequential(*[torch.nn.Linear(64 + n % 7, 64 + n % 7) for _ in range(6)])
            torch.compile(model)(torch.randn(4, 64 + n % 7))
            n += 1


def load(kind: str, cores: list[int], busy_s: float) -> None:
    until = time.time() + busy_s
    target = _busy if kind == "busy" else _compile
    spawn = mp.get_context("spawn")  # a child forked after CUDA was touched could not use torch
    procs = [spawn.Process(target=target, args=(c, until)) for c in cores]
    for p in procs:
        p.start()
    for p in procs:
        p.join()


def others_on_cpu() -> int:
    """Processes other than this one in state R (running or runnable)."""
    n = 0
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != os.getpid():
            try:
                n += open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "R"
            except OSError:
                pass
    return n


class Eager:
    """A host-bound eager loop on the GPU: its steps/s over a block of `block_s`."""

    def __init__(self, model: str, batch: int) -> None:
        import torch
        import torchvision

        self.torch = torch
        self.model = torchvision.models.get_model(model, weights=None).cuda().eval().to(torch.bfloat16)
        self.model = self.model.to(memory_format=torch.channels_last)
        self.x = torch.randn(batch, 3, 224, 224, device="cuda", dtype=torch.bfloat16).to(
            memory_format=torch.channels_last)
        self.steps_per_s(2.0)

    def steps_per_s(self, block_s: float = 2.0) -> float:
        torch = self.torch
        with torch.inference_mode():
            torch.cuda.synchronize()
            n, t0 = 0, time.perf_counter()
            while time.perf_counter() - t0 < block_s:
                self.model(self.x)
                n += 1
            torch.cuda.synchronize()
            return n / (time.perf_counter() - t0)


def reading(t0: float, eager: Eager | None) -> dict:
    row = {"t_s": round(time.time() - t0, 2), "reference_s": round(reference_s(), 5), **host_facts(),
           "others_running": others_on_cpu()}
    if eager is not None:
        row["eager_steps_per_s"] = round(eager.steps_per_s(), 2)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--busy", type=int, nargs="+", default=[15, 4], help="cores kept busy, one condition each")
    parser.add_argument("--load", choices=["busy", "compile"], default="busy")
    parser.add_argument("--busy-s", type=float, default=60.0)
    parser.add_argument("--after-s", type=float, default=40.0)
    parser.add_argument("--rest-s", type=float, default=20.0, help="readings at rest before each load")
    parser.add_argument("--every-s", type=float, default=2.0)
    parser.add_argument("--eager", default=None, help="a torchvision model timed eagerly on the GPU beside the loop")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    os.sched_setaffinity(0, {0})
    cores = sorted(os.sched_getaffinity(0) | set(range(os.cpu_count() or 1)))
    others = [c for c in cores if c != 0]
    eager = Eager(args.eager, args.batch_size) if args.eager else None
    result = {"cpus": os.cpu_count(), "reference_n": REFERENCE_N, "load": args.load, "conditions": []}
    for k in args.busy:
        t0 = time.time()
        rest = []
        while time.time() - t0 < args.rest_s:
            rest.append(reading(t0, eager))
            time.sleep(args.every_s)
        load(args.load, others[:k], args.busy_s)
        t1, after = time.time(), []
        while time.time() - t1 < args.after_s:
            after.append(reading(t1, eager))
            time.sleep(args.every_s)
        at_rest = statistics.median(r["reference_s"] for r in rest)
        late = [r["reference_s"] for r in after if r["t_s"] >= 10]
        cond = {"busy_cores": k, "busy_s": args.busy_s, "rest": rest, "after": after,
                "reference_at_rest_s": at_rest,
                "reference_10s_on_pct": round(100 * (statistics.median(late) / at_rest - 1), 1) if late else None,
                "steal_jiffies_during": after[0]["steal_jiffies"] - rest[-1]["steal_jiffies"]
                if after and rest and rest[-1]["steal_jiffies"] is not None else None}
        if eager is not None:
            e_rest = statistics.median(r["eager_steps_per_s"] for r in rest)
            e_late = [r["eager_steps_per_s"] for r in after if r["t_s"] >= 10]
            cond["eager_at_rest"] = e_rest
            cond["eager_10s_on_pct"] = round(100 * (statistics.median(e_late) / e_rest - 1), 1) if e_late else None
        result["conditions"].append(cond)
        print(json.dumps({k2: v for k2, v in cond.items() if k2 not in ("rest", "after")}), flush=True)
        args.out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
