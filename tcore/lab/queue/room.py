"""How one machine serves a room: how many runs share each device, and which cores the measuring run has alone.

Most of a run's life on a GPU is the compile, CPU work that leaves the GPU idle. So several runs share a device slot:
each compiles on the CPU while another holds the device, and a run holds it alone (tcore.lab.queue.lease, kept in the
store by tcore.store.devices) only for the phases that another run would disturb or be disturbed by. What else a
neighbour must never do is what slows a host-bound eager loop, whose throughput is the launch rate of one CPU thread
(bench/host_bound.py measures each neighbour):
    a GPU neighbour                         -> the device is held alone by whoever measures
    busy loops on every core, its own too   -> the measuring run's launch thread has a core of its own
    work on the other cores, the launch thread unpinned, the NVML sampler, the garbage collector, an idle CUDA context
    beside it slow it little or not at all.
So each GPU slot keeps MEASURE_CORES cores for its lease holder (the first for the launch thread), and everything
else the lab starts (compiles, spare workers, the app itself) runs on the other cores, and while a run is timed the
runs beside it on its GPU hold still (tcore.lab.queue.quiet): the kept cores alone leave host-bound rounds wide.

On a machine without a GPU the CPU is the device: a compile beside a CPU measurement shares its cores, so there runs
take turns whole, and nothing is reserved.

[room] in compile-lab.toml, or $COMPILE_LAB_RUNS_PER_GPU, sets runs_per_gpu: how many runs share one GPU ("auto":
one compiling run per CORES_PER_COMPILE of the cores left, at most MAX_AUTO; 1: a run holds its GPU for its whole
life). Its trusted_proxies, or $COMPILE_LAB_TRUSTED_PROXIES, names the reverse proxies whose X-Forwarded-For says
which browser a connection is for (client_address): the address that the per-address limits and the instructor's
unlock are bound to.
"""
from __future__ import annotations

import ipaddress
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from tcore.host import processes
from tcore.lab.settings.config import LimitsError
from tcore.lab.settings.config import read as _config
from tcore.store import SlotRoom

RUNS_ENV = "COMPILE_LAB_RUNS_PER_GPU"
MAX_RUNS_PER_GPU = 64  # far past what one GPU's memory holds of the smallest run; more is a mistake
PROXIES_ENV = "COMPILE_LAB_TRUSTED_PROXIES"  # comma-separated, as trusted_proxies
ROOM_SETTINGS = ("runs_per_gpu", "trusted_proxies")  # what [room] may hold
MEASURE_CORES = 2       # per GPU slot: the launch thread's core, and one for the measuring worker's other threads
MIN_CORES_TO_KEEP = 4   # with fewer cores than this per slot, none is kept apart: the others would starve
# A compile is a core of Python (Dynamo, AOT, lowering) and bursts of Triton/C++ compile jobs, and its memory traffic
# reaches the measuring run's launches through the shared cache and memory bus: past four runs at once, a round is
# faster but host-heavy eager steps (cuDNN's) read low beside their solo runs (bench/room.py measures a round against
# its runs alone). The figures come first: four.
CORES_PER_COMPILE = 3
MAX_AUTO = 4            # "auto" shares a GPU among at most this many runs
# What a run's memory estimate (tcore.lab.policy.memory) leaves out, counted when runs share a GPU: a CUDA context and
# the allocator's slack (about 1 GiB), compile workspaces and autotuning buffers; and the estimate's own error.
SHARED_EXTRA_GIB, SHARED_MARGIN = 2.0, 1.25
DEVICE_MEMORY_USABLE = 0.9  # of the GPU's memory, what sharing runs may count on together


@dataclass(frozen=True)
class RoomPlan:
    """How this machine shares its devices among runs: the queue's room per slot and the cores each process gets."""
    device: str
    runs_per_slot: int
    measure_cpus: dict[str, tuple[int, ...]] = field(default_factory=dict)  # slot -> its lease holder's cores
    other_cpus: frozenset[int] = frozenset()  # where everything else runs; empty: nothing kept apart
    why: str = ""                             # the plan in a sentence, for the System page and the docs

    @property
    def shares(self) -> bool:
        """Whether runs share a device (compile beside a measurement)."""
        return self.runs_per_slot > 1

    def room(self, memory_gib: float | None) -> dict[str, SlotRoom]:
        """What the queue may put in each slot: runs_per_slot runs whose counted memory fits `memory_gib`."""
        usable = None if memory_gib is None else DEVICE_MEMORY_USABLE * memory_gib
        return {slot: SlotRoom(self.runs_per_slot, usable) for slot in self.measure_cpus or {}} if self.shares \
            else {}


