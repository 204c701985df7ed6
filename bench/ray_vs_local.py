"""Does a run through a Ray cluster read the same as a local one? On one GPU, the same run through local worker
processes and through a local Ray cluster.

    python bench/ray_vs_local.py --wheel .ray/ray-2.58.0-cp312-cp312-manylinux2014_x86_64.whl --out /tmp/ray-vs-local
    COMPILE_LAB_RAY_WHEEL=.ray/ray-....whl python bench/ray_vs_local.py --model captioner --pairs 3

Ray is installed from the wheel first if it is missing (offline: its dependencies are looked for in
the wheel's folder, then among what is installed). Then, in this one process, runs alternate
local, Ray, Ray, local, ... (`--pairs` of each), every one cold (fresh caches, fresh worker process),
submitted as the command line does (runs.execute, no spare workers): click to result is submit to
stored record. The local cluster is started before the first Ray run (ray.init with the GPUs this
machine has), so its start-up is not counted; each Ray run still pays for its own Ray worker process.

Pass: the medians of each figure (eager and compiled samples/s, speedup) within 2% of each other,
and click to result within 3 s. Writes ray_vs_local.json (every run, the medians, the verdict) to --out.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
WHEEL_ENV = "COMPILE_LAB_RAY_WHEEL"
FIGURES = ("eager_samples_per_s", "compiled_samples_per_s", "speedup")
FIGURES_WITHIN = 0.02
CLICK_TO_RESULT_WITHIN_S = 3.0


def ensure_ray(wheel: str | None) -> str:
    try:
        import ray
        return f"ray {ray.__version__} (already installed)"
    except ImportError:
        pass
    if not wheel:
        raise SystemExit(f"Ray is not installed: pass --wheel PATH or set {WHEEL_ENV}")
    wheel_path = Path(wheel).resolve()
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--find-links", str(wheel_path.parent),
                    str(wheel_path)], check=True)
    import ray
    return f"ray {ray.__version__} (installed from {wheel_path.name})"


def one_run(exp, store, mode: str) -> dict:
    from tcore.lab.launch import cluster
    from tcore.lab.run import runs

    if mode == "ray":
        os.environ[cluster.ADDRESS_ENV] = "local"
    else:
        os.environ.pop(cluster.ADDRESS_ENV, None)
    t0 = time.time()
    record = runs.execute(exp, store)
    click_to_result_s = time.time() - t0
    if record.status != "finished":
        raise SystemExit(f"{mode} run {record.id} failed: {record.error}")
    return {"mode": mode, "run_id": record.id, "click_to_result_s": round(click_to_result_s, 2),
            "slot": record.device_slot, "gpu_uuid": record.env.get("gpu_uuid"),
            "ray_node_id": record.env.get("ray_node_id"), "compile_s": record.result.get("compile_s"),
            **{k: record.result.get(k) for k in FIGURES}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wheel", default=os.environ.get(WHEEL_ENV), help=f"the ray wheel (or ${WHEEL_ENV})")
    parser.add_argument("--model", default="resnet50",
                        help="resnet50 (steady figures) or captioner (launch-bound, noisy)")
    parser.add_argument("--device", default="cuda", help="cpu: a dry run of this script on a machine without a GPU")
    parser.add_argument("--backend", default="inductor", help="eager: a quick dry run (Dynamo only, nothing to time)")
    parser.add_argument("--pairs", type=int, default=2, help="runs of each mode, alternating L R R L ...")
    parser.add_argument("--out", type=Path, default=Path(tempfile.mkdtemp(prefix="ray-vs-local-")))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    installed = ensure_ray(args.wheel)
    os.environ.setdefault("COMPILE_LAB_CACHE_DIR", str(args.out / "cache"))

    from tcore.experiment.device import practical_defaults
    from tcore.experiment.spec import Experiment
    from tcore.lab.launch import cluster
    from tcore.store import RunStore

    exp = Experiment(model=args.model, device=args.device, cache="cold", backend=args.backend,
                     **practical_defaults(args.model, args.device, "inference"))
    store = RunStore(args.out / "runs.sqlite")
    os.environ[cluster.ADDRESS_ENV] = "local"
    print(f"{installed}; starting a local Ray cluster ...", flush=True)
    print(f"  its slots: {cluster.slots()}", flush=True)

    order = [m for i in range(args.pairs) for m in (("local", "ray") if i % 2 == 0 else ("ray", "local"))]
    rows = []
    for mode in order:
        rows.append(one_run(exp, store, mode))
        r = rows[-1]
        print(f"  {mode:5s}  click to result {r['click_to_result_s']:6.1f} s  compile {r['compile_s'] or 0:6.1f} s  "
              + "  ".join(f"{k} {r[k]:.4g}" for k in FIGURES), flush=True)

    medians = {mode: {k: statistics.median(r[k] for r in rows if r["mode"] == mode)
                      for k in (*FIGURES, "click_to_result_s", "compile_s")} for mode in ("local", "ray")}
    apart = {k: abs(medians["ray"][k] / medians["local"][k] - 1) for k in FIGURES}
    click_apart_s = abs(medians["ray"]["click_to_result_s"] - medians["local"]["click_to_result_s"])
    verdict = {"figures_apart": apart, "figures_within_2pct": all(v <= FIGURES_WITHIN for v in apart.values()),
               "click_to_result_apart_s": click_apart_s,
               "click_to_result_within_3s": click_apart_s <= CLICK_TO_RESULT_WITHIN_S}
    summary = {"experiment": exp.to_dict(), "ray": installed, "runs": rows, "medians": medians, "verdict": verdict}
    (args.out / "ray_vs_local.json").write_text(json.dumps(summary, indent=1, default=str))
    for k in FIGURES:
        print(f"{k:24s} local {medians['local'][k]:10.4g}  ray {medians['ray'][k]:10.4g}  apart {apart[k]:.1%}")
    print(f"click to result (s)      local {medians['local']['click_to_result_s']:10.1f}  "
          f"ray {medians['ray']['click_to_result_s']:10.1f}  apart {click_apart_s:.1f} s")
    print(f"PASS figures within 2%: {verdict['figures_within_2pct']}; "
          f"click to result within 3 s: {verdict['click_to_result_within_3s']}  -> {args.out / 'ray_vs_local.json'}")
    return 0 if verdict["figures_within_2pct"] and verdict["click_to_result_within_3s"] else 1


if __name__ == "__main__":
    sys.exit(main())
