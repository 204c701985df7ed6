# Two entry points: `make app` (set up, then start the app) and `make test` (set up, then run the tests).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: app test cluster-demo
# ADDRESS: the network interface the app listens on; every one by default (a workshop room), 127.0.0.1 for
# this machine only. The server says which at start.
ADDRESS ?= 0.0.0.0
app: $(VENV)/.app-installed
	$(PY) -m streamlit run serve.py --server.address $(ADDRESS)

# The suite in two parts: most of it on TEST_WORKERS processes, a file to each (its module fixtures stay whole), while
# the cores wait on worker processes, queues and compiles; then, one at a time on a quiet machine, the tests that
# time the machine itself and the real browser (a browser on a loaded machine misses its cues). Both parts run;
# either failing fails the target. The first part keeps no spare workers (COMPILE_LAB_SPARE_WORKERS=0): its cores are
# the bottleneck, and a spare is torch imported (about 4 s of a core here) for a run that, at a test's end, never comes;
# the spare tests start theirs by hand (tests/test_worker.py, tests/test_worker_folders.py).
TEST_WORKERS ?= 3
test: $(VENV)/.test-installed
	COMPILE_LAB_SPARE_WORKERS=0 $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile -m "not browser and not alone"; first=$$?; \
	$(PY) -m pytest -p no:xdist -m "browser or alone"; second=$$?; \
	[ $$first -eq 0 ] && [ $$second -eq 0 ]

# Runs on a Ray cluster (README: "Several machines: a Ray cluster"): two nodes on this machine and the app.
cluster-demo: $(VENV)/.test-installed
	$(PY) bench/cluster_demo.py

$(VENV)/.app-installed: requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $@

$(VENV)/.test-installed: requirements.txt requirements-test.txt requirements-cluster.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-test.txt -r requirements-cluster.txt
	touch $@ $(VENV)/.app-installed
