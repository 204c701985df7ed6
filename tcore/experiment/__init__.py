"""What a run is, read by every process: the app, the command line, the worker and the store.

spec.py is the experiment (one frozen dataclass that validates itself against the rules in checks.py) and what
torch.compile is passed for it (compile_kwargs), with its precision choices (precision.py) and the fields that decide
whether two runs compile the same (comparable.py); device.py says what an experiment becomes on a device (auto
resolved, the defaults a practitioner picks there, what refuses or does nothing there); schedule.py derives from it
which shapes a run feeds, for the worker and for copy-as-code alike; protocol.py is how an experiment travels to a
worker and how the worker answers.
"""
