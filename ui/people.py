"""Who is at the keyboard: a participant's lasting identity, and whether this session is the instructor's.

A participant is an owner id kept in the page's address (?me=ada~3f9a.<secret>), in the session and in a
cookie, so a refresh, a bookmark or a second tab of the same browser keeps their runs theirs. It starts
as a guest id; naming yourself (the sidebar) renames it and moves your runs with you. The id ends in a
random secret (64 bits) that no page shows, not even in part: what pages show (a name, `guest 3f9a`) is
not enough to act as someone, so a second browser cannot rebuild another person's id from their name
tag. Anyone who has the whole address still is that participant: it is a bookmark, not a login. The
instructor's passcode (tcore.lab.limits.instructor_passcode) is what guards the actions that touch other
people's runs; once typed, a random token in a cookie keeps the browser's tabs opened or reloaded later
unlocked, from the same address, until Lock, the server's restart or UNLOCK_HOURS (tokens live in its memory).
"""
from __future__ import annotations

import re
import secrets
import time
from typing import NamedTuple

import streamlit as st

from tcore.lab import limits
from tcore.store import RunStore, StoreError

PARAM = "me"  # the query parameter that carries the owner id
# name tag (shown) . secret (never shown): guest-3f9a.0123456789abcdef, ada~3f9a.0123456789abcdef
_OWNER = re.compile(r"^(guest-[0-9a-f]{4}|[a-z0-9][a-z0-9-]{0,23}~[0-9a-f]{4})\.[0-9a-f]{16}$")
# ids made before they carried a secret: still shown by name on their runs, never accepted as anyone's identity
_OLD_OWNER = re.compile(r"^(guest-[0-9a-f]{6}|[a-z0-9][a-z0-9-]{0,23}~[0-9a-f]{4})$")


COOKIE = "compile_lab_me"  # the same id, for a new tab of the same browser opened without it in the address
# The instructor's unlock, for the browser's other tabs and for a session that starts afresh (a reload, or a reconnect
# the server did not match to its old session): a random token, valid only in this server process, revoked by Lock.
INSTRUCTOR_COOKIE = "compile_lab_instructor"
UNLOCK_HOURS = 12  # a workshop's day: a token older than this unlocks nothing


class _Unlock(NamedTuple):
    attempt: str  # the passcode typed (a changed passcode locks it again)
    address: str | None  # the network address it was typed from
    until: float  # time.time() after which it unlocks nothing


_UNLOCKED: dict[str, _Unlock] = {}  # token -> its unlock, in this server process only


def me() -> str:
    """This participant's owner id: from the address, else the session, else the browser's cookie; a new
    guest id the first time.

    Written back into the address on every page, since switching pages drops query parameters.
    """
    asked = st.query_params.get(PARAM)
    remembered = cookie(COOKIE)
    owner = next((o for o in (asked, st.session_state.get("owner"), remembered) if o and _OWNER.match(o)), None)
    if not owner:
        owner = new_guest()
    st.session_state.owner = owner
    if asked != owner:
        st.query_params[PARAM] = owner
    return owner


def cookie(name: str) -> str | None:
    """The browser's cookie `name` as it was when this tab connected (Streamlit reads them then)."""
    return st.context.cookies.get(name) if st.context.cookies else None


def new_guest() -> str:
    return f"guest-{secrets.token_hex(2)}.{secrets.token_hex(8)}"


def owner_for(name: str, current: str) -> str | None:
    """The owner id for a chosen name, keeping this participant's tag (two Adas stay apart) and secret; None if
    the name has no letters or digits."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.strip().lower()).strip("-")[:24].strip("-")
    if not slug:
        return None
    shown, secret = current.rsplit(".", 1)
    tag = shown.split("~")[1] if "~" in shown else shown.removeprefix("guest-")
    return f"{slug}~{tag}.{secret}"


def plain(text: str) -> str:
    """`text` as it was typed, for a string Streamlit renders as Markdown (toasts, captions, st.markdown): every
    ASCII punctuation mark backslash-escaped (CommonMark allows it for all of them), so a name such as
    `![x](http://host/a.png)` or `:red[big]` shows as typed rather than as an image the browser fetches, a
    link, a colour or LaTeX."""
    return re.sub(r"([!-/:-@\[-`{-~])", r"\\\1", text)


def display_name(owner: str | None) -> str:
    """How a run's owner reads on a page: 'ada', 'guest 3f9a', 'the command line or a sweep', 'another session'."""
    if not owner:
        return "another session"
    if _OWNER.match(owner) or _OLD_OWNER.match(owner):
        return f"guest {owner[6:10]}" if owner.startswith("guest-") else owner.split("~")[0]
    if ":" in owner:  # tcore.lab.scheduler.Proc.name, "host:pid": queued without a browser session
        return "the command line or a sweep"
    return "another session"  # an older session id


