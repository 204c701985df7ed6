"""Reading a model file's card in a child (tcore.lab.outputs.model_files.describe): what the file prints stays out
of the lab's process, and a file that never finishes is stopped, with what it started, within the run's time limit,
and not started again for the same file."""
import os
import subprocess
import time
from pathlib import Path

import pytest

from sample_models.sources import UnknownModel
from tcore.lab.outputs import model_files

TINY = '''
import torch.nn as nn

PRESETS = {"tiny": {}}

def build(preset):
    return nn.Linear(8, 1)

def make_batch(preset, batch_size, device, generator):
    import torch
    return (torch.zeros(batch_size, 8, device=device),), torch.zeros(batch_size, 1, device=device)
'''


@pytest.fixture(autouse=True)
def no_kept_failures(monkeypatch):
    monkeypatch.setattr(model_files, "_FAILED", {}, raising=False)


def test_what_a_file_prints_never_comes_back_and_the_card_does(tmp_path):
    model = tmp_path / "chatty.py"
    # megabytes on both streams, and a last stdout line after the card was written: the card has its own channel
    model.write_text("import atexit, sys\nsys.stdout.write('x' * 4_000_000 + '\\n')\nsys.stderr.write('y' * 4_000_000)"
                     "\natexit.register(print, 'said last, on stdout')\n" + TINY)
    card = model_files.describe(f"file:{model}")
    assert card["presets"] == ["tiny"]


def test_a_file_that_dies_is_said_with_the_end_of_its_stderr_only(tmp_path):
    model = tmp_path / "dies.py"
    model.write_text("import os, sys\nsys.stderr.write('z' * 3_000_000 + '\\nthe last words\\n')\nsys.stderr.flush()\n"
                     "os._exit(3)\n")
    with pytest.raises(UnknownModel, match=r"ended with code 3: the last words$"):
        model_files.describe(f"file:{model}")


def test_the_tail_keeps_the_last_bytes_only():
    reader, writer = os.pipe()
    tail = model_files._Tail(os.fdopen(reader, "rb"))
    with os.fdopen(writer, "wb") as w:
        w.write(b"a" * (3 * model_files.STDERR_TAIL_BYTES) + b"end")
    tail.join()
    assert len(tail.kept) == model_files.STDERR_TAIL_BYTES and tail.kept.endswith(b"aend")


class _StartedFirst(subprocess.Popen):
    """A describe child whose time starts once the file has started its own child (written to `pid_file`), so the
    test does not depend on how fast this machine imports."""
    pid_file: Path

    def wait(self, timeout=None):
        while timeout is not None and not self.pid_file.exists() and self.poll() is None:
            time.sleep(0.05)
        return super().wait(timeout)


def _ended(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith(("Z", "X"))
    except (FileNotFoundError, ProcessLookupError):
        return True


def test_a_file_that_never_finishes_is_stopped_with_its_children_within_the_run_limit_once(tmp_path, monkeypatch):
    pid_file = tmp_path / "grandchild.pid"
    model = tmp_path / "loops.py"
    model.write_text(f"import subprocess, pathlib\nchild = subprocess.Popen(['sleep', '600'])\n"
                     f"pathlib.Path({str(pid_file)!r} + '.tmp').write_text(str(child.pid))\n"
                     f"pathlib.Path({str(pid_file)!r} + '.tmp').rename({str(pid_file)!r})\nwhile True:\n    pass\n")
    monkeypatch.setattr(_StartedFirst, "pid_file", pid_file, raising=False)
    monkeypatch.setattr(subprocess, "Popen", _StartedFirst)
    with pytest.raises(UnknownModel, match=r"timed out after 1 s"):
        model_files.describe(f"file:{model}", time_limit_s=1.0)  # the run's limit, under DESCRIBE_TIMEOUT_S
    grandchild = int(pid_file.read_text())
    while not _ended(grandchild):  # SIGKILLed with its group; init reaps it
        time.sleep(0.05)

    def no_second_child(*args, **kwargs):
        raise AssertionError("the same file was started again")

    monkeypatch.setattr(subprocess, "Popen", no_second_child)
    with pytest.raises(UnknownModel, match=r"timed out after 1 s"):
        model_files.describe(f"file:{model}", time_limit_s=1.0)  # the page's rerun: the kept failure