def counted_gib(estimate_gib: float | None) -> float | None:
    """What a run is counted for when it shares a GPU: its estimate and what the estimate leaves out (None: unknown,
    so it shares with no one)."""
    return None if estimate_gib is None else SHARED_MARGIN * estimate_gib + SHARED_EXTRA_GIB


def runs_per_gpu_setting(environ: Mapping[str, str] | None = None, cwd: str | Path | None = None) -> int | None:
    """runs_per_gpu as configured: a whole number from 1 to MAX_RUNS_PER_GPU, or None for "auto" (the default)."""
    environ = os.environ if environ is None else environ
    if environ.get(RUNS_ENV, "").strip():
        value, where = environ[RUNS_ENV].strip(), RUNS_ENV
    else:
        table, path = _room_table(environ, cwd)
        value, where = table.get("runs_per_gpu", "auto"), f"[room] in {path}"
    if isinstance(value, str) and value.strip().lower() == "auto":
        return None
    text = str(value).strip()
    number = int(text) if not isinstance(value, bool) and text.isascii() and text.isdigit() else None  # not "２"
    if number is None or not 1 <= number <= MAX_RUNS_PER_GPU:
        raise LimitsError(f"runs_per_gpu = {value!r} (from {where}): it must be a whole number of at least 1 and at "
                          f"most {MAX_RUNS_PER_GPU}, or \"auto\"")
    return number


def _room_table(environ: Mapping[str, str], cwd: str | Path | None) -> tuple[dict, Path]:
    """compile-lab.toml's [room] ({} without one) and the file's path; LimitsError for a setting it does not know."""
    tables, path = _config(environ, cwd)
    table = tables.get("room", {})
    if not isinstance(table, dict):
        raise LimitsError(f"{path}: room must be a table ([room] on a line of its own, its settings below it), not "
                          f"{table!r}")
    unknown = sorted(set(table) - set(ROOM_SETTINGS))
    if unknown:
        raise LimitsError(f"{path}: unknown setting(s) in [room]: {', '.join(unknown)}; known: "
                          f"{', '.join(ROOM_SETTINGS)}")
    return table, path


