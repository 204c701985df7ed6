"""A lab config of the wrong shape, or not UTF-8, is one clear line (LimitsError), never a Python traceback."""
import sys

import pytest

from tcore.lab.policy import guards, limits
from tcore.lab.settings import config


@pytest.mark.parametrize("text", ["limits = 5", "instructor = 5", "models = 5", 'instructor = "x"'])
def test_a_table_given_as_a_value_says_so(tmp_path, text):
    (tmp_path / "compile-lab.toml").write_text(text + "\n")
    table = text.split()[0]
    for read in (lambda: limits.load(environ={}, cwd=tmp_path),
                 lambda: guards.instructor_passcode(environ={}, cwd=tmp_path),
                 lambda: limits.files_allowed(environ={}, cwd=tmp_path)):
        with pytest.raises(config.LimitsError, match=f"{table} must be a table") as e:
            read()
        assert "\n" not in str(e.value)


def test_a_file_that_is_not_utf8_says_so(tmp_path):
    (tmp_path / "compile-lab.toml").write_bytes(b"[limits]\nmax_run_s = 60 # caf\xe9\n")
    with pytest.raises(config.LimitsError, match="not UTF-8 text.*save it as UTF-8"):
        limits.load(environ={}, cwd=tmp_path)
    with pytest.raises(config.LimitsError, match="not UTF-8"):
        guards.instructor_passcode(environ={}, cwd=tmp_path)


@pytest.mark.parametrize("value", ["[1]", "true", "{a = 1}"])
def test_a_passcode_that_is_not_text_says_so(tmp_path, value):
    (tmp_path / "compile-lab.toml").write_text(f"[instructor]\npasscode = {value}\n")
    with pytest.raises(config.LimitsError, match="passcode must be text"):
        guards.instructor_passcode(environ={}, cwd=tmp_path)


def test_a_page_says_a_broken_config_in_a_line(tmp_path, monkeypatch):
    from tests.app_harness import app, texts

    monkeypatch.setenv("COMPILE_LAB_DB", str(tmp_path / "runs.sqlite"))
    toml = tmp_path / "lab.toml"
    toml.write_text("[instructor]\npasscode = \"sesame\"\n")
    monkeypatch.setenv(config.CONFIG_ENV, str(toml))
    at = app()
    at.session_state["instructor"] = "sesame"  # unlocked, then the file is broken under the running app
    toml.write_bytes(b"[instructor]\npasscode = \"caf\xe9\"\n")
    at.run()
    assert not at.exception, at.exception
    assert "The lab's settings cannot be read" in texts(at.error) and "not UTF-8" in texts(at.error)


BAD_CLUSTER = {  # compile-lab.toml -> what its one line must say: the key, the value, what is allowed
    "[cluster]\naddress = 5": ("address = 5 (from [cluster] in", "text in quotes"),
    "[cluster]\naddress = \"not a host:port\"": ("address = 'not a host:port' (from [cluster] in", "HOST:PORT"),
    "[cluster]\naddress = \"host:99999\"": ("address = 'host:99999' (from [cluster] in", "a port from 1 to 65535"),
    "cluster = \"x\"": ("cluster must be a table", "not 'x'"),
    "room = 5": ("room must be a table", "not 5"),
}


@pytest.mark.parametrize("text", BAD_CLUSTER)
def test_a_cluster_or_room_setting_written_wrongly_is_one_line_before_anything_connects(tmp_path, monkeypatch, text):
    from tcore.lab.launch import cluster
    from tcore.lab.queue import room

    monkeypatch.delenv(cluster.ADDRESS_ENV, raising=False)
    monkeypatch.delenv(config.CONFIG_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "compile-lab.toml").write_text(text + "\n")
    monkeypatch.setitem(sys.modules, "ray", None)  # were Ray reached for, it would say "Ray is not installed" instead
    read = cluster.connect if text.startswith(("[cluster]", "cluster")) else room.runs_per_gpu_setting
    with pytest.raises(config.LimitsError) as e:
        read()
    for words in BAD_CLUSTER[text]:
        assert words in str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("value", ["5", "not a host:port", "host:99999", "host"])
