"""What state a run is in, in words a page shows: its place in the queue and when it starts."""
from __future__ import annotations

from tcore.lab.scheduler import duration_words, wait_words


def queue_words(position: int | None, wait, waited_s: float | None) -> str:
    """'#2 in the queue · starts in about 40 s · waited 12 s': when it starts first; wait_words(wait)[1] says why."""
    place = f"#{position} in the queue" if position else "about to start"
    return f"{place} · {wait_words(wait)[0]} · waited {duration_words(waited_s)}"
