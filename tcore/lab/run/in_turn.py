"""Runs queued in turn: several runs pressed at once by one person, more than the lab's bound on their waiting runs
lets in, go into the queue as that person's waiting runs start, fed from this process whether or not a page is open.

A page that fed them itself (a fragment of the tab that pressed) fed them only while that tab drew that tab: on the
walk the fifth of Diagnose's five strategies went in 564 s after the press, the queue standing empty for two minutes
meanwhile, because the page was busy elsewhere. Here a thread of the lab feeds every batch each FEED_S, and a page's
draw may feed at once too (feed); both take the batch's lock, so no run is queued twice.
"""
from __future__ import annotations

import secrets
import sqlite3
import threading
from dataclasses import dataclass, field

from tcore.experiment.spec import Experiment, SpecError
from tcore.lab.run import runs
from tcore.store import RunStore, StoreError

FEED_S = 1.0  # how often held runs are offered the places their person's runs freed (a place frees as a run starts)
KEPT = 200  # batches fed to the end that are still kept for a page to read its ids from


@dataclass
class _Batch:
    store: RunStore
    owner: str
    timeout_s: float | None
    held: list[Experiment]
    queued: list[str] = field(default_factory=list)
    refusal: tuple[str, str] | None = None  # (the run's label, why the lab refused it): the feed stopped there
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass(frozen=True)
class InTurn:
    """A batch as a page draws it: the ids queued so far (in order), the runs still held, and the run the lab refused
    with why (the feed stopped there)."""
    queued: tuple[str, ...]
    held: tuple[Experiment, ...]
    refusal: tuple[str, str] | None


_BATCHES: dict[str, _Batch] = {}
_LOCK = threading.Lock()
_FEEDER: list[threading.Thread] = []  # the one feeding thread of this process, while a batch holds runs
_WAKE = threading.Event()


def start(experiments: list[Experiment], store: RunStore, *, owner: str, timeout_s: float | None = None) -> str:
    """Queue what `owner`'s bound lets in now and hold the rest, fed in order as places free; returns the batch's
    token (view() reads it). Raises SpecError when the first run is refused, as a single queue() would."""
    token = secrets.token_hex(8)
    batch = _Batch(store, owner, timeout_s, list(experiments))
    _feed(batch)
    if not batch.queued and batch.refusal:
        raise SpecError(batch.refusal[1])
    with _LOCK:
        for old in [t for t, b in _BATCHES.items() if not b.held][:-KEPT]:  # long fed: no page asks any more
            del _BATCHES[old]
        _BATCHES[token] = batch
        if batch.held and not any(t.is_alive() for t in _FEEDER):
            _FEEDER[:] = [threading.Thread(target=_feed_all, name="queue-in-turn", daemon=True)]
            _FEEDER[0].start()
    _WAKE.set()
    return token


def feed(token: str) -> InTurn | None:
    """Feed the batch now (a page that draws it need not wait for the thread), then view it."""
    if (batch := _BATCHES.get(token)) is not None:
        _feed(batch)
    return view(token)


def view(token: str) -> InTurn | None:
    """The batch as it is now; None for a token this process does not know (a restarted server)."""
    if (batch := _BATCHES.get(token)) is None:
        return None
    with batch.lock:
        return InTurn(tuple(batch.queued), tuple(batch.held), batch.refusal)


def let_go(token: str) -> int:
    """Queue no more of the batch: its person cancels what was pressed at once (the runs already queued are cancelled
    as any); how many held runs were let go."""
    if (batch := _BATCHES.get(token)) is None:
        return 0
    with batch.lock:
        held = len(batch.held)
        batch.held.clear()
    return held


def _person(owner: str) -> str | None:
    """What of an owner id stays with its person through a rename: the tag and the secret ("3f9a.SECRET" of both
    guest-3f9a.SECRET and ada~3f9a.SECRET); None for an id without them."""
    shown, dot, secret = owner.rpartition(".")
    if not dot:
        return None
    return f"{shown.split('~')[1] if '~' in shown else shown.removeprefix('guest-')}.{secret}"


def _named_now(batch: _Batch) -> str:
    """The batch's owner as named now: a rename (the sidebar's name box) moves a person's runs to a new id that keeps
    the old one's tag and secret (ada~3f9a.SECRET from guest-3f9a.SECRET), and the runs still held are theirs too,
    never left under an id that is no longer theirs, which they could not cancel."""
    if (person := _person(batch.owner)) is None:
        return batch.owner
    try:
        return batch.store.people.owner_ending(person) or batch.owner
    except (sqlite3.Error, StoreError):  # the feed's own start says what is wrong with the store
        return batch.owner


def _follow_a_rename_meanwhile(batch: _Batch, run_id: str, used: str) -> None:
    """A rename that came between the feed's reading of the name and its run's insert moved the person's runs before
    this one was there: it went in under the id they had left. Move it, and only it, where the rename moved the rest
    (a rename after the insert moved it already)."""
    if (person := _person(used)) is None:
        return
    try:
        now = batch.store.people.renamed_from(used, person)
        if now is not None and now != used:
            batch.store.people.give_run(run_id, now)
            batch.owner = now
    except (sqlite3.Error, StoreError) as e:  # the run stays under the old id: said, for whoever reads the log
        print(f"compile-lab: run {run_id} queued under {used!r}, renamed meanwhile: {type(e).__name__}: {e}",
              flush=True)


def _feed(batch: _Batch) -> None:
    """Queue as many held runs as the owner's places allow, in order; a refusal other than a full queue ends it."""
    with batch.lock:
        if batch.held:
            batch.owner = _named_now(batch)
        while batch.held and runs.places_left(batch.owner, batch.store)[0] > 0:
            exp = batch.held[0]
            used = batch.owner
            try:
                batch.queued.append(runs.start(exp, batch.store, owner=used, timeout_s=batch.timeout_s,
                                               from_app=True).run_id)
                _follow_a_rename_meanwhile(batch, batch.queued[-1], used)
            except SpecError as e:
                if runs.places_left(batch.owner, batch.store)[0] == 0:
                    break  # another tab of this person took the place meanwhile: the next feed tries again
                batch.refusal = (exp.label, str(e))
                batch.held.clear()
                break
            batch.held.pop(0)


def _feed_all() -> None:
    """The feeding thread: every FEED_S, every batch that holds runs; it ends once none does."""
    while True:
        _WAKE.wait(FEED_S)
        _WAKE.clear()
        with _LOCK:
            holding = [b for b in _BATCHES.values() if b.held]
            if not holding:
                _FEEDER.clear()
                return
        for batch in holding:
            try:
                _feed(batch)
            except Exception as e:  # a locked store: the next feed tries again, the page shows the queue's trouble
                print(f"compile-lab: feeding held runs: {type(e).__name__}: {e}", flush=True)
