"""`python -m tcore.worker.describe file:PATH.py`: read a model file as a worker does, and print its card.

The app and the command line never import a model file (its code could reach what they hold): when one needs a
file's presets, title or parameter counts before any run of it, it starts this, in the lab's folder with the
environment a worker gets (tcore.lab.outputs.model_cards.describe). One JSON line on stdout: {"card": {...}} or
{"error": "what is wrong with the file"}.
"""
from __future__ import annotations

import json
import sys


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not argv[0].startswith("file:"):
        print(json.dumps({"error": "usage: python -m tcore.worker.describe file:PATH.py"}))
        return 2
    try:
        from sample_models.sources import file_models

        file_models.allow_imports()
        card = file_models.SOURCES_FILE.describe(argv[0].removeprefix("file:"))
    except Exception as e:  # noqa: BLE001 (whatever the file raises is what is wrong with it, said in one line)
        print(json.dumps({"error": f"{e}" if isinstance(e, ValueError) else f"file:{argv[0][5:]} could not be "
                          f"read: {type(e).__name__}: {e}"}))
        return 1
    print(json.dumps({"card": card}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
