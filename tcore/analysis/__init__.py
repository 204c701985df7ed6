"""Reading a finished run's record: what to try next (advice.py), earlier runs of the same setting (history.py),
what the generated code holds (codediff.py), where compiled costs more than eager by its kernels (slower.py), and the
run as text for the command line (report.py).

Imported by the app's pages and the command line; never by the worker or the store.
Pure functions of a stored spec and result, tested on the CPU.
"""
