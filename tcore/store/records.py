"""A run as the store holds it, and the small helpers every part of the store shares.

A record's result is returned as it is stored: results are written in today's figures, and records stored before
them are rewritten once by the lab (tcore.lab.outputs.stored_results), which knows the figures.
"""
from __future__ import annotations

import json
import sqlite3
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from tcore.experiment.spec import upgrade


@dataclass
class RunRecord:
    id: str
    status: str
    created_at: float
    label: str
    spec: dict[str, Any]
    finished_at: float | None = None
    device: str | None = None
    error_kind: str | None = None
    env: dict[str, Any] = field(default_factory=dict)
    result: dict[str, Any] = field(default_factory=dict)
    error: dict[str, Any] = field(default_factory=dict)
    owner: str | None = None
    device_slot: str | None = None
    queued_at: float | None = None
    started_at: float | None = None
    timeout_s: float | None = None
    sweep_id: str | None = None
    sweep_index: int | None = None
    held: bool = False

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> RunRecord:
        return cls(id=row["id"], status=row["status"], created_at=row["created_at"], label=row["label"],
                   spec=upgrade(json.loads(row["spec"])), finished_at=row["finished_at"], device=row["device"],
                   error_kind=row["error_kind"], env=json.loads(row["env"] or "{}"),
                   result=json.loads(row["result"] or "{}"), error=json.loads(row["error"] or "{}"),
                   owner=row["owner"], device_slot=row["device_slot"], queued_at=row["queued_at"],
                   started_at=row["started_at"], timeout_s=row["timeout_s"], sweep_id=row["sweep_id"],
                   sweep_index=row["sweep_index"], held=bool(row["held"]))


def new_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]


def to_json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, default=str)
