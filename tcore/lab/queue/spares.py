"""The spare workers (tcore.lab.launch.launcher.SparePool) that start runs sooner: one waits in each free device slot
with its imports done, for the device kinds keep_spares() named (the app's)."""
from __future__ import annotations

import atexit
import os
import threading

from tcore.lab.launch import cluster
from tcore.lab.launch.launcher import SparePool
from tcore.lab.queue import quiet, scheduler

# Spare workers (tcore.lab.launch.launcher.SparePool) for the device kinds keep_spares() named: the app's.
SPARES = SparePool()
SPARES_OFF_ENV = "COMPILE_LAB_SPARE_WORKERS"  # "0": start each worker when its run starts
_SPARE_DEVICES: set[str] = set()
atexit.register(SPARES.clear)
quiet.spares_from(SPARES.groups)  # a slot's spares hold still while a run of that slot is timed


def keep_spares(device: str) -> bool:
    """Keep a spare worker waiting in each free `device` slot from now on (the app calls this); False if
    $COMPILE_LAB_SPARE_WORKERS=0 turns them off."""
    if os.environ.get(SPARES_OFF_ENV, "").strip() in ("0", "off", "false", "no"):
        return False
    _SPARE_DEVICES.add(device)
    return True


def kept_for(device: str) -> bool:
    """Whether this process keeps spare workers for `device` (keep_spares named it): where it does not, none starts."""
    return device in _SPARE_DEVICES


def _spare_for_next(device: str, slot: str | None) -> None:
    """A GPU run has reached its profiling pass: start the next run's spare now, so a busy queue gains too.

    Not on the CPU, where the imports would share the cores the profiled run is being measured on. On a
    GPU the profiler times kernels on the device, and idle is re-based on the timed step
    (tcore.figures.breakdown.against_timed), so a process importing beside it does not change the figures.
    """
    if device != "cpu" and device in _SPARE_DEVICES and slot is not None and not cluster.is_ray_slot(slot):
        if scheduler.room_plan(device).shares:
            return  # runs share the slot: the queue keeps a spare in each free place already, off the measuring cores
        threading.Thread(target=SPARES.fill, args=(slot, scheduler.slot_env(slot)), daemon=True).start()
