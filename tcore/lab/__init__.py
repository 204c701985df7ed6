"""In the app or command-line process: check an experiment, queue it, launch its worker, follow it, record it.

Also the lab's limits and sweeps. A worker is started by module name (`python -m tcore.worker`):
nothing here imports from tcore.worker, so the app process never imports Inductor or touches the GPU.
"""
