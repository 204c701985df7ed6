"""Who is at the keyboard: a participant's lasting identity, and whether this session is the instructor's.

A participant is an owner id kept in the page's address (?me=ada~3f9a.<secret>), in the session and in a
cookie, so a refresh, a bookmark or a second tab of the same browser keeps their runs theirs. It starts
as a guest id; naming yourself (the sidebar) renames it and moves your runs with you. The id ends in a
random secret (64 bits) that no page shows, not even in part: what pages show (a name, `guest 3f9a`) is
not enough to act as someone, so a second browser cannot rebuild another person's id from their name
tag. Anyone who has the whole address still is that participant: it is a bookmark, not a login.

The name is the browser's, not the tab's: this process keeps, per tag and secret (what a rename keeps), the id
they go by now (_NOW), so a name typed in one tab is every tab's at its next redraw (the sidebar's "You" line looks
every FOLLOW_S), and each tab says so; no run changes hands between two tabs of one browser. An id this process has
not seen (a restart, a bookmark, a made-up ?me=) is looked up in the store by its tag and secret; one new here
counts against its network address's limit on new participants (tcore.lab.policy.guards.NewPeopleGuard), since
max_queued_per_session bounds nothing if fresh ids can be had at will.

The instructor's passcode (tcore.lab.policy.guards.instructor_passcode) is what guards the actions that touch other
people's runs; once typed, a random token keeps the browser's tabs opened or reloaded later unlocked, from the same
address, until Lock, the server's restart or UNLOCK_HOURS (tokens live in its memory). The token reaches a new
session two ways: this process keeps it under the browser's key (Streamlit's XSRF cookie, which its server sets
before any page's script runs), and the page writes it into a cookie of its own, which servers without XSRF
protection rely on. The network address is the connection's, or behind a trusted reverse proxy the one it forwards
(tcore.lab.queue.room.client_address).
"""
from __future__ import annotations

import contextlib
import hashlib
import re
import secrets
import sqlite3
import threading
import time
import traceback
import unicodedata
from typing import Iterator, NamedTuple

import streamlit as st

from tcore.lab import api
from tcore.store import RunStore, StoreError
from tcore.store.changes import reads
from ui.words.store_words import plain, store_trouble

PARAM = "me"  # the query parameter that carries the owner id
# name tag (shown) . secret (never shown): guest-3f9a.0123456789abcdef, ada~3f9a.0123456789abcdef; \Z, not $: an id
# ending in a newline ($ matches before it) would be taken, and break the cookie's script
_OWNER = re.compile(r"^(guest-[0-9a-f]{4}|[a-z0-9][a-z0-9-]{0,23}~[0-9a-f]{4})\.[0-9a-f]{16}\Z")
# ids made before they carried a secret: still shown by name on their runs, never accepted as anyone's identity
_OLD_OWNER = re.compile(r"^(guest-[0-9a-f]{6}|[a-z0-9][a-z0-9-]{0,23}~[0-9a-f]{4})\Z")


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
# Streamlit's server sets this cookie (its XSRF token, masked afresh each time) on the health check a page makes before
# it connects, so every session has it from its first run, before any page's script could write one of ours.
XSRF_COOKIE = "_streamlit_xsrf"
_BROWSER_UNLOCKS: dict[str, str] = {}  # the browser's key (its XSRF token, hashed) -> its unlock's token

_NOW: dict[str, str] = {}  # tag and secret (_key) -> the owner id they go by now, in this server process
_NOW_LOCK = threading.Lock()
FOLLOW_S = 10.0  # how often the sidebar's "You" line looks for a name typed in another tab (an idle tab's cost)
FOLLOWED = "people_followed"  # session_state: the id this tab went by before another tab renamed the browser
RENAMED_ELSEWHERE = "people_renamed_elsewhere"  # session_state: what the sidebar says about it and when it was said
# The notice stays until dismissed, this tab names itself, or the first full redraw this long after it was said: a tab
# left in the background still shows it when the person comes back, and it goes at their next click (it stayed all
# session before, 20 minutes later still telling of a rename long past).
RENAMED_SHOWN_S = 60.0


class TooManyNew(Exception):
    """A new participant past their network address's limit (tcore.lab.policy.guards.NewPeopleGuard)."""


def me(store: RunStore | None = None) -> str:
    """This participant's owner id: the one this tab's session goes by, under the name the browser goes by now
    (another tab may have renamed it); at the session's start, the address's, else the browser's cookie's, else a new
    guest id (`store`, else the default one, is asked about ids this process has not seen).

    Written back into the address on every page, since switching pages drops query parameters.
    """
    owner = st.session_state.get("owner")
    owner = _arrive(store or RunStore()) if not (owner and _OWNER.match(owner)) else _follow(owner)
    if st.query_params.get(PARAM) != owner:
        st.query_params[PARAM] = owner
    return owner


