"""A lab config of the wrong shape, or not UTF-8, is one clear line (LimitsError), never a Python traceback."""
import pytest

from tcore.lab import limits


@pytest.mark.parametrize("text", ["limits = 5", "instructor = 5", "models = 5", 'instructor = "x"'])
def test_a_table_given_as_a_value_says_so(tmp_path, text):
    (tmp_path / "compile-lab.toml").write_text(text + "\n")
    table = text.split()[0]
    for read in (lambda: limits.load(environ={}, cwd=tmp_path),
                 lambda: limits.instructor_passcode(environ={}, cwd=tmp_path),
                 lambda: limits.files_allowed(environ={}, cwd=tmp_path)):
        with pytest.raises(limits.LimitsError, match=f"{table} must be a table") as e:
            read()
        assert "\n" not in str(e.value)


def test_a_file_that_is_not_utf8_says_so(tmp_path):
    (tmp_path / "compile-lab.toml").write_bytes(b"[limits]\nmax_run_s = 60 # caf\xe9\n")
    with pytest.raises(limits.LimitsError, match="not UTF-8 text.*save it as UTF-8"):
        limits.load(environ={}, cwd=tmp_path)
    with pytest.raises(limits.LimitsError, match="not UTF-8"):
        limits.instructor_passcode(environ={}, cwd=tmp_path)


@pytest.mark.parametrize("value", ["[1]", "true", "{a = 1}"])
def test_a_passcode_that_is_not_text_says_so(tmp_path, value):
    (tmp_path / "compile-lab.toml").write_text(f"[instructor]\npasscode = {value}\n")
    with pytest.raises(limits.LimitsError, match="passcode must be text"):
        limits.instructor_passcode(environ={}, cwd=tmp_path)


def test_a_page_says_a_broken_config_in_a_line(tmp_path, monkeypatch):
    from tests.app_harness import app, texts

    monkeypatch.setenv("COMPILE_LAB_DB", str(tmp_path / "runs.sqlite"))
    config = tmp_path / "lab.toml"
    config.write_text("[instructor]\npasscode = \"sesame\"\n")
    monkeypatch.setenv(limits.CONFIG_ENV, str(config))
    at = app()
    at.session_state["instructor"] = "sesame"  # unlocked, then the file is broken under the running app
    config.write_bytes(b"[instructor]\npasscode = \"caf\xe9\"\n")
    at.run()
    assert not at.exception, at.exception
    assert "The lab's settings cannot be read" in texts(at.error) and "not UTF-8" in texts(at.error)
