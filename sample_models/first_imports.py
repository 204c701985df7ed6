"""One lock for the first imports of torch's compiler and the model libraries in a process with threads: the app's
server, where each page's run is a thread.

Python's import locks are taken one module at a time: two threads that first import one package tree at once can take
them in opposite orders, and the import system then raises _DeadlockError in one thread or hands it a module half
imported; the failed import takes its package out of sys.modules, and the other thread reads KeyError:
'torch._dynamo' (CPython gh-83065). torch._dynamo is such a tree, and torchvision, timm and transformers import it
too. On this 2-core CPU (2026-11-27, Python 3.11, torch 2.13), four threads that began at once a feature check,
`import torchvision`, `import torch._dynamo.utils` and `import torch._inductor.config` raised _DeadlockError in 5 of
12 fresh processes (bench/import_race.py); eight real models built in eight threads of one fresh process had
torchvision raise "partially initialized module 'torchvision.models' has no attribute 'list_models'" for three.
Streamlit starts a person's next page run in a new thread while the run it
replaces is still finishing (runner.fastReruns), so one person clicking during a page's first draw is enough: the
browser test that picks torchvision then read "torchvision:resnet18 could not be built here (KeyError:
'torch._dynamo')" beside Streamlit's own error box.

Code that may first import those trees in the app's threads holds IMPORT_LOCK while it does: the feature checks
(tcore.host.features) and every source's catalog and model entry (sample_models.sources). Reentrant: a source that
checks a feature holds it already.
"""
from __future__ import annotations

import threading

IMPORT_LOCK = threading.RLock()