def _arrive(store: RunStore) -> str:
    """A session's first owner id: the address's, else the cookie's, as this process or the store knows it; an id
    neither knows is new, and so is a guest id made for a tab with neither. A new one counts against the address's
    limit on new participants; past it, an id the server knows is still accepted, and a new one is refused
    (TooManyNew, which the sidebar says)."""
    address = client_address()
    for candidate in (st.query_params.get(PARAM), cookie(COOKIE)):
        if candidate and _OWNER.match(candidate) and (owner := _known(candidate, store, address)):
            break
    else:
        owner = new_guest()
        if not _admit(owner, address, store):
            raise TooManyNew(api.new_people_message(api.lab_limits(store)))
    st.session_state.owner = owner
    return owner


def _known(candidate: str, store: RunStore, address: str | None) -> str | None:
    """The id `candidate` goes by now: as this process knows its tag and secret, else as the store does (the name of
    its newest run or sweep), else `candidate` itself if a new participant may start at `address`; None if not."""
    key = _key(candidate)
    if (now := _NOW.get(key)) is not None:
        return now
    if (stored := store.people.owner_ending(key)) is not None:
        return _register(stored)
    return candidate if _admit(candidate, address, store) else None


def _admit(owner: str, address: str | None, store: RunStore) -> bool:
    """Whether a new participant may start at `address` (counted if so); registers `owner` as one."""
    try:
        bound = api.lab_limits(store).max_new_people_per_address
    except api.LimitsError:  # limits written wrongly (an older version saved them): the System page says so, and
        bound = api.Limits().max_new_people_per_address  # every page still opens, the panel's reset among them
    if not api.admit_new_person(address, bound):
        return False
    _register(owner)
    return True


def _register(owner: str) -> str:
    with _NOW_LOCK:
        if len(_NOW) > 100_000:  # a flood of new ids from this machine (loopback is not limited) must not grow it
            for key in list(_NOW)[:50_000]:
                del _NOW[key]
        return _NOW.setdefault(_key(owner), owner)


def _follow(owner: str) -> str:
    """The id this session goes by now: `owner`, or the name another tab of the browser took since (noted for the
    sidebar, which says so and moves over any run this tab queued under the old name meanwhile)."""
    now = _NOW.get(_key(owner)) or _register(owner)
    if now != owner:
        st.session_state.owner = now
        st.session_state.setdefault(FOLLOWED, owner)
    return now


def _key(owner: str) -> str:
    """What stays of an owner id when its name changes: its tag and its secret ("3f9a.0123456789abcdef")."""
    shown, secret = owner.rsplit(".", 1)
    return f"{_tag(shown)}.{secret}"


def _tag(shown: str) -> str:
    return shown.split("~")[1] if "~" in shown else shown.removeprefix("guest-")


def rename(store: RunStore, owner: str, new: str, typed: str) -> int:
    """This browser takes a name, `typed` as typed: its runs move with it, then every tab goes by `new` from its next
    redraw (_NOW; a tab that queued a run under the old name in between moves it itself when it follows); returns how
    many moved."""
    # first: a store that refuses the write leaves every tab as it was
    moved = store.people.rename_owner(owner, new, typed)
    with _NOW_LOCK:
        _NOW[_key(new)] = new
    return moved


def cookie(name: str) -> str | None:
    """The browser's cookie `name` as it was when this tab connected (Streamlit reads them then)."""
    return st.context.cookies.get(name) if st.context.cookies else None


def new_guest() -> str:
    return f"guest-{secrets.token_hex(2)}.{secrets.token_hex(8)}"


def slug(name: str) -> str:
    """What of a typed name goes into the owner id and the address: lower case, accents folded, '-' for spaces and
    marks ("Ada L" is ada-l, "Zoë" zoe); a name whose letters are none of a to z ("Иван", "王芳") gets "n-" and 8 hex
    digits of its own (it shows as typed; only the address holds this); '' for a name with no letter or digit."""
    folded = unicodedata.normalize("NFKD", name.strip().lower()).encode("ascii", "ignore").decode()
    slugged = re.sub(r"[^a-z0-9]+", "-", folded).strip("-")[:24].strip("-")
    if slugged or not any(c.isalnum() for c in name):
        return slugged
    return "n-" + hashlib.sha256(name.strip().lower().encode()).hexdigest()[:8]


def owner_for(name: str, current: str) -> str | None:
    """The owner id for a chosen name, keeping this participant's tag (two Adas stay apart) and secret; None if
    the name has no letters or digits."""
    if not (slugged := slug(name)):
        return None
    return f"{slugged}~{_key(current)}"


