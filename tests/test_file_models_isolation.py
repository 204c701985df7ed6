"""A model file's code runs in workers only, never in the app's or the command line's process, and never where it
could read the instructor's passcode: a marker file the model writes whenever it is imported says who imported it
and what it could see."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import sample_models
from tcore.experiment.spec import Experiment
from tcore.lab.settings import private
from tcore.lab.settings.config import REPO_ROOT
from tests.app_harness import app, db, texts  # noqa: F401 (db: the fixture)
from tests.helpers import QUICK, insert_run

SECRET = "s3cret-passcode-do-not-leak"
MODEL = '''"""A marker model: it says who imported it."""
import json, os
import torch.nn as nn

def _parent_environ():
    try:
        with open(f"/proc/{os.getppid()}/environ", "rb") as f:
            return f.read().decode(errors="replace")
    except OSError as e:
        return f"unreadable: {e}"

with open(MARKER, "a") as f:
    f.write(json.dumps({"pid": os.getpid(), "own": dict(os.environ), "parent": _parent_environ()}) + "\\n")

PRESETS = {"tiny": {}}

def build(preset):
    return nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1))

def make_batch(preset, batch_size, device, generator):
    import torch
    x = torch.randn(batch_size, 8, device=device, generator=generator)
    return (x,), torch.zeros(batch_size, 1, device=device)
'''


@pytest.fixture
def marker_model(tmp_path):
    marker = tmp_path / "imported.jsonl"
    model = tmp_path / "marker_model.py"
    model.write_text(f"MARKER = {str(marker)!r}\n" + MODEL)
    return model, marker


def imports(marker: Path) -> list[dict]:
    return [json.loads(line) for line in marker.read_text().splitlines()] if marker.exists() else []


def test_a_file_run_imports_the_file_in_workers_only_and_none_sees_the_passcode(db, marker_model, tmp_path,
                                                                                monkeypatch):
    model, marker = marker_model
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), COMPILE_LAB_SPARE_WORKERS="0", **{private.PASSCODE_ENV: SECRET})
    cli = subprocess.Popen(
        [sys.executable, "-m", "tcore", "run", "--db", str(db.path), "--model", f"file:{model}", "--device", "cpu",
         "--batch-size", "2", "--warmup-steps", "1", "--timed-steps", "2", "--rounds", "1", "--backend", "eager",
         "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env)
    out, err = cli.communicate(timeout=300)
    assert cli.returncode == 0, err
    seen = imports(marker)
    assert seen, "the worker never imported the file"
    assert cli.pid not in {s["pid"] for s in seen}  # the command line read its presets through a child
    for s in seen:
        assert SECRET not in json.dumps(s["own"]) and SECRET not in s["parent"]
    (run,) = db.list()
    assert run.status == "finished" and db.model_cards.model_card(f"file:{model}")["presets"] == ["tiny"]

    # The app, with files not allowed (the default), shows the run on every page without importing the file,
    # even once someone has changed what the file does.
    before = len(imports(marker))
    model.write_text(model.read_text().replace("nn.Linear(8, 1)", "nn.Linear(8, 1), nn.ReLU()"))
    monkeypatch.setenv(private.PASSCODE_ENV, SECRET)
    at = app()
    for page in ("app_pages/run.py", "app_pages/compare.py", "app_pages/diagnose.py", "app_pages/sweep.py",
                 "app_pages/system.py"):
        at.switch_page(page).run()
        assert not at.exception, (page, at.exception)
    at.switch_page("app_pages/compare.py").run()
    assert "marker_model.py" in texts(at.markdown) + texts(at.caption) + str([m.options for m in at.multiselect])
    assert len(imports(marker)) == before
    assert sample_models.get(f"file:{model}").presets == {"tiny": {"preset": "tiny"}}  # its card, not its code
    assert len(imports(marker)) == before
    Experiment.from_dict(run.spec)  # checking a stored run's settings needs no import either
    assert len(imports(marker)) == before


def test_a_file_no_worker_described_is_refused_without_importing_it(marker_model, monkeypatch):
    from sample_models.sources import file_models

    model, marker = marker_model
    monkeypatch.setattr(file_models, "card_finder", None)
    with pytest.raises(file_models.FileImportRefused, match="never imports a model file"):
        sample_models.get(f"file:{model}")
    with pytest.raises(file_models.FileImportRefused):
        file_models.SOURCES_FILE.module(str(model))
    assert not marker.exists()


def test_a_file_run_stored_without_a_card_shows_without_importing_the_file(db, marker_model):
    """Runs stored before workers wrote cards: their pages piece a card together from the runs' settings."""
    from tcore.experiment.spec import DEFAULTS
    from tests.helpers import insert_row

    model, marker = marker_model
    spec = {**DEFAULTS, "model": f"file:{model}", "preset": "tiny", "device": "cpu", "batch_size": 2,
            "backend": "eager"}
    run_id = insert_row(db, label="a file run", model=spec["model"], preset="tiny", spec_json=json.dumps(spec))
    db.finish(run_id, result={"device": "cpu", "eager_steps_per_s": 1.0, "compiled_steps_per_s": 1.2,
                              "eager_samples_per_s": 2.0, "compiled_samples_per_s": 2.4}, env={"device": "cpu"})
    at = app()
    for page in ("app_pages/compare.py", "app_pages/diagnose.py", "app_pages/run.py"):
        at.switch_page(page).run()
        assert not at.exception, (page, at.exception)
    assert not marker.exists()


def test_a_server_that_does_not_allow_files_never_runs_a_file_run_it_takes_over(store, marker_model):
    """A command line (which allows files) queued it and ended; the app, with files off, must not run its code in
    a worker either: it ends the run and says why."""
    from tcore.lab.outputs import model_files
    from tcore.lab.run import runs

    model, marker = marker_model
    model_files.install(store, files_allowed=lambda: False)
    run_id = insert_run(store, QUICK, status="queued")
    record = store.get(run_id)
    record.spec["model"] = f"file:{model}"
    assert runs._adopt(record, store) is None
    ended = store.get(run_id)
    assert ended.status == "failed" and "does not run model files" in ended.error["message"]
    assert not marker.exists()
