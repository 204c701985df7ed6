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
