"""Power and energy readings: NVML on NVIDIA GPUs, RAPL on Intel CPUs, or 'unavailable' with the reason."""
from __future__ import annotations

import glob
import os
import threading
import time
from typing import Callable


class PowerMeter:
    """A cumulative energy counter plus an instantaneous power reading.

    Energy per timed block is the counter's difference over the block (as Zeus does): it integrates
    every millisecond, unlike a handful of power samples. Subclasses read real hardware; this base
    class is the 'unavailable' meter and carries the reason.
    """

    source = "none"

    def __init__(self, reason: str = "no power meter") -> None:
        self.reason = reason

    @property
    def available(self) -> bool:
        return self.source != "none"

    def energy_j(self) -> float | None:
        return None

    def power_w(self) -> float | None:
        return None

    def utilization_pct(self) -> float | None:
        return None

    def compute_processes(self) -> int | None:
        """Processes computing on this device now, this one included; None where that cannot be seen."""
        return None

    def close(self) -> None:
        pass


class NvmlMeter(PowerMeter):
    source = "nvml"

    def __init__(self, nvml_index: int) -> None:
        import pynvml  # from the nvidia-ml-py package

        super().__init__(reason="")
        self._nvml = pynvml
        pynvml.nvmlInit()
        self._handle = pynvml.nvmlDeviceGetHandleByIndex(nvml_index)
        pynvml.nvmlDeviceGetTotalEnergyConsumption(self._handle)  # raises NVMLError_NotSupported before Volta
        # The instantaneous field exists on newer drivers; nvmlDeviceGetPowerUsage is a 1 s average on Ampere+.
        self._instant_field = getattr(pynvml, "NVML_FI_DEV_POWER_INSTANT", None)

    def energy_j(self) -> float:
        return self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle) / 1e3  # mJ -> J

    def power_w(self) -> float:
        if self._instant_field is not None:
            (value,) = self._nvml.nvmlDeviceGetFieldValues(self._handle, [self._instant_field])
            if value.nvmlReturn == self._nvml.NVML_SUCCESS:
                return value.value.uiVal / 1e3  # mW -> W
        return self._nvml.nvmlDeviceGetPowerUsage(self._handle) / 1e3

    def utilization_pct(self) -> float:
        return float(self._nvml.nvmlDeviceGetUtilizationRates(self._handle).gpu)

    def compute_processes(self) -> int | None:
        # Counted, not matched by pid: inside a container NVML reports the host's pids, not ours.
        try:
            return len(self._nvml.nvmlDeviceGetComputeRunningProcesses(self._handle))
        except self._nvml.NVMLError:  # not supported on this GPU or driver: nothing to see
            return None

    def close(self) -> None:
        self._nvml.nvmlShutdown()


class RaplMeter(PowerMeter):
    """Intel RAPL package domains (intel-rapl:N, not their sub-domains), summed; handles counter wrap."""

    source = "rapl"

    def __init__(self, domains: list[str]) -> None:
        super().__init__(reason="")
        self._domains = domains
        self._max_uj = [int(open(os.path.join(d, "max_energy_range_uj")).read()) for d in domains]
        self._last_uj = self._read_uj()
        self._total_j = 0.0
        self._lock = threading.Lock()
        self._last_power = (time.perf_counter(), 0.0)

    def _read_uj(self) -> list[int]:
        return [int(open(os.path.join(d, "energy_uj")).read()) for d in self._domains]

    def energy_j(self) -> float:
        with self._lock:
            now = self._read_uj()
            for i, (last, cur) in enumerate(zip(self._last_uj, now)):
                self._total_j += ((cur - last) % (self._max_uj[i] + 1)) / 1e6
            self._last_uj = now
            return self._total_j

    def power_w(self) -> float | None:
        t0, e0 = self._last_power
        t1, e1 = time.perf_counter(), self.energy_j()
        self._last_power = (t1, e1)
        return (e1 - e0) / (t1 - t0) if e0 and t1 > t0 else None


def nvml_index(torch_device_index: int) -> int:
    """NVML numbers GPUs by PCI order, CUDA by its own order and CUDA_VISIBLE_DEVICES: map one to the other."""
    import torch

    mapper = getattr(torch.cuda, "_get_nvml_device_index", None)  # private, present on 2.11 and 2.13
    return mapper(torch_device_index) if mapper else torch_device_index


def open_meter(device: str, torch_device_index: int = 0) -> PowerMeter:
    """The best meter for `device`, or an unavailable one whose `reason` says why."""
    if device == "cuda":
        try:
            import pynvml  # noqa: F401
        except ImportError:
            return PowerMeter("the nvidia-ml-py package (pynvml) is not installed")
        try:
            return NvmlMeter(nvml_index(torch_device_index))
        except Exception as e:  # NVMLError_* subclasses; the message is the reason shown to the user
            return PowerMeter(f"NVML cannot read this GPU's energy counter: {e}")
    domains = sorted(glob.glob("/sys/class/powercap/intel-rapl:[0-9]"))
    if not domains:
        return PowerMeter("the CPU has no RAPL energy counter (/sys/class/powercap/intel-rapl:* is absent)")
    try:
        return RaplMeter(domains)
    except OSError as e:
        return PowerMeter(f"RAPL energy counter is not readable: {e}")


class PowerSampler:
    """Polls a meter at `hz` in a thread and hands batches of samples to `emit`, tagged with the phase.

    A sample is [t_s since start, watts, phase, utilization %]. NVML's reading updates about every 100 ms, so
    10-20 Hz is as fine as the power samples can usefully get.
    """

    def __init__(self, meter: PowerMeter, emit: Callable[[list], None], hz: float = 20.0,
                 flush_every_s: float = 0.5) -> None:
        self.meter = meter
        self.phase = "idle"
        self._emit = emit
        self._period = 1.0 / hz
        self._flush_every_s = flush_every_s
        self._stop = threading.Event()
        self._t0 = time.perf_counter()
        self._thread = threading.Thread(target=self._loop, name="power-sampler", daemon=True)

    def start(self) -> PowerSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        batch, last_flush = [], time.perf_counter()
        while not self._stop.wait(self._period):
            watts = self.meter.power_w()
            if watts is not None:
                util = self.meter.utilization_pct()
                batch.append([round(time.perf_counter() - self._t0, 3), round(watts, 2), self.phase, util])
            if batch and time.perf_counter() - last_flush >= self._flush_every_s:
                self._emit(batch)
                batch, last_flush = [], time.perf_counter()
        if batch:
            self._emit(batch)
