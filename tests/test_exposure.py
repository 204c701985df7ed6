"""What a participant's name, a rendered report or a worker could give away to another participant
or another site."""
from pathlib import Path

from streamlit.testing.v1 import AppTest

from tcore.experiment import protocol
from tcore.lab.launch import launcher
from tcore.lab.outputs import tlparse
from tcore.lab.run import runs
from tcore.lab.settings import private
from tcore.store import RunStore
from tests.helpers import QUICK
from ui.panels.people import plain

HOSTILE = "![x](http://127.0.0.1:9/a.png)"


def test_markdown_in_a_name_is_shown_as_typed():
    assert plain(HOSTILE) == r"\!\[x\]\(http\:\/\/127\.0\.0\.1\:9\/a\.png\)"
    assert plain(":red[big] $x^2$ **b** <i>") == r"\:red\[big\] \$x\^2\$ \*\*b\*\* \<i\>"
    assert plain("Ada Lovelace") == "Ada Lovelace"


def test_the_toast_after_naming_yourself_renders_no_markdown(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPILE_LAB_DB", str(tmp_path / "runs.sqlite"))
    at = AppTest.from_file("../app.py", default_timeout=300).run()
    at.text_input(key="people_name").set_value("![x](http://h/a.png)").run()  # a name has at most 24 characters
    assert not at.exception
    [toast] = [t.value for t in at.toast]
    assert toast.startswith(r"You are \!\[x\]\(http\:\/\/h\/a\.png\) now"), toast  # as typed, as text


def test_reports_are_kept_per_store_so_a_reset_store_serves_none_of_the_old_ones(tmp_path):
    path = tmp_path / "runs.sqlite"
    old = RunStore(path)
    shelf = tmp_path / "reports" / old.store_id / "20261123-120000-abcdef"
    shelf.mkdir(parents=True)
    (shelf / "index.html").write_text("the old store's run")
    assert tlparse.report(shelf.name, RunStore(path), reports=tmp_path / "reports").folder == shelf
    for suffix in ("", "-wal", "-shm"):  # the reset docs/configuration.md describes
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    report = tlparse.report(shelf.name, RunStore(path), reports=tmp_path / "reports")
    assert report.folder is None and "kept no TORCH_TRACE" in report.reason


def test_the_instructor_passcode_never_reaches_a_worker(store, monkeypatch):
    monkeypatch.setenv(private.PASSCODE_ENV, "sesame")
    worker = launcher.Worker({})  # as a spare is started
    try:
        environ = Path(f"/proc/{worker.proc.pid}/environ").read_bytes()
        assert b"sesame" not in environ and private.PASSCODE_ENV.encode() not in environ
    finally:
        worker.dismiss()

    handed = []  # what a run hands its worker with the experiment (environment set since the worker started)
    envelope = protocol.envelope
    monkeypatch.setattr(protocol, "envelope", lambda spec, env: handed.append(env) or envelope(spec, env))
    monkeypatch.setenv(private.PASSCODE_ENV, "changed-since")  # set after the worker started: handed over, once
    monkeypatch.setenv("COMPILE_LAB_SPARE_WORKERS", "0")
    record = runs.execute(QUICK.replace(torch_trace=False), store)
    assert record.status == "finished", record.error
    assert handed and all(private.PASSCODE_ENV not in env for env in handed)