def store_trouble(e: Exception) -> str:
    """What a participant reads when the run store fails under a page: what happened, in a sentence, and who can
    mend it (the server's log has the traceback)."""
    text = str(e)
    if "full" in text:
        why = "the disk that holds it is full"
    elif "malformed" in text or "not a database" in text or "cut short" in text or "not a SQLite" in text:
        why = "its file is damaged"
    elif "locked" in text:
        why = "another process holds it locked"
    else:
        why = text.split(": ", 1)[-1].rstrip(".") if isinstance(e, StoreError) else "SQLite could not use it"
    return (f"The lab's run store cannot be used right now: {plain(why)}. Runs already recorded are kept where "
            "they can be; tell the instructor (the server's log says more), then reload the page.")


def is_instructor() -> bool:
    """Whether this session unlocked the instructor's actions, or another of this browser did (the cookie) and its
    token still unlocks (_unlocked_by); and the passcode still is what it was."""
    if (held := st.session_state.get("instructor_token")) is not None and _unlocked_by(held) is None:
        st.session_state.pop("instructor", None)  # locked meanwhile (Lock in another tab), or its time is up
        st.session_state.pop("instructor_token", None)
    attempt = st.session_state.get("instructor")
    if not attempt and (token := cookie(INSTRUCTOR_COOKIE)) and (attempt := _unlocked_by(token)):
        st.session_state.instructor, st.session_state.instructor_token = attempt, token
    return bool(attempt) and limits.is_instructor(attempt)


def _unlocked_by(token: str) -> str | None:
    """The passcode `token` was issued for, while it still unlocks: issued by this process to this network address
    less than UNLOCK_HOURS ago, for the passcode in force; a token that no longer unlocks is forgotten. The address
    keeps a token copied out of the browser (another web server on this host is sent the cookie too: cookies do not
    tell ports apart) from unlocking anywhere else."""
    if (held := _UNLOCKED.get(token)) is None:
        return None
    if time.time() > held.until or held.address != _address() or not limits.is_instructor(held.attempt):
        _UNLOCKED.pop(token, None)
        return None
    return held.attempt


def _address() -> str | None:
    """The session's network address, None where Streamlit knows none (AppTest's context is a stand-in object)."""
    address = st.context.ip_address
    return address if isinstance(address, str) else None


def unlock(attempt: str) -> None:
    """The passcode was right: this session is the instructor's, and so are the browser's tabs opened or reloaded
    from now on (the cookie, written by identity_sidebar on the next page drawn)."""
    token = secrets.token_urlsafe(24)
    _UNLOCKED[token] = _Unlock(attempt, _address(), time.time() + UNLOCK_HOURS * 3600)
    st.session_state.instructor, st.session_state.instructor_token = attempt, token
    st.session_state.instructor_cookie = token


def lock() -> None:
    """Give the instructor's actions up: in this session and in every other one unlocked on this app (there is one
    instructor; a tab still open learns it at its next redraw), and empty this browser's cookie."""
    _UNLOCKED.clear()
    st.session_state.pop("instructor_token", None)
    st.session_state.pop("instructor", None)
    st.session_state.instructor_cookie = ""


def identity_sidebar(store: RunStore) -> None:
    """The sidebar: your name (your runs follow it), and who is instructor."""
    owner = me()
    with st.sidebar:
        name = st.text_input("Your name", value=display_name(owner) if "~" in owner else "",
                             placeholder="e.g. Ada", key="people_name", max_chars=24,
                             help="Your runs are kept under this name and this page's address: a refresh, a "
                                  "bookmark or a second tab opened from it keeps them yours.")
        if name and (new := owner_for(name, owner)) and new != owner:
            moved = store.rename_owner(owner, new)
            st.session_state.owner = new
            st.query_params[PARAM] = new
            st.toast(f"You are {plain(name.strip())} now; {moved} run(s) moved with you.")
        elif name and not owner_for(name, owner):
            st.caption(":orange[A name needs a letter or a digit.]")
        st.caption(f"You: **{display_name(st.session_state.owner)}**"
                   + (" · :violet[instructor]" if is_instructor() else ""))
        remember(st.session_state.owner)
        remember_instructor()


def remember(owner: str) -> None:
    """Keep the id in a cookie for 30 days (a page's script cannot set one: the browser does it). Streamlit
    reads cookies when a tab connects, so a new tab finds it; the id is checked against _OWNER before use."""
    if st.session_state.get("remembered") != owner and _OWNER.match(owner):
        _write_cookie(COOKIE, owner, "max-age=2592000; SameSite=Lax")
        st.session_state.remembered = owner


def remember_instructor() -> None:
    """Write the unlock's token into a cookie for the browser's session (until it is closed) after an unlock, and
    empty it after a Lock: only the session that did either writes it, so a tab that learns of a Lock never
    empties a newer unlock's cookie."""
    if (value := st.session_state.pop("instructor_cookie", None)) is not None:
        _write_cookie(INSTRUCTOR_COOKIE, value, "SameSite=Strict")


def _write_cookie(name: str, value: str, attributes: str) -> None:
    """Set a cookie for the whole app from the page (a page's script cannot set one: the browser does it)."""
    st.html(f"<script>document.cookie = '{name}={value}; path=/; {attributes}';</script>",
            unsafe_allow_javascript=True, width="content")
