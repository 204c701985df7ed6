"""The command line's mistakes and bad inputs: one line saying what is wrong, a non-zero exit, nothing changed
(no traceback for a typo, no half-written store)."""
import os
import subprocess
import sys

import pytest

from tcore import cli
from tcore.experiment.spec import SpecError
from tcore.lab.policy import limits
from tcore.lab.run import flags
from tcore.store import RunStore
from tests.helpers import QUICK, insert_run


def one_line(capsys) -> str:
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err  # no traceback, no page of usage
    return lines[0]


@pytest.fixture
def bad_stores(tmp_path):
    """Every kind of --db that cannot be a run store, each with its bytes before the command."""
    good = RunStore(tmp_path / "good.sqlite")
    insert_run(good, QUICK)
    data = good.path.read_bytes()
    (tmp_path / "text.txt").write_text("a shopping list\n")
    (tmp_path / "truncated.sqlite").write_bytes(data[:len(data) // 2])
    (tmp_path / "corrupt.sqlite").write_bytes(data[:100] + b"\xff" * (len(data) - 100))  # a sound header
    (tmp_path / "a-file").write_text("x")
    (tmp_path / "folder").mkdir()
    return {"a folder": (tmp_path / "folder", "it is a folder"),
            "a text file": (tmp_path / "text.txt", "not a SQLite database"),
            "a truncated SQLite file": (tmp_path / "truncated.sqlite", "cut short"),
            "a corrupted SQLite file": (tmp_path / "corrupt.sqlite", "SQLite cannot read it"),
            "/dev/null": ("/dev/null", "not a regular file"),
            "a parent that is a file": (tmp_path / "a-file" / "runs.sqlite", "is a file, not a folder")}


@pytest.mark.parametrize("kind", ["a folder", "a text file", "a truncated SQLite file", "a corrupted SQLite file",
                                  "/dev/null", "a parent that is a file"])
@pytest.mark.parametrize("command", [["list"], ["show", "x"], ["run", "--backend", "eager"]])
def test_a_bad_db_is_one_line_and_a_non_zero_exit_with_nothing_touched(bad_stores, kind, command, capsys, tmp_path):
    path, why = bad_stores[kind]
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert cli.main([*command, "--db", str(path)]) == 2
    line = one_line(capsys)
    assert f"cannot use {path} as the run store" in line and why in line
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before  # no -wal, no -shm, no change


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes in read-only folders")
def test_a_db_in_a_read_only_folder_is_one_line(tmp_path, capsys):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        assert cli.main(["list", "--db", str(folder / "runs.sqlite")]) == 2
        assert "cannot make a run store at" in one_line(capsys)
    finally:
        folder.chmod(0o755)


def test_an_unknown_run_id_is_one_line(store, capsys):
    assert cli.main(["show", "nosuchid", "--db", str(store.path)]) == 1
    assert one_line(capsys) == f"python -m tcore: no run 'nosuchid' in {store.path}"


@pytest.mark.parametrize("argv, says", [
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    ([], "the following arguments are required: command"),
    (["run", "--rounds", "x"], "argument --rounds: invalid int value: 'x'"),
    (["run", "--no-such-option"], "unrecognized arguments: --no-such-option"),
    (["show"], "the following arguments are required: run_id"),
    (["list", "--limit", "many"], "argument --limit: 'many' is not a whole number"),
    # SQLite's OverflowError traceback, and a calibration of -3 or 500 runs queued without a word (7, and 500)
    (["list", "--limit", "9" * 20], "argument --limit: that number is outside 1-1,000,000,000"),
    (["list", "--limit", "-5"], "argument --limit: -5 is outside 1-1,000,000,000"),
    (["calibrate", "--runs", "-3"], "argument --runs: -3 is outside 2-20"),
    (["calibrate", "--runs", "500"], "argument --runs: 500 is outside 2-20"),
])
def test_command_line_mistakes_are_one_line_not_a_page_of_usage(argv, says, capsys):
    with pytest.raises(SystemExit) as exit:
        cli.main(argv)
    assert exit.value.code == 2
    line = one_line(capsys)
    assert says in line and "--help" in line


def test_a_reader_that_stops_early_is_not_a_traceback(store):
    for _ in range(300):
        insert_run(store, QUICK)
    done = subprocess.run(f"{sys.executable} -m tcore list --db {store.path} | head -1", shell=True,
                          capture_output=True, text=True, cwd=cli.__file__.rsplit("/tcore/", 1)[0])
    assert len(done.stdout.splitlines()) == 1
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr


# --- item 7: numbers no run can finish with, or that crash the worker, are refused before queueing ---------------

@pytest.mark.parametrize("changes, message", [
    (dict(warmup_steps=1_000_000_000), "warmup_steps must be a whole number from 1 to 100"),
    (dict(rounds=100_000_000), "rounds must be a whole number from 1 to 100"),
    (dict(timed_steps=1_000_000_000_000), "timed_steps must be a whole number from 1 to 100000"),
    (dict(shape_count=1_000_000), "shape_count must be a whole number from 0 to 64"),
    (dict(shape_count=60), "at most 16 distinct sizes"),  # captioner tiny: captions up to 16 tokens
    (dict(seed=1180591620717411303424), "seed must be a whole number from 0 to 4294967295"),
    (dict(seed=-1), "seed must be a whole number from 0"),
    (dict(timed_s=float("nan")), "timed_s must be a number from 0.1 to 3600"),
    (dict(timed_s=float("inf")), "timed_s must be a number from 0.1 to 3600"),
    (dict(batch_size=True), "batch_size must be a whole number"),
    (dict(recompile_limit=10**9), "recompile_limit must be a whole number from 1 to 1024"),
])
def test_numbers_out_of_bounds_are_refused_with_the_bound(changes, message):
    with pytest.raises(SpecError, match=message):
        QUICK.replace(**changes)


@pytest.mark.parametrize("timeout", [0.0, -5.0, float("nan"), float("inf")])
def test_a_time_limit_no_run_can_keep_is_refused(timeout):
    with pytest.raises(SpecError, match="time limit must be a positive number of seconds"):
        limits.Limits().run_time(timeout)


def test_bad_numbers_on_the_command_line_queue_nothing(store, capsys):
    for argv in (["--warmup-steps", "1000000000"], ["--seed", "1180591620717411303424"], ["--timeout", "nan"],
                 ["--timeout", "0"], ["--shape-count", "1000000"]):
        assert cli.main(["run", "--db", str(store.path), "--backend", "eager", *argv]) == 2
        assert one_line(capsys).startswith("invalid experiment: ")
    assert store.list() == []


def test_an_unknown_model_is_one_line_naming_how_to_find_one(capsys):
    """--model takes any SOURCE:NAME, so the spec (not argparse) refuses a name it cannot build."""
    assert cli.main(["run", "--model", "gpt9"]) == 2
    line = one_line(capsys)
    assert "unknown model 'gpt9'" in line and "python -m tcore models" in line


def test_a_file_model_without_a_tiny_preset_runs_at_a_preset_it_has(tmp_path, monkeypatch):
    """`--model file:m.py` for a file whose only preset is 'default' stopped with "unknown preset 'tiny'": the
    command line, as the page, starts a model at a preset it has."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.py").write_text(
        "import torch\n\n"
        "def build(preset):\n    return torch.nn.Linear(8, 1)\n\n"
        "def make_batch(preset, batch_size, device, generator):\n"
        "    return (torch.randn(batch_size, 8, device=device, generator=generator),), "
        "torch.randn(batch_size, 1, device=device, generator=generator)\n")
    args = cli.Parser(prog="tcore")
    sub = args.add_subparsers(dest="command")
    flags.add_spec_args(sub.add_parser("run"))
    exp = flags.experiment_from_args(args.parse_args(["run", "--model", "file:m.py", "--device", "cpu"]))
    import sample_models
    assert exp.preset in sample_models.get(exp.model).presets


@pytest.mark.parametrize("command", [["list"], ["show", "x"], ["run", "--backend", "eager"], ["store", "set-aside"]])
@pytest.mark.parametrize("empty", ["", "  "])
def test_an_empty_db_path_is_refused_not_taken_for_the_default(command, empty, capsys, tmp_path, monkeypatch):
    default = tmp_path / "default.sqlite"
    monkeypatch.setenv("COMPILE_LAB_DB", str(default))
    assert cli.main([*command, "--db", empty]) == 2
    assert "the run store's path is empty" in one_line(capsys)
    assert not default.exists()  # the default store was neither made nor touched


def test_the_command_line_reads_the_history_before_the_run_is_queued(tmp_path, monkeypatch):
    """Once a run is under way, a full disk can break any read of the store; the command line's own history read
    comes first, so only the run's reads meet it, and each says so in words (tests/test_full_disk.py: a run of that
    test once read the history while the disk filled and exited 2, "the run store cannot be read")."""
    from tcore.lab.run import runs

    said = []
    monkeypatch.setattr(cli, "_history_before", lambda store, exp: said.append("history") or [])

    def start(*args, **kwargs):
        said.append("queued")
        raise SpecError("stopped here by the test")

    monkeypatch.setattr(runs, "start", start)
    assert cli.main(["run", "--db", str(tmp_path / "runs.sqlite"), "--model", "captioner", "--preset", "tiny",
                     "--device", "cpu", "--backend", "eager", "--quiet"]) == 2
    assert said == ["history", "queued"]


def test_a_finished_run_whose_history_cannot_be_read_says_so_in_a_line(tmp_path):
    import sqlite3
    from types import SimpleNamespace

    class FullStore:
        def same_setting(self, *args, **kwargs):
            raise sqlite3.OperationalError("disk I/O error")

    record = SimpleNamespace(result={"speedup": 1.2}, spec={}, device="cpu", env={}, created_at=0.0, id="r1")
    assert cli._history_lines(FullStore(), record) == [
        "earlier runs of this setting: n/a, the run store could not be read (disk I/O error)"]


@pytest.mark.parametrize("argv, says", [
    (["run", "--preset", "p" * 10_000], "unknown preset '" + "p" * 60 + "…' (10000 characters) for captioner"),
    (["run", "--model", "m" * 10_000], "unknown model '" + "m" * 60 + "…' (10000 characters); choose one of"),
    (["run", "--backend", "b" * 10_000], "invalid choice: '" + "b" * 60 + "…' (10000 characters)"),
    (["show", "r" * 10_000], "no run '" + "r" * 60 + "…' (10000 characters) in "),
    (["run", "--model", "file:" + "f" * 10_000], "file:" + "f" * 55 + "… (10005 characters) "),
])
def test_a_refusal_cuts_a_long_input_it_repeats(argv, says, store, capsys):
    try:
        code = cli.main([*argv, "--db", str(store.path)])
    except SystemExit as e:  # argparse's own refusals
        code = e.code
    assert code in (1, 2)
    line = one_line(capsys)
    assert says in line and len(line) < 600, line[:300]


def _finished_run_labelled(store, label: str) -> str:
    """A finished run whose label is `label`, as a model file's preset and path can make it."""
    run_id = insert_run(store, QUICK, status="finished")
    with store._write() as db:
        db.execute("UPDATE runs SET label=? WHERE id=?", (label, run_id))
    return run_id


def test_a_label_with_control_characters_is_one_line_as_typed_in_list_and_show(store, capsys):
    """A label carries a model file's preset and path, anyone's words: one with a line break wrote a made-up row into
    `tcore list`, a carriage return wrote over its own row, and an escape sequence (clear the screen, retitle the
    window) reached the terminal of whoever listed a shared store. Each such character is written as its escape."""
    evil = "tiny\n20260101-000000-ffffff  2026-01-01 00:00  finished  fake\r\x1b[2J\x1b]0;owned\x07\u2028x"
    run_id = _finished_run_labelled(store, evil)
    assert cli.main(["list", "--db", str(store.path)]) == 0
    listed = capsys.readouterr().out
    assert listed.count("\n") == 1 and "\x1b" not in listed and "\r" not in listed and "\u2028" not in listed, listed
    assert "tiny\\n20260101-000000-ffffff" in listed and "\\x1b[2J" in listed
    assert cli.main(["show", run_id, "--db", str(store.path)]) == 0
    shown = capsys.readouterr().out
    assert "\x1b" not in shown and "\r" not in shown and shown.startswith("tiny\\n20260101"), shown


def test_a_failed_run_s_message_reaches_the_terminal_with_its_escapes_written_out(store, capsys):
    """A failed run's message is a model file's own exception, anyone's words: `tcore show` printed it raw, so its
    ESC sequences cleared the screen and coloured the rest, and a right-to-left override reversed it, in the terminal
    of whoever showed the run. Its lines stay lines; each control and bidi character is written as its escape."""
    run_id = insert_run(store, QUICK)
    store.finish(run_id, error={"kind": "crashed", "message": "RuntimeError: \x1b[2J\x1b[31mRED\x1b[0m \u202etxt.exe"
                                                              "\nsecond line\r"})
    assert cli.main(["show", run_id, "--db", str(store.path)]) == 0
    shown = capsys.readouterr().out
    assert "\x1b" not in shown and "\u202e" not in shown and "\r" not in shown, shown
    assert "RuntimeError: \\x1b[2J\\x1b[31mRED\\x1b[0m \\u202etxt.exe\nsecond line\n" in shown, shown


def test_a_label_with_bidirectional_overrides_is_listed_in_the_order_it_was_typed(store, capsys):
    """A model file's preset "tiny<U+202E> gnp.exe" (right-to-left override) showed in a terminal as "tiny exe.png",
    and the override reversed the rest of its row of `tcore list` too (its status, its figures): the bidirectional
    controls are written as their escapes, as the control characters are, so a row reads in the order it was typed."""
    evil = "tiny\u202e gnp.exe\u2066x\u2069\u200f"
    run_id = _finished_run_labelled(store, evil)
    assert cli.main(["list", "--db", str(store.path)]) == 0
    listed = capsys.readouterr().out
    assert not any(c in listed for c in "\u202e\u2066\u2069\u200f"), ascii(listed)
    assert "tiny\\u202e gnp.exe\\u2066x\\u2069\\u200f" in listed, ascii(listed)
    assert cli.main(["show", run_id, "--db", str(store.path)]) == 0
    assert "\u202e" not in capsys.readouterr().out


def test_a_run_whose_row_cannot_be_read_is_listed_as_unreadable_and_the_others_as_before(store, capsys):
    """One row with malformed JSON made `tcore list` and `tcore show` (of any run) a traceback for everyone, and
    `tcore run` "malformed JSON": it is one row of the listing, saying which column and how it goes."""
    good = insert_run(store, QUICK, status="finished")
    bad = insert_run(store, QUICK, status="finished")
    with store._write() as db:
        db.execute("UPDATE runs SET spec='{not json' WHERE id=?", (bad,))
    assert cli.main(["list", "--db", str(store.path)]) == 0
    out, err = capsys.readouterr()
    rows = {line.split()[0]: line for line in out.splitlines()}
    assert set(rows) == {good, bad} and err == "", err
    assert "finished" in rows[bad] and "[unreadable: its spec column is not JSON (" in rows[bad]
    assert rows[good].endswith("[finished]")
    assert cli.main(["show", bad, "--db", str(store.path)]) == 0
    shown = capsys.readouterr().out
    assert f"run {bad} cannot be read: its spec column is not JSON" in shown and "on the Compare page" in shown
    assert cli.main(["show", good, "--db", str(store.path)]) == 0
    assert capsys.readouterr().out.endswith("finished: None: None\n")


def test_show_names_a_field_only_a_newer_version_knows_and_shows_the_rest(store, capsys):
    """`tcore show` of a run whose spec has a field this version does not know (a newer version sharing the store
    wrote it) was a traceback from the advice (Experiment.from_dict): one line names the field."""
    run_id = insert_run(store, QUICK)
    store.finish(run_id, result={"device": "cpu", "speedup": 1.2, "compile_s": 1.0,
                                 "variants": ["eager", "compiled"]})
    with store._write() as db:
        db.execute("UPDATE runs SET spec=json_set(spec, '$.future_knob', 3) WHERE id=?", (run_id,))
    assert cli.main(["show", run_id, "--db", str(store.path)]) == 0
    out, err = capsys.readouterr()
    assert "Compile time" in out and "history: " in out and err == "", err
    assert [line for line in out.splitlines() if "future_knob" in line] == [
        "try next: n/a, its settings have a field this version of Compile Lab does not know (future_knob), written "
        "by a newer version sharing the run store"]