def display_name(owner: str | None, *, digits: bool = True, store: RunStore | None = None) -> str:
    """How a run's owner reads on a page: 'Ada (3f9a)', 'guest 3f9a', 'the command line', 'another
    session'. The name as its owner typed it, where the store (`store`, else the default one) keeps it, else the id's
    lower-case slug. The four digits tell two people of one name apart (docs/room.md); `digits=False` gives the name
    alone (the name box, the sidebar's "You")."""
    if not owner:
        return "another session"
    if _OWNER.match(owner) or _OLD_OWNER.match(owner):
        if owner.startswith("guest-"):
            return f"guest {owner[6:10]}"
        name, tag = owner.split(".")[0].split("~")
        name = typed_name(owner, store) or name
        return f"{name} ({tag})" if digits else name
    if ":" in owner:  # tcore.lab.queue.scheduler.Proc.name, "host:pid": queued without a browser session (a sweep
        return "the command line"  # started on a page belongs to the person who started it)
    return "another session"  # an older session id


def typed_name(owner: str, store: RunStore | None = None) -> str | None:
    """The name `owner` typed ("Ada L"), as the store keeps it beside the id; None where it keeps none, or one that no
    longer matches the id's slug (a name changed by an older version)."""
    typed = reads(store or RunStore()).people.typed_names().get(owner)
    return typed if typed and "~" in owner and slug(typed) == owner.split("~")[0] else None


@contextlib.contextmanager
def store_trouble_said() -> Iterator[None]:
    """Around what a fragment draws from the store: a store that fails there is store_trouble's sentence, and the
    traceback goes to the server's log. Streamlit handles an error in a fragment itself, before app.py's handler sees
    it, and shows its generic "This app has encountered an error" (the System page's queue box ticks on its own)."""
    try:
        yield
    except (StoreError, sqlite3.Error) as e:
        traceback.print_exc()
        st.error(store_trouble(e))


def is_instructor() -> bool:
    """Whether this session unlocked the instructor's actions, or another of this browser did (kept under the
    browser's key, or in the cookie) and its token still unlocks (_unlocked_by); and the passcode still is what it
    was."""
    if (held := st.session_state.get("instructor_token")) is not None and _unlocked_by(held) is None:
        st.session_state.pop("instructor", None)  # locked meanwhile (Lock in another tab), or its time is up
        st.session_state.pop("instructor_token", None)
    attempt = st.session_state.get("instructor")
    if not attempt:
        for token in (_BROWSER_UNLOCKS.get(_browser() or ""), cookie(INSTRUCTOR_COOKIE)):
            if token and (attempt := _unlocked_by(token)):
                st.session_state.instructor, st.session_state.instructor_token = attempt, token
                break
    return bool(attempt) and api.is_instructor(attempt)


def _browser() -> str | None:
    """This browser's key: a digest of the token in Streamlit's XSRF cookie, which every session of the browser sends
    from its first run (the page's script has written nothing yet); None without one (XSRF protection off)."""
    parts = (cookie(XSRF_COOKIE) or "").strip("\"'").split("|")
    if len(parts) != 4 or parts[0] != "2":  # "2|mask|masked token|timestamp"
        return None
    try:
        mask, masked = bytes.fromhex(parts[1]), bytes.fromhex(parts[2])
    except ValueError:
        return None
    if not mask or len(masked) < 16:
        return None
    token = bytes(b ^ mask[i % len(mask)] for i, b in enumerate(masked))
    return hashlib.sha256(token).hexdigest()


def _unlocked_by(token: str) -> str | None:
    """The passcode `token` was issued for, while it still unlocks: issued by this process to this network address
    less than UNLOCK_HOURS ago, for the passcode in force; a token that no longer unlocks is forgotten. The address
    keeps a token copied out of the browser (another web server on this host is sent the cookie too: cookies do not
    tell ports apart) from unlocking anywhere else."""
    if (held := _UNLOCKED.get(token)) is None:
        return None
    if time.time() > held.until or held.address != client_address() or not api.is_instructor(held.attempt):
        _UNLOCKED.pop(token, None)
        return None
    return held.attempt


def client_address() -> str | None:
    """The network address of the browser behind this session: the connection's, or, where that is a trusted reverse
    proxy ([room] trusted_proxies), the one its X-Forwarded-For gives (tcore.lab.queue.room.client_address). None: this
    machine (Streamlit reports loopback so), or none known (AppTest's context is a stand-in object)."""
    peer = st.context.ip_address
    if peer is not None and not isinstance(peer, str):
        return None
    trusted = api.trusted_proxies()
    forwarded = st.context.headers.get_all("X-Forwarded-For") if trusted else []
    return api.client_address(peer, forwarded, trusted)


