"""Who may act in a shared lab: the instructor's passcode and the guard that slows guessing it, and the bound on how
many new participants one network address may start. One guard of each per server process (PASSCODE_GUARD,
NEW_PEOPLE). The passcode is set under [instructor] in compile-lab.toml or in $COMPILE_LAB_INSTRUCTOR_PASSCODE
(tcore.lab.policy.limits reads the [limits] table).
"""
from __future__ import annotations

import collections
import hashlib
import hmac
import ipaddress
import logging
import math
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from tcore.lab.settings.config import LimitsError
from tcore.lab.settings.config import read as _config
from tcore.lab.settings.private import PASSCODE_ENV

if TYPE_CHECKING:
    from tcore.lab.policy.limits import Limits

def instructor_passcode(environ: Mapping[str, str] | None = None, cwd: str | Path | None = None) -> str | None:
    """The passcode that unlocks instructor actions: $COMPILE_LAB_INSTRUCTOR_PASSCODE, else
    `passcode` under [instructor] in compile-lab.toml; None when neither is set (nobody has them)."""
    environ = os.environ if environ is None else environ
    if environ.get(PASSCODE_ENV, "").strip():
        return environ[PASSCODE_ENV].strip()
    code = _config(environ, cwd)[0].get("instructor", {}).get("passcode")
    if code is not None and not isinstance(code, (str, int)) or isinstance(code, bool):
        raise LimitsError(f"[instructor] passcode must be text in quotes, not {type(code).__name__}")
    return str(code).strip() or None if code is not None else None


def is_instructor(attempt: str | None, environ: Mapping[str, str] | None = None, cwd: str | Path | None = None) -> bool:
    """Whether `attempt` is the instructor passcode; False when none is set.

    Compared as SHA-256 digests with hmac.compare_digest: the time taken says nothing of how much of the
    attempt was right, nor of the passcode's length."""
    code = instructor_passcode(environ, cwd)
    if not (code and attempt):
        return False
    return hmac.compare_digest(hashlib.sha256(code.encode()).digest(),
                               hashlib.sha256(attempt.strip().encode()).digest())


def this_machine(address: str) -> bool:
    """Whether a request from `address` comes from the server's own machine: any loopback address (all of
    127.0.0.0/8, ::1, and 127.x written as IPv6, ::ffff:127.0.0.2) or the name localhost. Both guards ask this, so
    they never disagree about an address (127.0.0.2 was loopback to one and a stranger to the other)."""
    if address == "localhost":
        return True
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    if ip.version == 6 and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


THIS_MACHINE = "this machine"  # a try with no address: the server's own machine (loopback), as logs and the panel say


class PasscodeGuard:
    """Slows down guessing the instructor passcode, per browser session and per network address, and counts the
    wrong tries for the instructor.

    A session gets `free` wrong tries; after that each wrong try makes it wait twice as long as the one before
    (`first_wait_s`, then double, up to `longest_wait_s`). An address (a new tab is a new session, not a new
    address) gets `free_per_address` wrong tries over all its sessions, then waits the same way. A try refused
    for waiting is refused without looking at it. Nothing is ever shared by the whole lab: another person's
    wrong tries never make the instructor, at another address, wait. The server's own machine (loopback, where
    the instructor can always sit) and a session with no known address are slowed per session only.
    Every wrong try, and every try refused for waiting, is logged with its address (never what was typed).
    """

    def __init__(self, *, free: int = 3, free_per_address: int = 10, first_wait_s: float = 2.0,
                 longest_wait_s: float = 300.0, clock=time.monotonic) -> None:
        self.free, self.free_per_address = free, free_per_address
        self.first_wait_s, self.longest_wait_s = first_wait_s, longest_wait_s
        self._clock = clock
        self._sessions: dict[str, tuple[int, float]] = {}   # session -> (wrong tries in a row, may try again at)
        self._addresses: dict[str, tuple[int, float]] = {}  # address -> the same, over all its sessions
        self._wrong: list[tuple[float, str]] = []           # (when, address) of every wrong try, for the instructor
        self._latest_wrong_at: float | None = None          # the latest one by the server's clock (time.time())
        self._lock = threading.Lock()

    def _wait_s(self, wrong: int, free: int) -> float:
        return 0.0 if wrong < free else min(self.first_wait_s * 2 ** (wrong - free), self.longest_wait_s)

    def attempt(self, session: str, attempt: str | None, environ: Mapping[str, str] | None = None,
                cwd: str | Path | None = None, address: str | None = None) -> tuple[bool, str | None]:
        """(whether `attempt` unlocks the instructor's actions, and if not, what to tell the person)."""
        now = self._clock()
        where = _per_address(address)  # None (this machine, or none known): slowed per session only; an IPv6 /64 is one
        with self._lock:
            wrong, next_at = self._sessions.get(session, (0, 0.0))
            address_wrong, address_next_at = self._addresses.get(where, (0, 0.0)) if where else (0, 0.0)
            if now < next_at:
                wait, whose = next_at - now, "this session"
            elif now < address_next_at:
                wait, whose = address_next_at - now, "your network address"
            else:
                wait = None
        if wait is not None:
            LOG.warning("instructor passcode: try refused without checking (session %s at %s must wait %.0f s; %s "
                        "has had too many wrong tries)", session[:8], address or THIS_MACHINE, wait, whose)
            return False, f"Too many wrong passcodes from {whose}: try again in {math.ceil(wait)} s."
        if is_instructor(attempt, environ, cwd):
            with self._lock:
                self._sessions.pop(session, None)
            return True, None
        with self._lock:
            wrong += 1
            delay = self._wait_s(wrong, self.free)
            if len(self._sessions) > 10_000:  # a flood of new sessions must not grow this without end
                self._sessions = {k: v for k, v in self._sessions.items() if v[1] > now}
            self._sessions[session] = (wrong, now + delay)
            if where:
                address_wrong += 1
                delay = max(delay, address_delay := self._wait_s(address_wrong, self.free_per_address))
                if len(self._addresses) > 10_000:
                    self._addresses = {k: v for k, v in self._addresses.items() if v[1] > now}
                self._addresses[where] = (address_wrong, now + address_delay)
            self._wrong = [*self._wrong[-999:], (now, address or THIS_MACHINE)]
            self._latest_wrong_at = time.time()
        LOG.warning("instructor passcode: wrong try refused (session %s at %s, %d wrong in a row; next try allowed in "
                    "%.0f s)", session[:8], address or THIS_MACHINE, wrong, delay)
        return False, ("That is not the passcode."
                       + (f" Wait {math.ceil(delay)} s before trying again." if delay else ""))

    def wrong_tries(self) -> str | None:
        """For the instructor: how many wrong tries this server has seen, from where, and how recently; None if none."""
        with self._lock:
            wrong, latest = list(self._wrong), self._latest_wrong_at
        if not wrong:
            return None
        addresses = collections.Counter(a for _, a in wrong)
        top = ", ".join(f"{a} ({n})" for a, n in addresses.most_common(3))
        # a clock time, not "3 s ago": the panel is drawn once, and "ago" stood still while the page's queue ticked on
        return (f"{len(wrong)} wrong passcode tr{'y' if len(wrong) == 1 else 'ies'} since the server started, from "
                f"{len(addresses)} address{'' if len(addresses) == 1 else 'es'}: {top}; the latest at "
                f"{time.strftime('%H:%M:%S', time.localtime(latest))} (the server's clock). Guessers are slowed per "
                "session and per address; the passcode keeps working for you.")


