"""What moves a host-bound eager loop: between fresh processes, and within one process when a neighbour does X.

    python bench/host_bound.py --model hf:gpt2 --batch-size 8 --out bench/results/host-bound-gpt2-h100.json
    python bench/host_bound.py --model resnet50 --batch-size 64 --channels-last --fresh 3 --pairs 6

A host-bound eager step's throughput is the rate at which one CPU thread launches kernels, so it follows whatever
slows that thread. This measures each candidate cause by pairing: in one process, with the model built once, blocks
of eager steps alternate between the cause off (A) and on (B), the order flipping each pair so drift cancels, and the
cause's effect is the median of the pairs' B/A throughput ratios. The neighbours are real processes started once and
switched with SIGSTOP/SIGCONT between blocks, so a pair differs only in that. Then N fresh processes measure the
same loop alone, which gives the spread between processes that no in-process pairing can see.

Causes (each a row of the result): the launch thread unpinned; busy loops on the other cores (the launch core and
its SMT siblings kept free), on every core, on the launch core's sibling; memory streaming on the other cores;
real Inductor compiles (C++ on the CPU, g++) on the other cores; a GPU neighbour at a 10% duty cycle; a neighbour
holding an idle CUDA context; the NVML power sampler at 20 Hz in-process; Python's garbage collector left on.
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

# One neighbour each; run as `python -c` so they import nothing of the lab.
BUSY = "while True: pass"
MEMORY = ("import numpy as np\na = np.ones(64 * 2**20 // 8); b = np.empty_like(a)\n"
          "while True: np.copyto(b, a); np.copyto(a, b)")  # 64 MiB each way: well past any L3
COMPILE = ("import os, tempfile, torch\n"
           "m = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(8)])\nx = torch.randn(8, 64)\n"
           "while True:\n"
           "    os.environ['TORCHINDUCTOR_CACHE_DIR'] = tempfile.mkdtemp()\n"
           "    torch._dynamo.reset(); torch.compile(m)(x)\n")
GPU_DUTY = ("import time, torch\na = torch.randn(4096, 4096, device='cuda', dtype=torch.bfloat16)\n"
            "while True:\n"
            "    t = time.perf_counter()\n"
            "    while time.perf_counter() - t < 0.002: a @ a\n"
            "    torch.cuda.synchronize(); time.sleep(0.018)\n")  # about 2 ms of GPU work every 20 ms
GPU_IDLE = "import time, torch\ntorch.zeros(1, device='cuda')\nwhile True: time.sleep(1)"


def topology() -> dict:
    """Cores this process may use, each core's SMT siblings, whether cpufreq is visible, the load."""
    cpus = sorted(os.sched_getaffinity(0))
    siblings = {}
    for cpu in cpus:
        path = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list")
        siblings[cpu] = path.read_text().strip() if path.exists() else None
    freq = Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq")
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), None)
    return {"cpus": cpus, "siblings": siblings, "cpufreq_visible": freq.exists(), "cpu_model": model,
            "loadavg": Path("/proc/loadavg").read_text().split()[:3]}


def parse_list(text: str | None) -> set[int]:
    out: set[int] = set()
    for part in (text or "").split(","):
        if "-" in part:
            lo, hi = part.split("-")
            out |= set(range(int(lo), int(hi) + 1))
        elif part.strip():
            out.add(int(part))
    return out


def mhz(cpu: int) -> float | None:
    """The core's clock as the kernel reports it (cpufreq, else /proc/cpuinfo); a VM may report a constant."""
    path = Path(f"/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_cur_freq")
    if path.exists():
        return int(path.read_text()) / 1e3
    block, found = Path("/proc/cpuinfo").read_text().split("\n\n"), None
    for b in block:
        if f"processor\t: {cpu}\n" in b + "\n":
            for line in b.splitlines():
                if line.startswith("cpu MHz"):
                    found = float(line.split(":")[1])
    return found


