"""Compile Lab's engine. Headless by design: nothing here imports streamlit or plotly.

The folders show which process a line runs in:
  worker/   inside the worker process: build, compile, time, profile, read power (tcore.worker)
  lab/      in the app or command-line process: check, queue, launch, follow, limits, sweeps
  store/    the SQLite run store every process shares
Shared by both sides, at this level: the experiment (spec), what the two sides say to each other
(protocol), the figures of a result and their arithmetic (figures), power meters (power), facts
about this machine (machine), and the command line (cli).
"""
