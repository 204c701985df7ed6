"""A run as the store holds it, and the small helpers every part of the store shares.

A record's result is returned as it is stored: results are written in today's figures, and records stored before
them are rewritten once by the lab (tcore.lab.outputs.stored_results), which knows the figures.

A run's JSON columns are read here and only here (json_object): a row whose spec, environment, result or error is not a
JSON object (written by hand, or by a tool gone wrong) is a record marked unreadable, with the reason in words, and
every other run reads as before; one such row never breaks a listing for everyone.
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
    # why the row cannot be read ("its spec column is not JSON (...)"), or None: an unreadable run's columns that are
    # not JSON read as {}, so nothing but its plain columns (id, status, label, owner, times) says anything of it
    unreadable: str | None = None

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> RunRecord:
        columns, wrong = {}, []
        for column in JSON_COLUMNS:
            try:
                columns[column] = json_object(row[column], column)
            except Unreadable as e:
                columns[column] = {}
                wrong.append(e)
        return cls(id=row["id"], status=row["status"], created_at=row["created_at"], label=row["label"],
                   spec=upgrade(columns["spec"]), finished_at=row["finished_at"], device=row["device"],
                   error_kind=row["error_kind"], env=columns["env"], result=columns["result"], error=columns["error"],
                   owner=row["owner"], device_slot=row["device_slot"], queued_at=row["queued_at"],
                   started_at=row["started_at"], timeout_s=row["timeout_s"], sweep_id=row["sweep_id"],
                   sweep_index=row["sweep_index"], held=bool(row["held"]),
                   unreadable="; ".join(str(e) for e in wrong) or None)


def unreadable_words(record: RunRecord) -> str:
    """What a listing or a page says of a run whose row cannot be read, and how it goes: the Compare page's delete
    reads only its plain columns (its status, its owner), so it removes it as any run."""
    return (f"run {record.id} cannot be read: {record.unreadable}. Nothing else of it can be shown; its owner or the "
            "instructor can delete it on the Compare page (status \"unreadable\", One run in detail, Delete this run)")


# A run's JSON columns; a spec is always written, the others only once there is something in them (NULL reads as {}).
JSON_COLUMNS = ("spec", "env", "result", "error")


class Unreadable(ValueError):
    """A run's JSON column that cannot be read: the message says which, and why."""


def json_object(text: str | None, column: str) -> dict[str, Any]:
    """A run's JSON column `column` (one of JSON_COLUMNS) as stored, read: the one place that decides whether it can
    be read. Raises Unreadable, naming the column, where it is not a JSON object (a spec has no default)."""
    if not text and column != "spec":  # NULL (or an empty string, as ever): nothing in it yet
        return {}
    try:
        value = json.loads(text)
    except (TypeError, ValueError) as e:  # ValueError: json.JSONDecodeError, and text that is not UTF-8
        raise Unreadable(f"its {column} column is not JSON ({e})") from None
    if not isinstance(value, dict):
        raise Unreadable(f"its {column} column is JSON but not an object (it holds a {type(value).__name__})")
    return value


def json_field(column: str, path: str) -> str:
    """SQL for json_extract(column, path) that reads NULL where the column is not JSON, instead of failing the whole
    query ("malformed JSON"): a query over runs leaves an unreadable run out (RunRecord.from_row says why) and reads
    every other. CASE evaluates its branch only where json_valid holds."""
    return f"(CASE WHEN json_valid({column}) THEN json_extract({column}, '{path}') END)"


def new_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]


def to_json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, default=str)
