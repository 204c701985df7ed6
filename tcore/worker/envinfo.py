"""The environment a run measured on: versions, the GPU or CPU, its power limit."""
from __future__ import annotations

import os
import platform
import socket
from typing import Any

from tcore.host.machine import cpu_model


def _nvml_facts(torch_device_index: int) -> dict[str, Any]:
    """The physical GPU (NVML index and UUID), driver, power limit and memory from NVML; each missing
    fact is recorded with why."""
    facts: dict[str, Any] = {}
    try:
        import pynvml

        from tcore.host.power import nvml_index

        pynvml.nvmlInit()
    except Exception as e:  # ImportError or NVMLError: the reason is recorded, not hidden
        return {"nvml_unavailable": str(e)}
    try:
        facts["gpu_index"] = nvml_index(torch_device_index)  # as nvidia-smi numbers it
        handle = pynvml.nvmlDeviceGetHandleByIndex(facts["gpu_index"])
        facts["gpu_uuid"] = pynvml.nvmlDeviceGetUUID(handle)
        facts["driver"] = pynvml.nvmlSystemGetDriverVersion()
        facts["power_limit_w"] = pynvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1e3
        facts["gpu_memory_gib"] = round(pynvml.nvmlDeviceGetMemoryInfo(handle).total / 2**30, 1)
    finally:
        pynvml.nvmlShutdown()
    return facts


def _pinned_gpu() -> int | None:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return int(visible) if visible.isdigit() else None


def collect(device: str, torch_device_index: int = 0) -> dict[str, Any]:
    import torch

    env: dict[str, Any] = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "device": device,
    }
    try:
        import triton

        env["triton"] = triton.__version__
    except ImportError:
        env["triton"] = None  # CPU builds of torch ship without triton; Inductor then emits C++ only
    if device == "cuda":
        props = torch.cuda.get_device_properties(torch_device_index)
        env.update(
            gpu=props.name,
            # without NVML: the UUID CUDA reports, and the GPU this worker was pinned to
            # (tcore.lab.queue.scheduler.slot_env)
            gpu_uuid=f"GPU-{props.uuid}" if getattr(props, "uuid", None) else None,
            gpu_index=_pinned_gpu(),
            gpu_sm_count=props.multi_processor_count,
            compute_capability=f"{props.major}.{props.minor}",
            cuda=torch.version.cuda,
            cudnn=torch.backends.cudnn.version(),
        )
        env.update(_nvml_facts(torch_device_index))
    return env
