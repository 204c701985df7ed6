"""Facts about this machine, for the System page, the lab's limits and a run's record: versions, GPUs (NVML), CPU.

Headless and cheap: it never creates a CUDA context (NVML answers the GPU questions; torch is asked
only for its version and whether CUDA is usable), so the app process stays free of GPU memory.
"""
from __future__ import annotations

import os
import platform
import threading
from importlib import metadata
from typing import Any

from tcore.host.power import PowerMeter, open_meter


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass  # not Linux: platform.processor() below is the portable answer
    return platform.processor() or platform.machine()


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None  # shown as "not installed": CPU builds of torch come without triton


def gpus() -> tuple[list[dict[str, Any]], str | None]:
    """One dict per GPU that NVML sees (name, driver, memory, power limit, power, utilisation), or why none."""
    try:
        import pynvml  # from the nvidia-ml-py package

        pynvml.nvmlInit()
    except Exception as e:  # ImportError, or NVMLError_LibraryNotFound/DriverNotLoaded: the reason is shown
        return [], f"NVML is not available here ({type(e).__name__}: {e})"
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        out = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h)
            out.append({
                "index": i,
                "name": pynvml.nvmlDeviceGetName(h),
                "uuid": pynvml.nvmlDeviceGetUUID(h),
                "driver": driver,
                "memory_total_gib": mem.total / 2**30,
                "memory_used_gib": mem.used / 2**30,
                "power_limit_w": pynvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1e3,
                "power_w": pynvml.nvmlDeviceGetPowerUsage(h) / 1e3,  # NVML's 1 s average on Ampere and newer
                "utilization_pct": float(pynvml.nvmlDeviceGetUtilizationRates(h).gpu),
            })
    finally:
        pynvml.nvmlShutdown()
    return out, None


def facts() -> dict[str, Any]:
    """Everything the System page shows, as plain values; `missing` lists what this machine cannot do, and why."""
    import torch

    has_cuda = torch.cuda.is_available()
    gpu_list, _ = gpus()  # without NVML, power_reason below says why
    device = "cuda" if has_cuda else "cpu"
    meter = open_meter(device)
    power_reason = meter.reason if not meter.available else None
    meter.close()
    missing = []
    if not has_cuda:
        missing.append("No usable CUDA GPU: runs use the CPU and the tiny presets, and reduce-overhead / "
                       "max-autotune have no CUDA graphs to use.")
    if power_reason:
        missing.append(f"No power reading: {power_reason}. Energy figures show n/a.")
    if _version("triton") is None:
        missing.append("Triton is not installed: Inductor generates C++ for the CPU only.")
    return {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "triton": _version("triton"),
        "python": platform.python_version(),
        "streamlit": _version("streamlit"),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "gpus": gpu_list,
        "missing": missing,
    }


_METERS: dict[str, PowerMeter] = {}
_METERS_LOCK = threading.Lock()


def meter(device: str) -> PowerMeter:
    """One long-lived meter per device for live readings (RAPL derives power from two energy readings)."""
    with _METERS_LOCK:
        if device not in _METERS:
            _METERS[device] = open_meter(device)
        return _METERS[device]
