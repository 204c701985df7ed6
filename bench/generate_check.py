"""The independent check of the generate task: the same greedy generation timed by transformers, by a plain loop
and by the lab, side by side, each in tokens/s.

    python bench/generate_check.py --device cpu --preset tiny --new-tokens 8     # the dry run of the GPU check's code
    python bench/generate_check.py --model hf:llama --preset 3.2-1b --precision bf16 --batch-size 1 \\
        --prompt-len 128 --new-tokens 256 --mode reduce-overhead          # the GPU check: Llama-3.2-1B's shape

1. transformers' own generate(), greedy, exactly --new-tokens tokens (do_sample=False, max_new_tokens=N,
   min_new_tokens=N), with a static cache (cache_implementation="static"), three ways: nothing compiled
   (disable_compile=True); its automatic compile of the decode steps (on a GPU by itself; on the CPU only with a
   CompileConfig that says so); and the documented recipe, model.forward = torch.compile(model.forward, mode=MODE,
   fullgraph=True). Each way's decode speed is (new tokens - 1) / (time of a full generate - time of a one-token
   generate), each the median of --repeats; its whole-generation speed is new tokens / time of a full generate.
   Argument names are feature-detected: a way this transformers lacks says so instead of a figure.
2. A plain loop of the check's own (bench/generate_ways.py): transformers' StaticCache, a compiled one-token step (the
   same mode, fullgraph), and the same loop eager; decode speed is the decode steps over their time, synchronized at
   both ends only.
3. The lab (first: the figure the others are held against): `python -m tcore run --task generate` with the same
   settings, in a fresh process; its decode tokens/s,
   eager and compiled, and how far compiled decode is from the memory-bound limit: the bytes a step reads per second
   (TB/s) and their share of the bandwidth the lab's worker measured on this GPU (a device-to-device copy of a buffer
   far larger than L2, read + write bytes) and of the datasheet's.

Prints one line per figure and writes bench/results/generate-check-<model>-<preset>-<machine>.json. The ways should
agree within a few percent on a quiet machine; the lab's eager/compiled ratio is its headline. --coordinate-descent
turns on Inductor's coordinate-descent tuning (gpt-fast's setting) in the loop and the lab: a much longer compile.
--resume FILE goes on from an earlier call of the same settings on the same machine (a sitting split over two calls
of a lent machine: the lab and the loop in one, transformers' ways in the next): the ways FILE holds are kept, the
rest are timed, and the lines at the end cover them all.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.generate_ways import GENERATE_WAYS, one_way  # noqa: E402


def machine(device: str) -> str:
    import torch

    if device != "cuda":
        return "cpu"
    name = torch.cuda.get_device_name().lower()
    return next((tag for tag in ("h200", "h100", "a100", "l40s", "l4") if tag in name), "gpu")


def lab(args) -> dict:
    db = Path(tempfile.mkdtemp(prefix="generate-check-")) / "runs.sqlite"
    command = [sys.executable, "-m", "tcore", "run", "--task", "generate", "--model", args.model, "--preset",
               args.preset, "--batch-size", str(args.batch_size), "--precision", args.precision, "--prompt-len",
               str(args.prompt_len), "--new-tokens", str(args.new_tokens), "--mode", args.mode, "--kv-cache", "static",
               "--device", args.device, "--backend", args.backend, "--db", str(db), "--json", "--quiet"] \
        + (["--coordinate-descent"] if args.coordinate_descent else []) \
        + (["--timeout", f"{args.lab_timeout:g}"] if args.lab_timeout else [])
    # The lab ends its own worker at --timeout (the worker leads a process group of its own, which killing the command
    # line alone would leave running beside the ways timed next); the group kill a minute later is the backstop.
    proc = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=args.lab_timeout + 60 if args.lab_timeout else None)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return {"failed": f"the lab's run passed this check's --lab-timeout of {args.lab_timeout:g} s"}
    out = subprocess.CompletedProcess(command, proc.returncode, stdout, stderr)
    if out.returncode:  # a reason, not an exit: the ways already timed keep their figures
        last = [line for line in out.stderr.splitlines() if line.strip()]
        return {"failed": f"the lab's run exited with {out.returncode}: {last[-1][:300] if last else ''}"}
    r = json.loads(out.stdout)["result"]
    return {key: r.get(key) for key in ("eager_decode_tokens_per_s", "compiled_decode_tokens_per_s", "speedup",
                                        "speedup_low", "speedup_high", "eager_ttft_ms", "compiled_ttft_ms",
                                        "compile_s", "compile_prefill_s", "compile_decode_s", "tokens_match",
                                        "compiled_decode_ms_per_token", "compiled_decode_tb_s",
                                        "mem_bw_measured_tb_s", "mem_bw_datasheet_tb_s", "mem_bw_method",
                                        "compiled_decode_bw_measured_pct", "compiled_decode_bw_pct",
                                        "eager_decode_idle_pct", "compiled_decode_idle_pct", "kv_cache_gib",
                                        "compiled_tokens", "unavailable",
                                        *(f"compiled_{part}_ms" for part in ("profiled_step", *STEP_PARTS)),
                                        "breakdown")}  # each class's kernels, the longest first ("top")


# Where a profiled compiled decode step's time goes, as the lab's result splits it (tcore.figures.breakdown).
STEP_PARTS = {"matmul": "matmuls", "attention": "attention", "pointwise": "pointwise and norms", "copy": "copies",
              "other": "other kernels", "idle": "device idle"}


def share(pct: float | None, tb_s: float | None, what: str, unavailable: dict, key: str) -> str:
    if pct is None or tb_s is None:
        return f"{what}: n/a ({unavailable.get(key, 'not recorded')})"
    return f"{pct:.1f}% of {tb_s:.3g} TB/s {what}"


def lab_lines(lab_figs: dict) -> list[str]:
    """The lab's figures, a line each: decode tokens/s eager and compiled, the memory bandwidth measured on the GPU
    and the datasheet's, and compiled decode's read rate with its share of each."""
    unavailable = lab_figs.get("unavailable") or {}
    rate, step_ms = lab_figs.get("compiled_decode_tb_s"), lab_figs.get("compiled_decode_ms_per_token")
    measured, datasheet = lab_figs.get("mem_bw_measured_tb_s"), lab_figs.get("mem_bw_datasheet_tb_s")
    shares = [share(lab_figs.get(key), lab_figs.get(yardstick), what, unavailable, key)
              for what, key, yardstick in (("measured", "compiled_decode_bw_measured_pct", "mem_bw_measured_tb_s"),
                                           ("datasheet", "compiled_decode_bw_pct", "mem_bw_datasheet_tb_s"))]
    idles = {v: lab_figs.get(f"{v}_decode_idle_pct") for v in ("eager", "compiled")}
    idle = ", ".join(f"{v} {'n/a' if pct is None else f'{pct:.0f}%'}" for v, pct in idles.items())
    return [f"  {'lab eager':22} {lab_figs['eager_decode_tokens_per_s']:9.1f} tokens/s per sequence",
            f"  {'lab compiled':22} {lab_figs['compiled_decode_tokens_per_s']:9.1f} tokens/s per sequence "
            f"(speedup {lab_figs['speedup']:.2f}x, compile {lab_figs['compile_s']:.1f} s = prefill "
            f"{lab_figs['compile_prefill_s']:.1f} + decode {lab_figs['compile_decode_s']:.1f}, same tokens: "
            f"{lab_figs['tokens_match']})",
            f"  {'memory bandwidth':22} measured {f'{measured:.3f} TB/s' if measured else 'n/a'} "
            f"({lab_figs.get('mem_bw_method') or unavailable.get('mem_bw_measured_tb_s')}), datasheet "
            f"{f'{datasheet:.3g} TB/s' if datasheet else 'n/a'}",
            f"  {'lab compiled decode':22} reads {rate:.3g} TB/s ({step_ms:.3f} ms a step): {', '.join(shares)}; "
            f"device idle {idle}",
            f"  {'its profiled step':22} " + step_parts(lab_figs)]


def step_parts(lab_figs: dict) -> str:
    """A compiled decode step (one token per sequence) split by kernel class, in µs per token: the kernels' times as
    the profiler measured them, the device's idle as the timed step leaves it (tcore.figures.breakdown), and beside
    them the time the step's bytes would take at the measured copy rate: what keeps it from the bandwidth limit."""
    if not lab_figs.get("compiled_profiled_step_ms"):
        why = (lab_figs.get("unavailable") or {}).get("compiled_profiled_step_ms", "not recorded")
        return f"n/a ({why})"
    parts = [f"{words} {1e3 * lab_figs[f'compiled_{part}_ms']:.0f}" for part, words in STEP_PARTS.items()
             if lab_figs.get(f"compiled_{part}_ms") is not None]
    profiled = f"profiled step {1e3 * lab_figs['compiled_profiled_step_ms']:.0f} µs"
    if not parts:
        return f"n/a (the lab's result has no kernel classes: {profiled})"
    step, rate, measured = (lab_figs.get(k) for k in ("compiled_decode_ms_per_token", "compiled_decode_tb_s",
                                                      "mem_bw_measured_tb_s"))
    floor = f"; its bytes at the measured copy rate: {1e3 * step * rate / measured:.0f} µs" if step and rate and \
        measured else ""
    timed = f"timed {1e3 * step:.0f} µs a token" if step else "a token"
    return f"{timed}: " + ", ".join(parts) + f" (µs; {profiled}{floor})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="hf:gpt2", help="a transformers causal LM as hf:TYPE (default hf:gpt2)")
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto",
                        help="where to generate (default: the GPU where there is one); --device cpu --preset tiny "
                             "--new-tokens 8 is the dry run of the GPU check's code")
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default=None,
                        help="weights' dtype (default: bf16 on a GPU, fp32 on the CPU)")
    parser.add_argument("--prompt-len", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--mode", default=None, help="torch.compile mode (default: reduce-overhead on a GPU, "
                                                     "default on the CPU)")
    parser.add_argument("--backend", choices=["inductor", "aot_eager", "eager"], default="inductor",
                        help="the compiler backend of every compiled way (default inductor; the others take no mode, "
                             "for a quicker dry run)")
    parser.add_argument("--repeats", type=int, default=5, help="timed generations per way, after two warm-ups")
    parser.add_argument("--skip", nargs="*", default=[], choices=["generate", "loop", "lab"],
                        help="ways not to time (generate: all three of transformers' generate())")
    parser.add_argument("--coordinate-descent", action="store_true",
                        help="Inductor's coordinate-descent tuning in the compiled loop and the lab (gpt-fast turns "
                             "it on; on an H100 the lab's compile of a 1B decoder with it ran past 240 s)")
    parser.add_argument("--lab-timeout", type=float, default=None, metavar="S",
                        help="the lab's run ends after this many seconds with a reason, so the ways still run")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--resume", type=Path, default=None, metavar="FILE",
                        help="keep the ways an earlier call of the same settings on this machine wrote to FILE and "
                             "time only the rest")
    parser.add_argument("--one", choices=["loop_eager", "loop_compiled", *GENERATE_WAYS], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: this machine has no usable CUDA GPU; choose --device cpu or auto")
    device = args.device = "cuda" if args.device == "auto" and torch.cuda.is_available() else \
        ("cpu" if args.device == "auto" else args.device)
    args.precision = args.precision or ("bf16" if device == "cuda" else "fp32")
    args.mode = args.mode or ("reduce-overhead" if device == "cuda" else "default")
    if args.backend != "inductor" and args.mode != "default":
        parser.error(f"--mode {args.mode} is Inductor's: with --backend {args.backend} choose --mode default")
    found: dict = {"machine": machine(device), "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
                   "torch": torch.__version__, "settings": {k: str(v) for k, v in vars(args).items()}}
    import transformers

    found["transformers"] = transformers.__version__
    if args.one:  # one way, in a process of its own (below): its figures as the last line
        print(RESULT + json.dumps(one_way(args, device, args.one)), flush=True)
        return 0
    tuned = "-coordinate-descent" if args.coordinate_descent else ""
    name = f"generate-check-{args.model.replace(':', '-')}-{args.preset}{tuned}-{found['machine']}"
    out = args.out or REPO / "bench" / "results" / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.resume:
        found = resumed(args.resume, found, parser)
    ways = [w for w in (*(("loop_eager", "loop_compiled") if "loop" not in args.skip else ()),
                        *(GENERATE_WAYS if "generate" not in args.skip else ())) if w not in found]
    if "lab" not in args.skip and "lab" not in found:  # first: the figure the others are held against, kept if the
        # call is cut later
        found["lab"] = lab(args)
        out.write_text(json.dumps(found, indent=2))
        print(f"  {'lab':22} " + ("done" if not found["lab"].get("failed") else f"n/a ({found['lab']['failed']})"),
              flush=True)
    for way in ways:  # each in a fresh process: every way compiles from nothing, and a crash costs one way only
        found[way] = in_own_process(way, argv if argv is not None else sys.argv[1:])
        print(way_line(way, found[way]), flush=True)
        out.write_text(json.dumps(found, indent=2))  # a call cut short keeps the ways that finished
    print(f"{args.model}/{args.preset} bs{args.batch_size} {args.precision} {args.prompt_len}+{args.new_tokens} "
          f"tokens, mode={args.mode}, backend={args.backend}, on {found['device']}, transformers "
          f"{transformers.__version__}")
    timed_ways = [w for w in ("loop_eager", "loop_compiled", *GENERATE_WAYS) if w in found]  # printed as each ended
    if found.get("lab", {}).get("failed"):
        print(f"  {'lab':22} n/a ({found['lab']['failed']})")
    elif "lab" in found:
        lab_figs = found["lab"]
        print("\n".join(lab_lines(lab_figs)))
        for way in ("loop_compiled", "generate_auto_compile", "generate_compiled_forward"):
            if found.get(way, {}).get("decode_tokens_per_s"):
                gap = 100 * (lab_figs["compiled_decode_tokens_per_s"] / found[way]["decode_tokens_per_s"] - 1)
                print(f"  lab compiled vs {way}: {gap:+.1f}%")
    reference = next((found[w]["tokens"] for w in ("loop_eager", "generate_static") if "tokens" in found.get(w, {})),
                     None)
    if reference is not None:  # greedy: every way should write the same tokens (bf16 may part late on)
        found["same_tokens"] = {w: found[w]["tokens"] == reference for w in timed_ways if "tokens" in found[w]}
        print(f"  same tokens as {'loop_eager' if 'loop_eager' in found else 'generate_static'}: "
              + ", ".join(f"{w} {same}" for w, same in found["same_tokens"].items()))
    out.write_text(json.dumps(found, indent=2))
    print(f"wrote {out}")
    return 0


WAY_NAMES = ("loop_eager", "loop_compiled", *GENERATE_WAYS)
# What may differ between two calls that make one check: which ways each times, its limits, where it writes.
PER_CALL = ("skip", "lab_timeout", "out", "resume", "one")


def resumed(path: Path, found: dict, parser: argparse.ArgumentParser) -> dict:
    """An earlier call's figures to go on from: refused (before anything runs) unless it timed the same settings on
    the same GPU, so that every figure printed at the end comes from one machine."""
    if not path.is_file():
        parser.error(f"--resume {path}: no such file (the earlier call's --out)")
    earlier = json.loads(path.read_text())
    ours, theirs = ({k: v for k, v in d.get("settings", {}).items() if k not in PER_CALL} for d in (found, earlier))
    if ours != theirs:
        differ = sorted(k for k in {*ours, *theirs} if ours.get(k) != theirs.get(k))
        parser.error(f"--resume {path}: timed with other settings ({', '.join(differ)})")
    if (earlier.get("machine"), earlier.get("device")) != (found["machine"], found["device"]):
        parser.error(f"--resume {path}: timed on {earlier.get('device')}, not on this {found['device']}")
    if (earlier.get("lab") or {}).get("failed"):  # a lab that ran out of its time is timed again, not kept
        earlier = {k: v for k, v in earlier.items() if k != "lab"}
    return {**earlier, "settings": found["settings"],
            "resumed_from": {"file": str(path), "ways": [w for w in earlier if w in ("lab", *WAY_NAMES)]}}


RESULT = "WAY-RESULT "  # the line a way's own process ends with: its figures as JSON


def in_own_process(way: str, argv: list[str]) -> dict:
    """`way` timed in a fresh process (this script with --one WAY): its figures, or why there are none, also where the
    process died (a segmentation fault in a compiled CUDA-graph step once took every figure of the check along)."""
    out = subprocess.run([sys.executable, "-u", "-X", "faulthandler", __file__, *argv, "--one", way], cwd=REPO,
                         capture_output=True, text=True)
    for line in reversed(out.stdout.splitlines()):
        if line.startswith(RESULT):
            return json.loads(line[len(RESULT):])
    died = (f"the process died of {signal.Signals(-out.returncode).name}" if out.returncode < 0 else
            f"the process exited with {out.returncode}")
    lines = out.stderr.splitlines()
    crashed_in = next((lines[i + 1].strip() for i, line in enumerate(lines[:-1])
                       if "most recent call first" in line), None)  # faulthandler's innermost frame
    said = [line for line in lines if line.strip() and "Warning" not in line
            and not line.startswith(("W1", "  warnings"))]
    why = f"in {crashed_in}" if crashed_in else (said[-1][:300] if said else "it said nothing")
    return {"unavailable": f"{died}: {why}", "how": GENERATE_WAYS.get(way, way)}


def way_line(way: str, figs: dict) -> str:
    """One way's line: decode tokens/s per sequence (and the whole generation's), or why it has none."""
    if figs.get("unavailable"):
        return f"  {way:26} n/a ({figs['unavailable']})"
    whole = f", whole generation {figs['tokens_per_s']:.1f} tokens/s" if figs.get("tokens_per_s") else ""
    note = "" if figs.get("compiled", True) or way != "generate_auto_compile" else \
        " (transformers did not compile: its criteria were not met)"
    return f"  {way:26} {figs['decode_tokens_per_s']:9.1f} tokens/s per sequence in decode{whole}{note}"


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    raise SystemExit(main())
