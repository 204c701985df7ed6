"""A whole sitting on a machine from a list of benchmark commands: each result named after what it measures and the
machine, one summary line per result, everything packed into one archive.

    python bench/sitting.py run bench/sittings/gpu.txt --out /tmp/sitting --pack $OUT/sitting-1.tgz \\
        --only bare-loop-resnet50 default-run-stability        # one part of a sitting: what fits one 10-minute call
    python bench/sitting.py status /tmp/sitting                # what a sitting has done so far
    python bench/sitting.py run bench/sittings/cpu.txt --out /tmp/cpu --only bare-loop-tiny   # one line of a list

A list has one benchmark a line, `NAME: COMMAND`; blank lines and `#` comments are skipped. COMMAND runs under
bash from the repository's root, with these replaced first:
    {python}   this Python (the one that runs the sitting)
    {result}   OUT/NAME-MACHINE.json, the file a benchmark that writes one result should write
    {jsonl}    OUT/NAME-MACHINE.jsonl, the same for one that writes JSON lines
    {dir}      OUT/NAME-MACHINE/, a folder for one that writes several (made before it starts)
    {of:NAME}  OUT/NAME-MACHINE.json, an earlier row's result (a row that goes on from it, in a later call)
Everything it prints goes to OUT/NAME-MACHINE.log. MACHINE is the GPU's short name from nvidia-smi (h100, h200, a100,
...) or `cpu`; --machine overrides it. Before the first benchmark the runner writes OUT/machine-MACHINE.json (the
GPU, driver, the versions of torch and the model libraries, the commit, the cores, the date).

The benchmarks run one after another in the list's order, so a lease that ends early leaves the first ones whole:
put what matters most first. After each one the runner appends a line to OUT/summary.txt and prints it (name, exit
code, seconds, and a run record's speedup, or else the last line the benchmark printed) and, with --pack, writes all
of OUT as one .tgz: a lent GPU machine hands back only a few files from at most two folders down, so the archive is
what to fetch. Running the same list into the same OUT again skips the benchmarks that already finished (a sitting
cut off goes on).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import tarfile
import time
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SUMMARY = "summary.txt"
DONE = "-- sitting: finished with exit code"  # the runner's last line in a benchmark's log
VERSIONS = ("torch", "triton", "torchvision", "timm", "transformers", "diffusers", "streamlit", "plotly", "ray")


def _nvidia_smi(fields: str) -> list[str]:
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()] if out.returncode == 0 else []


def machine_name(gpu_names: list[str]) -> str:
    """The short name a result is filed under: `h100` for "NVIDIA H100 80GB HBM3", `cpu` without a GPU."""
    for name in gpu_names:
        found = re.search(r"\b([A-Z]{1,2}\d{2,4}[A-Z]?)\b", name.split(",")[0].replace("NVIDIA", ""))
        if found:
            return found.group(1).lower()
    return "gpu" if gpu_names else "cpu"


def machine_facts() -> dict:
    """What a figure needs beside it: the GPUs, the versions, the commit, the cores, the date (no torch import)."""
    versions = {}
    for name in VERSIONS:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    return {"gpus": _nvidia_smi("name,driver_version,power.limit,memory.total"), "python": platform.python_version(),
            "versions": versions, "commit": commit or None, "cores": os.cpu_count(), "host": platform.node(),
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}


def read_list(path: Path) -> list[tuple[str, str]]:
    """(name, command) for each benchmark line of a list; a malformed line or a repeated name is an error."""
    entries = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, command = line.partition(":")
        if not sep or not re.fullmatch(r"[a-z0-9][a-z0-9._-]*", name.strip()) or not command.strip():
            raise SystemExit(f"{path}:{number}: expected `name: command` (name in lower-case letters, digits, . _ -), "
                             f"got {line!r}")
        if name.strip() in dict(entries):
            raise SystemExit(f"{path}:{number}: the name {name.strip()!r} is used twice")
        entries.append((name.strip(), command.strip()))
    return entries


def _last_line(log: Path) -> str:
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip() and DONE not in line]
    return lines[-1].strip()[:200] if lines else "(printed nothing)"


def _headline(result: Path) -> str | None:
    """A run record's outcome in words (`python -m tcore run --json`), else None: then the log's last line says it."""
    try:
        record = json.loads(result.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or "status" not in record or not isinstance(record.get("result"), dict):
        return None
    figures = record["result"]
    words = [record["status"]]
    if figures.get("speedup") is not None:
        words.append(f"speedup {figures['speedup']:.2f}x")
    if figures.get("compile_s") is not None:
        words.append(f"compile {figures['compile_s']:.1f} s")
    return ", ".join(words)


def _finished(log: Path) -> bool:
    return log.exists() and DONE in log.read_text(errors="replace")


def pack(out: Path, archive: Path) -> None:
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_name(archive.name + ".partial")
    with tarfile.open(partial, "w:gz") as tar:
        tar.add(out, arcname=out.name)
    partial.replace(archive)  # whoever fetches the archive mid-sitting gets a whole one


def run(list_path: Path, out: Path, machine: str | None, only: list[str], archive: Path | None) -> int:
    entries = read_list(list_path)
    unknown = sorted(set(only) - {name for name, _ in entries})
    if unknown:
        raise SystemExit(f"--only names no benchmark of {list_path}: {', '.join(unknown)}")
    out.mkdir(parents=True, exist_ok=True)
    facts = machine_facts()
    machine = machine or machine_name(facts["gpus"])
    (out / f"machine-{machine}.json").write_text(json.dumps(facts, indent=1) + "\n")
    failed = 0
    for name, command in entries:
        if only and name not in only:
            continue
        stem = f"{name}-{machine}"
        log = out / f"{stem}.log"
        if _finished(log):
            print(f"{name}: finished in an earlier run of this sitting, skipped", flush=True)
            continue
        if "{dir}" in command:
            (out / stem).mkdir(exist_ok=True)
        filled = (command.replace("{python}", shlex.quote(sys.executable))
                  .replace("{result}", shlex.quote(str(out / f"{stem}.json")))
                  .replace("{jsonl}", shlex.quote(str(out / f"{stem}.jsonl")))
                  .replace("{dir}", shlex.quote(str(out / stem))))
        earlier = [out / f"{m}-{machine}.json" for m in re.findall(r"\{of:([\w.-]+)\}", filled)]
        if missing := [str(e) for e in earlier if not e.exists()]:  # another machine's name, or the row never ran
            print(f"{name}: skipped: it goes on from {', '.join(missing)}, which this sitting's OUT lacks on this "
                  f"machine ({machine})", flush=True)
            failed += 1
            continue
        filled = re.sub(r"\{of:([\w.-]+)\}", lambda m: shlex.quote(str(out / f"{m[1]}-{machine}.json")), filled)
        started = time.monotonic()
        with log.open("w") as f:
            f.write(f"$ {filled}\n")
            f.flush()
            code = subprocess.run(["bash", "-c", filled], cwd=REPO, stdout=f, stderr=subprocess.STDOUT,
                                  env={**os.environ, "PYTHONUNBUFFERED": "1"}).returncode
            f.write(f"{DONE} {code}\n")
        failed += code != 0
        said = _headline(out / f"{stem}.json") or _last_line(log)
        line = f"{name:28} exit {code:<3} {time.monotonic() - started:7.0f} s  {said}"
        with (out / SUMMARY).open("a") as f:
            f.write(line + "\n")
        print(line, flush=True)
        if archive:
            pack(out, archive)
    if archive:
        pack(out, archive)
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run a list's benchmarks in order")
    r.add_argument("list", type=Path, help="a list of `name: command` lines (bench/sittings/*.txt)")
    r.add_argument("--out", type=Path, required=True, help="the folder every result and log goes to")
    r.add_argument("--machine", help="the name results are filed under (default: the GPU's short name, or cpu)")
    r.add_argument("--only", nargs="+", default=[], metavar="NAME", help="run only these benchmarks of the list")
    r.add_argument("--pack", type=Path, help="write OUT as this .tgz after every benchmark")
    s = sub.add_parser("status", help="print what a sitting has done so far, and pack it")
    s.add_argument("out", type=Path)
    s.add_argument("--pack", type=Path)
    args = parser.parse_args()
    if args.command == "run":
        return run(args.list, args.out, args.machine, args.only, args.pack)
    summary = args.out / SUMMARY
    print(summary.read_text() if summary.exists() else "no benchmark has finished yet", end="")
    running = [log.name for log in sorted(args.out.glob("*.log")) if not _finished(log)]
    if running:
        print(f"under way: {', '.join(running)}")
    if args.pack:
        pack(args.out, args.pack)
    return 0


if __name__ == "__main__":
    sys.exit(main())