def unlock(attempt: str) -> None:
    """The passcode was right: this session is the instructor's, and so are the browser's tabs opened or reloaded
    from now on: kept here under the browser's key at once, and in the cookie that identity_sidebar writes on the
    next page drawn."""
    token = secrets.token_urlsafe(24)
    _UNLOCKED[token] = _Unlock(attempt, client_address(), time.time() + UNLOCK_HOURS * 3600)
    if browser := _browser():
        _BROWSER_UNLOCKS[browser] = token
    st.session_state.instructor, st.session_state.instructor_token = attempt, token
    st.session_state.instructor_cookie = token


def lock() -> None:
    """Give the instructor's actions up: in this session and in every other one unlocked on this app (there is one
    instructor; a tab still open learns it at its next redraw), and empty this browser's cookie."""
    _UNLOCKED.clear()
    _BROWSER_UNLOCKS.clear()
    st.session_state.pop("instructor_token", None)
    st.session_state.pop("instructor", None)
    st.session_state.instructor_cookie = ""


def identity_sidebar(store: RunStore) -> None:
    """The sidebar: your name (your runs follow it, and so do the browser's other tabs), and who is instructor."""
    try:
        owner = me(store)
    except TooManyNew as e:  # nobody to show them as: no page
        st.error(f"You cannot join the lab from here now: {e}")
        st.stop()
    with st.sidebar:
        if (before := st.session_state.pop(FOLLOWED, None)) is not None:
            # Another tab renamed this browser: this one says so, shows the name in its box (before the box is drawn,
            # or the old name in it would rename the browser back), and moves any run it queued under the old name.
            moved = store.people.rename_owner(before, owner)
            # the old name as this tab's box still holds it, typed (the store keeps the new one only)
            was = st.session_state.get("people_name") or ""
            was = was.strip() if "~" in before and slug(was) == before.split("~")[0] else display_name(before,
                                                                                                       digits=False)
            now = display_name(owner, digits=False, store=store)
            st.session_state.people_name = now if "~" in owner else ""
            st.session_state[RENAMED_ELSEWHERE] = (time.time(), (
                f"Another tab of this browser changed its name from {plain(was)} to {plain(now)}: this tab is "
                f"{plain(now)} too, and your runs went with the name"
                + (f" ({moved} more moved from this one)." if moved else ".")))
        name = st.text_input("Your name", value=display_name(owner, digits=False) if "~" in owner else "",
                             placeholder="e.g. Ada", key="people_name", max_chars=24,
                             help="Your runs are kept under this name and this page's address: a refresh, a "
                                  "bookmark or a second tab opened from it keeps them yours. The name is this "
                                  "browser's: its other tabs take it too. It shows as you type it; the page's "
                                  "address holds it in lower case, with '-' for spaces and other marks (Ada L as "
                                  "ada-l).")
        shown = display_name(owner, digits=False, store=store)
        if name and (new := owner_for(name, owner)) and (new != owner or name.strip() != shown):
            moved = rename(store, owner, new, name.strip())  # a new name, or the same one typed another way (ada, Ada)
            st.session_state.owner = new
            st.session_state.pop(RENAMED_ELSEWHERE, None)
            st.query_params[PARAM] = new
            st.toast(f"You are {plain(name.strip())} now; {moved} run(s) moved with you, and this browser's other "
                     "tabs take the name too." if new != owner else f"Your name shows as {plain(name.strip())} now.")
        elif name and not owner_for(name, owner):
            st.caption(":orange[A name needs a letter or a digit.]")
        st.caption(TWO_PEOPLE)
        if (told := st.session_state.get(RENAMED_ELSEWHERE)) and time.time() - told[0] > RENAMED_SHOWN_S:
            st.session_state.pop(RENAMED_ELSEWHERE, None)
        elif told:
            st.caption(f":orange[{told[1]}]")
            st.button("Dismiss", key="people_renamed_dismiss", type="tertiary", icon=":material/close:",
                      on_click=st.session_state.pop, args=(RENAMED_ELSEWHERE, None))
        is_instructor()  # settings written wrongly raise here, where the page says so (app.py), not in the fragment
        st.fragment(_you, run_every=FOLLOW_S)()
        remember(st.session_state.owner)
        remember_instructor()


# The name belongs to the browser (its cookie), so two people sharing one browser would share one name and its runs.
TWO_PEOPLE = ("Two people need two browsers (or a private window each): every tab of this browser takes the one "
              "name, and its runs.")


def _you() -> None:
    """Who this tab is, redrawn every FOLLOW_S: a name typed in another tab of the browser, or a Lock, shows here
    without a click; a new name redraws the whole page (the name box, the runs that are yours)."""
    owner = me()
    try:
        instructor = is_instructor()
    except api.LimitsError:
        st.rerun()  # the settings were broken meanwhile: the whole page says how
    if FOLLOWED in st.session_state:
        st.rerun()
    st.caption(f"You: **{plain(display_name(owner, digits=False))}**"
               + (" · :violet[instructor]" if instructor else ""))


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
