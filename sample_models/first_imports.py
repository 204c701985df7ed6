"""One lock for the first imports of torch's compiler and the model libraries in a process with threads: the app's
server, where each page's run is a thread.

Python's import locks are taken one module at a time: two threads that first import one package tree at once can take
them in opposite orders, and the import system then raises _DeadlockError in one thread or hands it a module half
imported; the failed import takes its package out of sys.modules, and the other thread reads KeyError:
'torch._dynamo' (CPython gh-83065). torch._dynamo is such a tree, and torchvision, timm and transformers import it
too. Streamlit starts a person's next page run in a new thread while the run it replaces is still finishing
(runner.fastReruns), so one person clicking during a page's first draw is enough: a model then cannot be built
("KeyError: 'torch._dynamo'"). bench/import_race.py starts six threads at once in fresh processes, two of them doing
what the Run page does, and counts the failures with and without the lock.

Code that may first import those trees in the app's threads holds IMPORT_LOCK while it does: each feature's first
check (tcore.host.features), and every library source's catalog and model entry (sample_models.sources; not a file's,
which the app never imports). Reentrant, so code that holds it may call code that takes it.
"""
from __future__ import annotations

import threading

IMPORT_LOCK = threading.RLock()
