"""The words a page says when the run store fails under it, and the escaping that keeps what a person typed from
being read as Markdown. No Streamlit here."""
from __future__ import annotations

import re

from tcore.store import StoreError, StoreReadOnly


def plain(text: str) -> str:
    """`text` as it was typed, for a string Streamlit renders as Markdown (toasts, captions, st.markdown): every
    ASCII punctuation mark backslash-escaped (CommonMark allows it for all of them), so a name such as
    `![x](http://host/a.png)` or `:red[big]` shows as typed rather than as an image the browser fetches, a
    link, a colour or LaTeX."""
    return re.sub(r"([!-/:-@\[-`{-~])", r"\\\1", text)


def store_trouble(e: Exception) -> str:
    """What a participant reads when the run store fails under a page: what happened, in a sentence, and who can
    mend it (the server's log has the traceback)."""
    text = str(e)
    if isinstance(e, StoreReadOnly):
        return (f"The lab's run store can only be read ({plain(e.reason)}): its runs can be looked at and compared, "
                "but no run can be started, changed or deleted in it. Tell the instructor.")
    if "not a SQLite" in text:  # not a store at all (its path names some other file): set-aside leaves it be
        return ("The lab's run store cannot be used right now: the file at its path is not a run store (not a SQLite "
                "database). Please tell the instructor: on the server, name another file for the store "
                "(COMPILE_LAB_DB, or --db) or move that file away; then reload the page.")
    # "malformed JSON" is one row's column, not the file (tcore.store.records reads such a row as unreadable)
    if ("malformed" in text and "malformed JSON" not in text) or "not a database" in text or "cut short" in text:
        # nothing mends it in place: a new store beside the damaged one, which is kept for whoever recovers it
        return ("The lab's run store cannot be used right now: its file is damaged. Please tell the instructor: on "
                "the server, `python -m tcore store set-aside` (with the server's COMPILE_LAB_DB, or --db naming the "
                "store) moves the damaged file aside, renamed and kept, and the lab starts a new, empty store; then "
                "reload the page.")
    if "full" in text:
        why = "the disk that holds it is full"
    elif "locked" in text:
        why = "another process holds it locked"
    else:
        why = text.split(": ", 1)[-1].rstrip(".") if isinstance(e, StoreError) else "SQLite could not use it"
    return (f"The lab's run store cannot be used right now: {plain(why)}. Runs already recorded are kept where "
            "they can be; tell the instructor (the server's log says more), then reload the page.")
