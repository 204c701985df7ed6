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
