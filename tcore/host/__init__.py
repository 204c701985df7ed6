"""What this machine and its torch are and can do: read by the app (System page, knobs), the lab's limits and
the worker, which also measures power through power.py.

machine.py: versions, GPUs (NVML), CPU, without a CUDA context. power.py: NVML and RAPL energy counters.
peaks.py: the datasheet peaks of known GPUs. features.py: which newer compile features the installed torch has.
"""