Network = ipaddress.IPv4Network | ipaddress.IPv6Network
_LOOPBACK = (ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1"))
# trusted_proxies broader than these prefixes (0.0.0.0/0, ::/0, ...) are warned about: no room's proxies span that
BROADEST_PROXIES = {4: 8, 6: 32}
_WARNED: set = set()
LOG = logging.getLogger("compile_lab")


def trusted_proxies(environ: Mapping[str, str] | None = None, cwd: str | Path | None = None) -> tuple[Network, ...]:
    """The reverse proxies whose X-Forwarded-For is believed: trusted_proxies under [room] (addresses or networks,
    e.g. ["127.0.0.1", "::1"] for a proxy on this machine, ["10.0.0.0/24"]), or $COMPILE_LAB_TRUSTED_PROXIES
    (comma-separated), which wins; none by default."""
    environ = os.environ if environ is None else environ
    if PROXIES_ENV in environ:
        entries, where = [e for e in environ[PROXIES_ENV].split(",") if e.strip()], PROXIES_ENV
    else:
        table, path = _room_table(environ, cwd)
        entries, where = table.get("trusted_proxies", []), f"[room] trusted_proxies in {path}"
        if not isinstance(entries, list):
            raise LimitsError(f"{where} = {entries!r}: it must be a list of addresses in quotes, e.g. "
                              "[\"127.0.0.1\", \"::1\"] for a proxy on this machine")
    networks = []
    for entry in entries:
        try:
            if not isinstance(entry, str):
                raise ValueError
            networks.append(ipaddress.ip_network(entry.strip(), strict=False))
        except ValueError:
            raise LimitsError(f"{where}: {entry!r} is not a network address (e.g. \"127.0.0.1\", \"::1\" or "
                              "\"10.0.0.0/24\"; names such as localhost are not looked up)") from None
    for network in networks:
        if network.prefixlen < BROADEST_PROXIES[network.version] and network not in _WARNED:
            _WARNED.add(network)  # read on every connection: said once per process
            LOG.warning("%s: %s trusts the X-Forwarded-For of a whole stretch of the internet: anyone there can "
                        "claim any address and step past the per-address limits; name your proxies' own addresses",
                        where, network)
    return tuple(networks)


def client_address(peer: str | None, forwarded_for: Sequence[str], trusted: Sequence[Network]) -> str | None:
    """The address of the browser behind a connection from `peer` (None: this machine, as Streamlit reports a
    loopback peer): the peer itself unless it is a trusted proxy; then the rightmost hop of its X-Forwarded-For
    header(s) that is not one. Each proxy appends the address it was reached from, so only the hops the trusted
    proxies appended can be believed; a header from a peer that is not one is the client's own words, and ignored.
    A hop that is not an address ("unknown", "unix:": what a proxy writes where it has none) is counted as itself,
    "unparsed:HOP", never as this machine: loopback is exempt from the per-address limits."""
    if not trusted:
        return peer
    ip = None if peer is None else _address(peer)
    if (peer is not None and ip is None) or not _trusted(ip, trusted):
        return peer
    hops = [hop.strip() for header in forwarded_for for hop in header.split(",") if hop.strip()]
    for hop in reversed(hops):
        if (ip := _address(hop)) is None:
            return f"unparsed:{hop}"
        if not _trusted(ip, trusted):
            return str(ip)
    return str(_address(hops[0])) if hops else peer  # every hop a trusted proxy: the first one's client


def _trusted(ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None, trusted: Sequence[Network]) -> bool:
    """Whether `ip` (None: this machine, either loopback) is among the trusted proxies."""
    return any(address in network for address in ((ip,) if ip is not None else _LOOPBACK) for network in trusted
               if address.version == network.version)


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """An address as a proxy writes it (1.2.3.4, 1.2.3.4:5678, ::1, [::1]:80); an IPv4 one mapped into IPv6 as
    itself; None for anything else."""
    text = text.strip()
    if text.startswith("["):
        text = text[1:text.find("]")] if "]" in text else text
    elif text.count(":") == 1:
        text = text.split(":", 1)[0]
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    return ip.ipv4_mapped if ip.version == 6 and ip.ipv4_mapped else ip


def plan(device: str, slots: Sequence[str], cpus: Sequence[int], runs_per_gpu: int | None = None) -> RoomPlan:
    """The room for `slots` of `device` on a machine whose usable cores are `cpus`; runs_per_gpu None is "auto"."""
    cpus = sorted(cpus)
    if device != "cuda" or not slots:
        return RoomPlan(device, 1, {slot: () for slot in slots}, frozenset(),
                        "On the CPU the CPU is the device: a compile beside a measurement would share its cores, so "
                        "runs take turns whole.")
    keep = MEASURE_CORES if len(cpus) >= MEASURE_CORES * len(slots) + MIN_CORES_TO_KEEP else (
        1 if len(cpus) >= len(slots) + MIN_CORES_TO_KEEP else 0)
    usable = cpus[1:] if keep else []  # never the first core: the kernel tends to put its interrupts there
    measure = {slot: tuple(usable[i * keep:(i + 1) * keep]) for i, slot in enumerate(slots)}
    kept = {c for cores in measure.values() for c in cores}
    others = frozenset(c for c in cpus if c not in kept) if kept else frozenset()
    if runs_per_gpu is None:
        per_slot = len(others or cpus) // (CORES_PER_COMPILE * len(slots))
        runs_per_gpu = max(1, min(MAX_AUTO, per_slot))
        how = (f"auto: {len(others or cpus)} cores for compiles, {CORES_PER_COMPILE} per compiling run, "
               f"{len(slots)} GPU(s), at most {MAX_AUTO}")
    else:
        how = "as configured"
    if runs_per_gpu == 1:
        why = f"Each GPU runs one run at a time, start to end ({how})."
    else:
        why = (f"Up to {runs_per_gpu} runs share each GPU ({how}): each compiles on the CPU while another holds the "
               "GPU alone for its warm-up, timed rounds and profile.")
    if kept:
        why += (f" Cores {', '.join(str(c) for c in sorted(kept))} are kept for the run that holds a GPU (its launch "
                f"thread on {', '.join(str(c[0]) for c in measure.values())}); compiles, spare workers and the app run "
                "on the others.")
    return RoomPlan(device, runs_per_gpu, measure, others, why)


def usable_cpus() -> list[int]:
    """The cores this process may run on (all of them where the system cannot say)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def keep_off(cpus: frozenset[int]) -> str | None:
    """Move every thread of this process onto `cpus` (the cores outside the measuring run's), so that what it starts
    from now on (workers, their compiles) inherits them; a sentence if it cannot. Linux keeps cores per thread."""
    if not cpus or not hasattr(os, "sched_setaffinity"):
        return None
    for tid in processes.thread_ids():
        try:
            os.sched_setaffinity(tid, cpus)
        except ProcessLookupError:
            continue  # a thread that ended meanwhile
        except OSError as e:
            return f"the lab could not keep its processes off the measuring cores: {e}"
    return None
