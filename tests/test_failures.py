"""A run that fails inside its worker is said as what the lab knows (phase, module and op, the inputs against the
embedding tables), with the raw traceback kept beside the message; the worker that hit it is gone. The errors are
real: an out-of-range index on the CPU, and the error CUDA raises for a device-side assert, raised by the model."""
import os

from tcore.experiment.spec import Experiment
from tcore.lab.outputs import model_files
from tcore.lab.run import runs
from tests.app_harness import db  # noqa: F401 (the fixture)

MODEL = "file:tests/data/failing_model.py"


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _failed(store, preset):
    model_files.install(store, files_allowed=lambda: True)  # as the command line does: a child reads the file
    exp = Experiment(model=MODEL, preset=preset, batch_size=2, device="cpu", warmup_steps=1, timed_steps=2,
                     rounds=1, compile="off")
    live = runs.start(exp, store)
    record = live.wait()
    assert record.status == "failed", record.result
    assert _gone(live.handle.pid)  # the worker that hit the error is discarded
    return record.error


def test_an_index_past_the_table_names_phase_op_and_input(store):
    err = _failed(store, "index")
    assert err["kind"] == "crashed" and err["phase"] == "eager"
    assert err["op"] == "Embedding.forward → F.embedding"
    assert "IndexError" in err["message"] and "Eager baseline" in err["message"]
    assert "go up to 10" in err["message"] and "10 is past the end of embed" in err["message"]
    assert err["inputs"] == ["input 0: int64 (2, 4), values 0..10"]
    assert "Traceback" not in err["message"] and "Traceback" in err["traceback"]  # the raw trace, one click away


def test_a_cuda_error_is_said_as_what_the_lab_knows(store):
    err = _failed(store, "cuda")
    message = err["message"]
    assert message.startswith("RuntimeError: CUDA error: device-side assert triggered.")
    assert "asynchronously" not in message  # CUDA's own advice stays in the traceback
    assert err["op"] == "Tokens.forward" and "reported at Tokens.forward" in message
    assert "worker that hit it has ended" in message and "CUDA_LAUNCH_BLOCKING=1" in message
    assert "asynchronously reported" in err["traceback"]
    # the lab reran the forward on the CPU, where the bad index is raised at the op itself
    assert err["cpu_rerun"] == ("Rerun on the CPU, the same forward fails at Embedding.forward → F.embedding: "
                                "IndexError: index out of range in self.")
    assert err["cpu_rerun"] in message


def test_the_command_line_points_at_the_trace_instead_of_printing_it(tmp_path):
    import subprocess
    import sys

    from tcore.lab.settings.config import REPO_ROOT

    done = subprocess.run([sys.executable, "-m", "tcore", "run", "--db", str(tmp_path / "runs.sqlite"), "--model",
                           MODEL, "--preset", "index", "--compile", "off", "--device", "cpu", "--warmup-steps", "1",
                           "--timed-steps", "2", "--rounds", "1", "--quiet"],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    assert "past the end of embed" in done.stderr and "--json" in done.stderr
    assert ("Traceback (most recent call last)" not in done.stderr
            and "last lines of the worker's log" not in done.stderr)


def test_the_page_shows_the_message_and_keeps_the_trace_folded(db):
    from tests.app_harness import app, texts
    from tests.helpers import insert_run
    from ui.words.store_words import plain

    failed = insert_run(db, Experiment(model="captioner", device="cpu", backend="aot_eager"))
    db.finish(failed, error={"kind": "crashed", "message": "IndexError: index out of range in self. In the phase "
                             "'Eager baseline (warm-up)', raised at Embedding.forward → F.embedding.",
                             "phase": "eager", "op": "Embedding.forward → F.embedding",
                             "traceback": "Traceback (most recent call last):\n  File \"x.py\", line 1",
                             "log_tail": ["Traceback (most recent call last):"]})
    at = app().switch_page("app_pages/compare.py").run()
    at.multiselect(key="compare_status").set_value(["failed"]).run()
    assert not at.exception
    shown = texts(at.error)
    # as typed: the message's punctuation escaped for Markdown (a model file's exception is anyone's words)
    assert plain("raised at Embedding.forward → F.embedding") in shown and "Traceback" not in shown
    assert "the raw traceback is under Traceback below" in texts(at.caption)
    folded = {e.label: e.proto.expanded for e in at.expander}
    assert folded["Worker log (last lines)"] is False and folded["Traceback"] is False
