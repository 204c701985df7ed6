# Two entry points: `make app` (set up, then start the app) and `make test` (set up, then run the tests).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: app test cluster-demo
app: $(VENV)/.app-installed
	$(PY) -m streamlit run serve.py

test: $(VENV)/.test-installed
	$(PY) -m pytest

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
