"""What a fresh checkout's server and first page say: no warning in the server's terminal for a folder the settings
name, and the first page's words about who the name belongs to and how long a run takes."""
import subprocess
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def test_the_static_folder_that_the_settings_serve_comes_with_the_checkout():
    """Streamlit printed "Static file serving is enabled, but no static folder found" at every start of a checkout
    that had not rendered a tlparse report yet (static/ was ignored whole)."""
    config = tomllib.loads((REPO / ".streamlit" / "config.toml").read_text())
    assert config["server"]["enableStaticServing"] is True
    tracked = subprocess.run(["git", "ls-files", "static"], cwd=REPO, capture_output=True, text=True).stdout.split()
    assert tracked == ["static/.gitkeep"]


def test_the_name_box_says_two_people_need_two_browsers_and_the_cpu_run_is_about_a_minute(tmp_path, monkeypatch):
    pytest.importorskip("streamlit")
    from tests import app_harness

    monkeypatch.setenv("COMPILE_LAB_DB", str(tmp_path / "runs.sqlite"))
    at = app_harness.app()
    assert "Two people need two browsers" in app_harness.texts(at.sidebar.caption)
    from tcore.host import machine

    if not machine.cuda_available():
        said = app_harness.texts(at.info)
        assert "seconds to a minute" not in said and "about a minute, most of it compiling" in said
        # not "a run takes about a minute": efficientnet_b0 took 2.5 min, training with the optimizer compiled 4.5
        assert "a library model or training with the optimizer compiled takes several" in said


def test_the_run_page_says_how_long_runs_like_the_chosen_one_took_here(tmp_path, monkeypatch):
    """The Run page's one length for every run (about a minute) fit the default only: under the Run button it says
    what runs of the chosen model, task and compile took on this machine, and nothing for one never run here."""
    pytest.importorskip("streamlit")
    from tcore.experiment.spec import Experiment
    from tcore.lab.queue import scheduler
    from tcore.store import RunStore
    from tests import app_harness

    monkeypatch.setenv("COMPILE_LAB_DB", str(tmp_path / "runs.sqlite"))
    at = app_harness.app()
    shown = app_harness.texts(at.caption)
    assert "Will run:" in shown and " took about " not in shown  # nothing like it finished here yet
    store, proc = RunStore(), scheduler.this_process()
    exp = Experiment(model="captioner", preset="tiny", device="cpu", timed_s=2.0)  # another timing: same model
    for _ in range(2):
        run_id = store.queue.enqueue(exp, device="cpu", owner="ada~0001.00000000c0ffee00", proc=proc, timeout_s=600)
        assert store.queue.claim_next(proc, "cpu", ["cpu"], {run_id})
        store.finish(run_id, result={"speedup": 1.2}, env={})
    with store._write() as db:  # each took 150 s from its start, whatever this machine's clock did meanwhile
        db.execute("UPDATE runs SET finished_at = started_at + 150")
    at.run()
    assert not at.exception
    (said,) = [c for c in app_harness.texts(at.caption).split("\n") if "Will run:" in c]
    assert "took about 2 min" in said and "here (median of 2), start-up and compile included" in said
