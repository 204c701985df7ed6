# Two entry points: `make app` (set up, then start the app) and `make test` (set up, then run the tests).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: app test cluster-demo
# ADDRESS: the network interface the app listens on; every one by default (a workshop room), 127.0.0.1 for
# this machine only. The server says which at start. FORWARDED_ALLOW_IPS empty: Streamlit's web server (uvicorn)
# would believe X-Forwarded-For from 127.0.0.1 on its own; [room] trusted_proxies decides instead (docs/room.md).
ADDRESS ?= 0.0.0.0
app: $(VENV)/.app-installed
	FORWARDED_ALLOW_IPS= $(PY) -m streamlit run serve.py --server.address $(ADDRESS)

# The linter first (ruff, configured in pyproject.toml: a lint error fails the target before any test runs), then
# the suite in two parts: most of it on TEST_WORKERS processes, a file to each (its module fixtures stay whole), the
# longest files first (tests/conftest.py: LONGEST_FIRST; --no-loadscope-reorder keeps that order); then the real
# browser tests on BROWSER_WORKERS processes, a file to each (each test serves its own app on a free port, with its
# own store, and drives its own Chromium; on two cores two at a time took 202 s against 275 s one at a time, and
# three no less than two). The two parts side by side took longer on two cores (15.3 min against 14.6): the first
# part's compiles already keep both cores busy. No verdict depends on how loaded the machine is: waits end on what
# they wait for, and timing logic runs on injected clocks. Both parts run; either failing fails the target; the
# first part lists its 25 slowest tests, to say where the time goes. The first part keeps no spare workers
# (COMPILE_LAB_SPARE_WORKERS=0): its cores are the bottleneck, and a spare is torch imported (about 4 s of a core
# here) for a run that, at a test's end, never comes; the spare tests start theirs by hand (tests/test_worker.py,
# tests/test_worker_folders.py).
TEST_WORKERS ?= 3
BROWSER_WORKERS ?= 2
test: $(VENV)/.test-installed
	$(VENV)/bin/ruff check . || exit 1; \
	COMPILE_LAB_SPARE_WORKERS=0 $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder \
		-m "not browser" --durations=25; first=$$?; \
	$(PY) -m pytest -n $(BROWSER_WORKERS) --dist loadfile -m browser --durations=10; second=$$?; \
	[ $$first -eq 0 ] && [ $$second -eq 0 ]

# Runs on a Ray cluster (README: "On a cluster"; docs/cluster.md): two nodes on this machine and the app.
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
