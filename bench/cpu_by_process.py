"""Where a command's CPU goes, by kind of process: every process's CPU time read from /proc twice a second while the
command runs, summed by what the process is (test worker, fork server, forked run, g++, Chromium, app server...).

    python bench/cpu_by_process.py -- .venv/bin/python -m pytest -n 2 --dist loadfile -m browser

Linux only. A process that lives under half a second may be missed, and one that started before the command is
counted whole (its CPU since it started): run it on a machine doing nothing else. docs/testing.md has what it found
for `make test` on the 2-core machine.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections import Counter

TICK = os.sysconf("SC_CLK_TCK")


def read_all(seen: dict[tuple[int, int], dict]) -> None:
    """Each process's CPU seconds so far, by (pid, start time), with its command line and parent."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
            fields = stat[stat.rindex(")") + 2:].split()
            key = (int(name), int(fields[19]))
            cpu = (int(fields[11]) + int(fields[12])) / TICK
            if key not in seen:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
                seen[key] = {"pid": int(name), "ppid": int(fields[1]), "cmd": cmd, "cpu": cpu}
            seen[key]["cpu"] = max(seen[key]["cpu"], cpu)
        except (OSError, ValueError, IndexError):
            continue  # ended between listing and reading


def kind(p: dict, parents: dict[int, dict]) -> str:
    cmd, parent = p["cmd"], parents.get(p["ppid"], {}).get("cmd", "")
    exe = cmd.split(" ")[0].rsplit("/", 1)[-1]
    if "tcore.worker.forkserver" in cmd:
        return "forked run or spare" if "tcore.worker.forkserver" in parent else "fork server"
    if "chrom" in exe or "chrome" in cmd.split(" ")[0]:
        return "chromium"
    if exe in ("cc1plus", "g++", "gcc", "as", "ld", "collect2"):
        return "g++"
    rules = [("streamlit run", "app server"), ("playwright", "playwright driver"),
             ("snippet_probe", "copy-as-code probe"), ("ladder_rung", "start-up ladder rung"),
             ("-m tcore.worker", "worker, started on its own"), ("-m tcore ", "tcore command line"), ("ray", "Ray"),
             ("execnet", "pytest worker"), ("import sys;exec(eval(sys.stdin.readline()))", "pytest worker"),
             ("pytest", "pytest")]
    for needle, name in rules:
        if needle in cmd:
            return name
    if re.search(r"\.py\b", cmd) and "python" in exe:
        return "a test's own Python program"
    if exe.startswith("python"):
        return "a test's python -c"
    return exe or "(unnamed)"


def main(command: list[str]) -> int:
    seen: dict[tuple[int, int], dict] = {}
    read_all(seen)
    before = {key: p["cpu"] for key, p in seen.items()}  # what ran before the command is not its
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.5):
            read_all(seen)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.monotonic()
    code = subprocess.call(command)
    done.set()
    sampler.join()
    read_all(seen)
    parents = {p["pid"]: p for p in seen.values()}
    totals, counts = Counter(), Counter()
    for key, p in seen.items():
        if p["pid"] == os.getpid():
            continue
        used = p["cpu"] - before.get(key, 0.0)
        if used > 0:
            totals[kind(p, parents)] += used
            counts[kind(p, parents)] += 1
    wall = time.monotonic() - started
    print(f"\n{wall:.0f} s, {sum(totals.values()):.0f} CPU-s on {os.cpu_count()} cores "
          f"({100 * sum(totals.values()) / wall / (os.cpu_count() or 1):.0f}% busy); exit {code}")
    for name, cpu in totals.most_common():
        print(f"{cpu:8.1f} CPU-s  {counts[name]:5d} processes  {name}")
    return code


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        sys.exit(__doc__)
    sys.exit(main(args))