def test_a_cluster_address_from_the_environment_is_checked_the_same_way(monkeypatch, value):
    from tcore.lab.launch import cluster

    monkeypatch.setenv(cluster.ADDRESS_ENV, value)
    with pytest.raises(config.LimitsError, match=f"address = '{value}' \\(from {cluster.ADDRESS_ENV}\\): it must be"):
        cluster.address()


@pytest.mark.parametrize("value", ["auto", "local", "10.0.0.1:6379", "head.example.com:6379", "[::1]:6379",
                                   "ray://10.0.0.1:10001"])
def test_the_addresses_ray_takes_are_accepted(monkeypatch, value):
    from tcore.lab.launch import cluster

    monkeypatch.setenv(cluster.ADDRESS_ENV, value)
    assert cluster.address() == value


@pytest.mark.parametrize("text", ["[cluster]\naddress = 5", "cluster = \"x\"", "[limits]\nmax_run_s = 1e400"])
def test_the_command_line_says_a_setting_written_wrongly_in_one_line(tmp_path, monkeypatch, capsys, text):
    from tcore import cli
    from tcore.lab.launch import cluster

    monkeypatch.delenv(cluster.ADDRESS_ENV, raising=False)
    monkeypatch.setenv(config.CONFIG_ENV, str(tmp_path / "lab.toml"))
    (tmp_path / "lab.toml").write_text(text + "\n")
    assert cli.main(["run", "--db", str(tmp_path / "runs.sqlite"), "--model", "captioner", "--preset", "tiny",
                     "--device", "cpu", "--backend", "eager", "--quiet"]) == 2
    out, err = capsys.readouterr()
    # what the command says; an earlier test's queue, still ticking in this process on its own store, may say more
    err = "\n".join(line for line in err.splitlines() if not line.startswith("compile-lab queue ("))
    assert out == "" and len(err.strip().splitlines()) == 1, err
    assert err.startswith("python -m tcore: the lab's settings cannot be read: ") and "lab.toml" in err


@pytest.mark.parametrize("text", ["[cluster]\naddress = 5", "cluster = \"x\"", "[cluster]\naddress = \"host:99999\""])
def test_the_system_page_says_a_cluster_setting_written_wrongly_in_a_sentence(tmp_path, monkeypatch, text):
    from tcore.lab.launch import cluster
    from tests.app_harness import app, texts

    monkeypatch.delenv(cluster.ADDRESS_ENV, raising=False)
    monkeypatch.setenv("COMPILE_LAB_DB", str(tmp_path / "runs.sqlite"))
    monkeypatch.setenv(config.CONFIG_ENV, str(tmp_path / "lab.toml"))
    (tmp_path / "lab.toml").write_text(text + "\n")
    at = app().switch_page("app_pages/system.py").run()
    assert not at.exception, at.exception
    said = texts(at.error)
    assert "The lab's settings cannot be read: " in said
    for words in BAD_CLUSTER[text]:
        assert words in said


@pytest.mark.parametrize("text, said", [
    ("[limit]\nmax_run_s = 60", r"unknown table\(s\) \[limit\]; known: \[limits\], \[instructor\]"),
    ('max_run_s = 60', r"unknown table\(s\) \[max_run_s\]"),
    ('[instructor]\npasscod = "x"', r"unknown setting\(s\) in \[instructor\]: passcod; known: passcode"),
    ("[models]\nallow_file = true", r"unknown setting\(s\) in \[models\]: allow_file; known: allow_files"),
])
def test_an_unknown_table_or_setting_is_refused_by_name(tmp_path, text, said):
    (tmp_path / "compile-lab.toml").write_text(text + "\n")
    for read in (lambda: limits.load(environ={}, cwd=tmp_path),
                 lambda: guards.instructor_passcode(environ={}, cwd=tmp_path),
                 lambda: limits.files_allowed(environ={}, cwd=tmp_path)):
        with pytest.raises(config.LimitsError, match=said) as e:
            read()
        assert "\n" not in str(e.value)
