"""`python -m tcore.worker.describe file:PATH.py ANSWER.json`: read a model file as a worker does, and write its card.

The app and the command line never import a model file (its code could reach what they hold): when one needs a
file's presets, title or parameter counts before any run of it, it starts this, in the lab's folder with the
environment a worker gets (tcore.lab.outputs.model_files.describe). One JSON object in ANSWER.json (not on stdout,
which is the file's own): {"card": {...}} or {"error": "what is wrong with the file"}.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not argv[0].startswith("file:"):
        print("usage: python -m tcore.worker.describe file:PATH.py ANSWER.json", file=sys.stderr)
        return 2
    answer = Path(argv[1])
    try:
        from sample_models.sources import file_models

        file_models.allow_imports()
        card = file_models.SOURCES_FILE.describe(argv[0].removeprefix("file:"))
    except Exception as e:  # noqa: BLE001 (whatever the file raises is what is wrong with it, said in one line)
        answer.write_text(json.dumps({"error": f"{e}" if isinstance(e, ValueError) else f"file:{argv[0][5:]} could not "
                                      f"be read: {type(e).__name__}: {e}"}))
        return 1
    answer.write_text(json.dumps({"card": card}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