class Neighbours:
    """Processes started once, each in its own group, stopped (SIGSTOP) until switched on."""

    def __init__(self, code: str, count: int, cores: set[int] | None, env: dict | None = None) -> None:
        self.procs = []
        for i in range(count):
            pin = None
            if cores:
                pin = sorted(cores)[i % len(cores)] if count <= len(cores) else None
            preexec = (lambda c=(cores if pin is None else {pin}): os.sched_setaffinity(0, c)) if cores else None
            self.procs.append(subprocess.Popen([sys.executable, "-c", code], start_new_session=True,
                                               preexec_fn=preexec, env=env or dict(os.environ),
                                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    def _signal(self, sig: int) -> None:
        for p in self.procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, sig)

    def on(self) -> None:
        self._signal(signal.SIGCONT)

    def off(self) -> None:
        self._signal(signal.SIGSTOP)

    def close(self) -> None:
        self._signal(signal.SIGKILL)
        for p in self.procs:
            p.wait()


def sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def build_loop(args):
    """The eager step of the lab's own build of the model, and the batch it is fed."""
    from tcore.experiment.device import practical_defaults
    from tcore.experiment.spec import Experiment
    from tcore.worker.build import build, step_fn

    defaults = practical_defaults(args.model, args.device, "inference")
    exp = Experiment(model=args.model, device=args.device, preset=args.preset or defaults["preset"],
                     batch_size=args.batch_size or defaults["batch_size"], precision=args.precision,
                     channels_last=args.channels_last, compile="off")
    w = build(exp, args.device)
    step = step_fn(w.model, w, exp, args.device, None)
    batch = w.batches[0]
    for _ in range(5):
        step(batch)
    sync()
    return exp, (lambda: step(batch))


def block(step, n: int) -> float:
    """Seconds for n steps, synchronized on both sides (the host-bound rate is the wall time of the launches)."""
    sync()
    t0 = time.perf_counter()
    for _ in range(n):
        step()
    sync()
    return time.perf_counter() - t0


def steps_for(step, seconds: float) -> int:
    n, took = 3, 0.0
    while took < 0.05:
        took = block(step, n)
        n *= 2
    return max(3, round(seconds / (took / (n // 2))))


@contextlib.contextmanager
def pinned(cpu: int | None):
    allowed = os.sched_getaffinity(0)
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, allowed)


def pairs(step, n: int, count: int, switch_on, switch_off, launch_cpu: int | None, settle_s: float) -> dict:
    """`count` pairs of blocks, A (off) and B (on), order flipping; the B/A throughput ratios."""
    ratios, a_rates = [], []
    for i in range(count):
        order = ("A", "B") if i % 2 == 0 else ("B", "A")
        took = {}
        for which in order:
            (switch_on if which == "B" else switch_off)()
            time.sleep(settle_s)
            with pinned(launch_cpu):
                took[which] = block(step, n)
        switch_off()
        ratios.append(took["A"] / took["B"])  # throughput B / throughput A
        a_rates.append(n / took["A"])
    return {"ratio_median": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios),
            "ratios": [round(r, 4) for r in ratios], "a_steps_per_s": round(statistics.median(a_rates), 2)}


def conditions(args) -> dict:
    """In one process: each cause's paired effect on the eager loop's throughput."""
    import torch

    from tcore.host.power import PowerSampler, open_meter

    exp, step = build_loop(args)
    topo = topology()
    cpus = topo["cpus"]
    launch = cpus[1] if len(cpus) > 1 else cpus[0]
    mine = parse_list(topo["siblings"].get(launch)) | {launch}
    others = set(cpus) - mine
    n = steps_for(step, args.block_s)
    out = {"spec": exp.to_dict(), "launch_cpu": launch, "launch_siblings": sorted(mine), "steps_per_block": n,
           "rows": {}}
    def nothing() -> None:
        return None

    def row(name: str, on, off, cpu=launch, settle=args.settle_s):
        t0 = time.perf_counter()
        r = pairs(step, n, args.pairs, on, off, cpu, settle)
        r["mhz_launch_cpu"] = mhz(launch)
        r["seconds"] = round(time.perf_counter() - t0, 1)
        out["rows"][name] = r
        print(f"{name:28s} B/A {r['ratio_median']:.3f} (min {r['ratio_min']:.3f}, max {r['ratio_max']:.3f}); "
              f"A {r['a_steps_per_s'] * exp.batch_size:.0f} samples/s", flush=True)

    row("nothing (A/A)", nothing, nothing)
    ratios = []  # B: the launch thread where the scheduler puts it
    for i in range(args.pairs):
        took = {}
        for which in (("A", "B") if i % 2 == 0 else ("B", "A")):
            with pinned(launch if which == "A" else None):
                took[which] = block(step, n)
        ratios.append(took["A"] / took["B"])
    out["rows"]["launch thread unpinned"] = {"ratio_median": statistics.median(ratios), "ratio_min": min(ratios),
                                             "ratio_max": max(ratios), "ratios": [round(r, 4) for r in ratios]}
    print(f"{'launch thread unpinned':28s} B/A {statistics.median(ratios):.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f})", flush=True)

    sets = [("busy loops, other cores", BUSY, len(others), others),
            ("busy loops, every core", BUSY, len(cpus), set(cpus)),
            ("memory streams, other cores", MEMORY, max(1, len(others) // 2), others),
            ("Inductor compiles, other cores", COMPILE, max(1, len(others) // 4), others)]
    if mine - {launch}:
        sets.insert(2, ("busy loop on the SMT sibling", BUSY, 1, mine - {launch}))
    for name, code, count, cores in sets:
        env = dict(os.environ, CUDA_VISIBLE_DEVICES="") if code is COMPILE else None
        group = Neighbours(code, count, cores, env)
        try:
            if code is COMPILE:  # let them reach the compiling loop (imports) before pairing
                group.on()
                time.sleep(args.compile_ramp_s)
                group.off()
            else:
                group.off()
            row(name, group.on, group.off)
        finally:
            group.close()

    for name, code in (("GPU neighbour, 10% duty", GPU_DUTY), ("idle CUDA context beside", GPU_IDLE))[
            :2 if args.device == "cuda" else 0]:
        group = Neighbours(code, 1, others)
        try:
            group.on()
            time.sleep(args.cuda_ramp_s)  # its CUDA start, before pairing
            group.off()
            row(name, group.on, group.off)
        finally:
            group.close()

    meter = open_meter(args.device)
    if meter.available:
        sampler = {"s": None}

        def sampler_on():
            sampler["s"] = PowerSampler(meter, lambda s: None, hz=20.0).start()

        def sampler_off():
            if sampler["s"]:
                sampler["s"].stop()
                sampler["s"] = None
        row("NVML power sampler, 20 Hz", sampler_on, sampler_off)
    else:
        out["rows"]["NVML power sampler, 20 Hz"] = {"unavailable": meter.reason}
    gc.disable()
    row("garbage collector on", gc.enable, gc.disable)
    gc.enable()
    out["topology"] = topo
    out["torch"] = torch.__version__
    out["gpu"] = torch.cuda.get_device_name() if args.device == "cuda" else None
    return out


def fresh(args) -> dict:
    """One fresh process: the loop alone, pinned as the lab pins it, its median rate over a few blocks."""
    t_start = time.perf_counter()
    exp, step = build_loop(args)
    cpus = sorted(os.sched_getaffinity(0))
    launch = cpus[1] if len(cpus) > 1 else cpus[0]
    n = steps_for(step, args.block_s)
    rates = []
    gc.disable()
    with pinned(launch):
        for _ in range(args.fresh_blocks):
            rates.append(n / block(step, n))
    return {"samples_per_s": statistics.median(rates) * exp.batch_size,
            "blocks_samples_per_s": [round(r * exp.batch_size, 1) for r in rates],
            "launch_cpu": launch, "mhz": mhz(launch), "start_s": round(time.perf_counter() - t_start, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="hf:gpt2")
    ap.add_argument("--preset", default=None, help="default: the lab's GPU default for the model")
    ap.add_argument("--batch-size", type=int, default=None, help="default: the lab's GPU default for the model")
    ap.add_argument("--precision", default="bf16")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="cpu: a dry run of this script")
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--pairs", type=int, default=8, help="pairs of blocks per cause")
    ap.add_argument("--block-s", type=float, default=0.4, help="seconds per block")
    ap.add_argument("--settle-s", type=float, default=0.05, help="after switching a neighbour, before timing")
    ap.add_argument("--compile-ramp-s", type=float, default=12.0)
    ap.add_argument("--cuda-ramp-s", type=float, default=6.0)
    ap.add_argument("--fresh", type=int, default=5, help="fresh processes for the between-process spread")
    ap.add_argument("--fresh-blocks", type=int, default=8)
    ap.add_argument("--part", choices=["all", "conditions", "fresh"], default="all",
                    help="fresh and conditions are also how the parent runs its children")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    if args.part == "fresh":
        print(json.dumps(fresh(args)))
        return 0
    if args.part == "conditions":
        print("RESULT " + json.dumps(conditions(args)), flush=True)
        return 0
    child = [sys.executable, __file__, "--model", args.model, "--precision", args.precision, "--device", args.device,
             "--pairs", str(args.pairs), "--block-s", str(args.block_s), "--settle-s", str(args.settle_s),
             "--compile-ramp-s", str(args.compile_ramp_s), "--cuda-ramp-s", str(args.cuda_ramp_s),
             "--fresh-blocks", str(args.fresh_blocks)]
    child += ["--preset", args.preset] if args.preset else []
    child += ["--batch-size", str(args.batch_size)] if args.batch_size else []
    child += ["--channels-last"] if args.channels_last else []
    result = {"model": args.model, "fresh": []}
    for i in range(args.fresh):
        done = subprocess.run(child + ["--part", "fresh"], capture_output=True, text=True, cwd=REPO)
        if done.returncode != 0:
            print(done.stderr[-3000:], file=sys.stderr)
            return 1
        one = json.loads(done.stdout.strip().splitlines()[-1])
        result["fresh"].append(one)
        print(f"fresh process {i + 1}: {one['samples_per_s']:.0f} samples/s on cpu {one['launch_cpu']} "
              f"({one['mhz']} MHz; blocks {min(one['blocks_samples_per_s']):.0f}-"
              f"{max(one['blocks_samples_per_s']):.0f})", flush=True)
    rates = [f["samples_per_s"] for f in result["fresh"]]
    if rates:
        med = statistics.median(rates)
        result["fresh_spread_pct"] = round(100 * (max(rates) - min(rates)) / 2 / med, 2)
        print(f"between {len(rates)} fresh processes: {min(rates):.0f}-{max(rates):.0f} samples/s, "
              f"± {result['fresh_spread_pct']:.1f}% of the median {med:.0f}", flush=True)
    proc = subprocess.Popen(child + ["--part", "conditions"], stdout=subprocess.PIPE, text=True, cwd=REPO)
    for line in proc.stdout:
        if line.startswith("RESULT "):
            result["conditions"] = json.loads(line[len("RESULT "):])
        else:
            print(line, end="", flush=True)
    proc.wait()
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1))
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
