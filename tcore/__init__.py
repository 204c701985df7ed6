"""Compile Lab's engine. Headless by design: nothing here imports streamlit or plotly.

The folders show which process a line runs in, and which stage it serves:
  worker/     inside the worker process: build, compile, time, profile, read power (tcore.worker)
  lab/        in the app or command-line process: check, queue, launch, follow, limits, sweeps
  store/      the SQLite run store every process shares
  experiment/ what a run is and how it travels to a worker: read by every process
  host/       what this machine and its torch are and can do: read by every process
  figures/    the figures of a result, defined once, and their arithmetic: the worker measures with it,
              the pages and the command line read it
  analysis/   reading a finished record: advice, earlier runs, generated code, a run as text
  export/     a run written out for use elsewhere: copy as code
cli.py is the command line (python -m tcore).
"""
