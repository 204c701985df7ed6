"""How long each way to a model's first result takes: eager, cold compile, warm caches, Mega-Cache, aot_compile,
AOTInductor (the start-up ladder, tcore.lab.ladder), one JSON file per model.

    python bench/startup_ladder.py --model captioner --preset tiny          # the CPU check (minutes on 2 cores)
    python bench/startup_ladder.py --model hf:gpt2 --model resnet50 --model flux   # on a GPU: practical defaults

Each rung runs in fresh processes (fresh Inductor and Triton caches where it says cold); a rung this torch or this
model cannot do is kept with its reason. Writes bench/results/startup-ladder-<model>-<machine>.json (machine: h100,
h200, cpu...) and prints the table.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tcore.lab import ladder  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ladder.add_arguments(parser, many_models=True)
    parser.add_argument("--out-dir", default=str(REPO / "bench" / "results"))
    args = parser.parse_args()
    models = args.models or ["captioner"]
    failed = 0
    for model in models:
        args.model = model
        spec_json = ladder.spec_from_args(args)
        result = ladder.ladder(spec_json, [r for r in args.rungs.split(",") if r], timeout_s=args.timeout)
        name = re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-")
        out = Path(args.out_dir) / f"startup-ladder-{name}-{result['machine']}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2))
        print(f"\n{model} on {result['device_name']} (torch {result['torch']}): {out}")
        print(ladder.text_table(result), flush=True)
        failed += any("failed" in s for s in result["steps"].values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
