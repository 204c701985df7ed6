"""What a worker wrote down about a model file (its card: title, presets, parameter counts), so that processes
that never import one (the app, the command line) can show and check its runs."""
from __future__ import annotations

import json
import time

from tcore.store.connection import Part


class ModelCards(Part):
    def save_model_card(self, card: dict) -> None:
        with self._write() as db:
            db.execute("INSERT OR REPLACE INTO model_cards (model, card, described_at) VALUES (?,?,?)",
                       (card["name"], json.dumps(card), time.time()))

    def model_card(self, model: str) -> dict | None:
        with self._connect() as db:
            row = db.execute("SELECT card FROM model_cards WHERE model=?", (model,)).fetchone()
        return json.loads(row[0]) if row else None

    def model_specs(self, model: str, limit: int = 200) -> list[dict]:
        """The settings of the latest runs of `model` (a card can be pieced together from them when no worker of
        this version of the lab described the file)."""
        with self._connect() as db:
            return [json.loads(r[0]) for r in db.execute(
                "SELECT spec FROM runs WHERE model=? ORDER BY created_at DESC LIMIT ?", (model, limit))]
