"""Do first imports from several threads at once fail, through the lab's own entry points or bare?

Each trial is a fresh process whose threads wait at one barrier, then at once: two do what the Run page does in each
run (its feature checks, then torchvision:resnet18's entry: Streamlit starts a person's next run in a new thread while
the one it replaces finishes), and the others check torch's compile features, list torchvision's models, read
timm:resnet18's entry, and check the AOTInductor feature (torch._inductor). `--bare` does
the same imports without the lab's lock (sample_models.first_imports), as the app did before it. A trial fails when
any thread raises or a feature this torch has reads as missing.

    python bench/import_race.py --trials 12           # through the lab: 0 failures expected
    python bench/import_race.py --trials 12 --bare    # what the lock prevents
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

TRIAL = r"""
import json, sys, threading, traceback
import torch
bare = sys.argv[1] == "bare"
from tcore.host import features
import sample_models

failures = []
start = threading.Barrier(6)

def feature_table():
    checks = {f.name: (f.detect() if bare else f.available) for f in features.FEATURES.values()}
    # this torch has set_stance and the graph-break registry: reading them missing is the race's silent failure
    if not (checks["set_stance"] and checks["graph_break_registry"]):
        failures.append(f"features read missing: {checks}")

def torchvision_names():
    if bare:
        import torchvision
        torchvision.models.list_models(module=torchvision.models)
    else:
        sample_models.catalog("torchvision")

def timm_entry():
    if bare:
        import timm
        timm.create_model("resnet18", pretrained=False)
    else:
        sample_models.get("timm:resnet18")

def page():  # what the Run page does in each run: its feature checks, then the model picked (torchvision's)
    for f in features.FEATURES.values():
        f.detect() if bare else f.available
    if bare:
        import torchvision
        torchvision.models.get_model("resnet18", weights=None)
    else:
        sample_models.get("torchvision:resnet18")

def aoti():
    f = features.FEATURES["aoti"]
    f.detect() if bare else f.available

def thread(fn):
    def run():
        start.wait()
        try:
            fn()
        except BaseException as e:
            failures.append(f"{fn.__name__}: {type(e).__name__}: {e}".splitlines()[0][:300])
    return threading.Thread(target=run)

threads = [thread(fn) for fn in (page, page, feature_table, torchvision_names, timm_entry, aoti)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps(failures))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=12, help="fresh processes (default 12)")
    parser.add_argument("--bare", action="store_true", help="the same imports without the lab's lock")
    parser.add_argument("--out", type=Path, help="write the trials as JSON here")
    args = parser.parse_args()
    rows = []
    for i in range(args.trials):
        began = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", TRIAL, "bare" if args.bare else "lab"], cwd=ROOT,
                              capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        lines = done.stdout.strip().splitlines()
        failures = json.loads(lines[-1]) if done.returncode == 0 and lines else [f"exit {done.returncode}: "
                                                                                  f"{done.stderr.strip()[-300:]}"]
        rows.append({"trial": i + 1, "s": round(time.perf_counter() - began, 1), "failures": failures})
        print(f"trial {i + 1}: {'ok' if not failures else 'FAILED: ' + ' | '.join(failures)}", flush=True)
    failed = sum(1 for r in rows if r["failures"])
    print(f"{'bare' if args.bare else 'lab'}: {failed} of {len(rows)} trials failed")
    if args.out:
        args.out.write_text(json.dumps({"bare": args.bare, "trials": rows, "failed": failed}, indent=1))


if __name__ == "__main__":
    main()