NEW_PEOPLE_WINDOW_H = 12  # a workshop's day: the ids one address started within it count against its limit


class NewPeopleGuard:
    """Bounds how many participants (owner ids new to this server) one network address starts, so that a fresh id
    (a made-up ?me=, a private window, cleared cookies) cannot be had at will: each participant may have
    max_queued_per_session runs waiting, and an address at most max_new_people_per_address participants within
    NEW_PEOPLE_WINDOW_H, so one address holds at most their product waiting. An IPv6 /64 counts as one address (a
    host picks new addresses within its /64 at will). The server's own machine (loopback, where the instructor sits)
    and a session with no known address are not bounded, as PasscodeGuard does not slow them per address: behind a
    reverse proxy, name it in [room] trusted_proxies so that each browser has its own address."""

    def __init__(self, *, window_s: float = NEW_PEOPLE_WINDOW_H * 3600.0, clock=time.monotonic) -> None:
        self.window_s, self._clock = window_s, clock
        self._started: dict[str, list[float]] = {}  # address (or /64) -> when each of its participants was started
        self._lock = threading.Lock()

    def admit(self, address: str | None, limit: int) -> bool:
        """Count a new participant at `address`; False, counting nothing, if it has started `limit` already."""
        where = _per_address(address)
        if where is None:
            return True
        now = self._clock()
        with self._lock:
            recent = [t for t in self._started.get(where, []) if now - t < self.window_s]
            if len(recent) >= limit:
                self._started[where] = recent
                return False
            if len(self._started) > 10_000:  # many addresses must not grow this without end
                self._started = {a: ts for a, ts in self._started.items() if ts and now - ts[-1] < self.window_s}
            self._started[where] = [*recent, now]
            return True


def _per_address(address: str | None) -> str | None:
    """What both guards count per: the address, its /64 for IPv6 (a host picks new addresses within it at will), an
    IPv4 address written into IPv6 as itself; None for loopback or no address."""
    if not address or this_machine(address):
        return None
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if ip.version == 6 and ip.ipv4_mapped is not None:  # an IPv4 host as a dual-stack server writes it: that host
        return str(ip.ipv4_mapped)
    return str(ipaddress.ip_network(f"{ip}/64", strict=False)) if ip.version == 6 else str(ip)


def new_people_message(limits: Limits) -> str:
    return (f"this network address has started {limits.max_new_people_per_address} participants in the last "
            f"{NEW_PEOPLE_WINDOW_H} hours, this lab's limit ({limits.describe('max_new_people_per_address')}). Open "
            "the lab from a tab that already has your name (its address ends in ?me=...), or ask the instructor: "
            "a room that shares one network address needs the limit raised.")


LOG = logging.getLogger("compile_lab")
PASSCODE_GUARD = PasscodeGuard()  # one per server process: every browser session's tries count together
NEW_PEOPLE = NewPeopleGuard()  # one per server process, like PASSCODE_GUARD
