"""Does the worker's CPU-load reading see another process keeping a core busy, on this machine?

    python bench/cpu_load.py            # 2 s quiet, then 2 s beside a child process spinning one core

Reads tcore.worker.timing.CpuLoad (the figure a CPU run reports as busy_cores) over a window with nothing started
here, then over a window while a plain Python spin loop in another process holds one core. On an otherwise quiet
machine the second reads about 1.0 more than the first. What else runs on the machine shows in both, so this is a
check to read, not a test: the suite tests CpuLoad's arithmetic on recorded readings. Appends one line to
bench/results/cpu-load-<N>core.txt.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tcore.worker.timing import CpuLoad  # noqa: E402

SPIN = "import time\nend = time.time() + float(__import__('sys').argv[1])\nwhile time.time() < end: pass"


def window(seconds: float) -> float | None:
    load = CpuLoad()
    time.sleep(seconds)
    return load.other_cores()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=2.0, help="length of each window (default 2)")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / f"cpu-load-{os.cpu_count()}core.txt",
                        help="the result file to append to (default: bench/results/cpu-load-<N>core.txt)")
    args = parser.parse_args()

    quiet = window(args.seconds)
    spinner = subprocess.Popen([sys.executable, "-c", SPIN, str(args.seconds + 1.0)])
    try:
        time.sleep(0.5)  # the child's interpreter start is not spinning yet
        busy = window(args.seconds)
    finally:
        spinner.kill()
        spinner.wait()
    if quiet is None or busy is None:
        print("CpuLoad has no reading here (/proc/stat unreadable)")
        return 1
    line = (f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC  {os.cpu_count()} cores  quiet {quiet:.2f} cores busy  "
            f"beside one spinning core {busy:.2f}  difference {busy - quiet:+.2f} (about +1.00 expected)")
    print(line)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("a") as f:
        f.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
