"""The headless app harness the test_app* files share: a fresh store per test, the app under AppTest, waiting for
a page to say something, stored runs with hand-made figures."""
import json
import time

import pytest
from streamlit.testing.v1 import AppTest

from tcore.experiment.spec import Experiment
from tcore.lab.run import registry
from tcore.store import RunStore
from tests.helpers import QUICK, insert_run


@pytest.fixture
def db(tmp_path, monkeypatch):
    """The store every page opens (RunStore() reads $COMPILE_LAB_DB), empty for each test."""
    monkeypatch.setenv("COMPILE_LAB_DB", str(tmp_path / "runs.sqlite"))
    yield RunStore()
    for run in registry.active():  # never leave a worker behind for the next test
        run.cancel()
        run.wait()


def app() -> AppTest:
    # The first run imports torch and the sample models: allow far more than AppTest's 3 s default.
    return AppTest.from_file("../app.py", default_timeout=300).run()


def texts(elements) -> str:
    return "\n".join(str(e.value) for e in elements)


def wait_for(at: AppTest, done, limit_s: float = 300) -> AppTest:
    """Rerun the script, as the page's fragment would, until done(at); the limit only stops a hang."""
    deadline = time.time() + limit_s
    while not done(at):
        assert time.time() < deadline, f"gave up after {limit_s} s; page says: {texts(at.markdown)[:500]}"
        assert not at.exception, at.exception
        time.sleep(1)
        at.run()
    return at


def set_tiny_fast(at: AppTest) -> AppTest:
    at.selectbox(key="run_builtin").set_value("captioner")
    at.selectbox(key="run_backend").set_value("aot_eager")
    at.number_input(key="run_batch_size").set_value(2)
    at.radio(key="run_timed_by").set_value("steps").run()
    at.number_input(key="run_timed_steps").set_value(4)
    at.number_input(key="run_rounds").set_value(2)
    return at.run()


def stored_run(store: RunStore, exp: Experiment, **result) -> str:
    """A finished run with hand-made figures, as the worker would have recorded it."""
    run_id = insert_run(store, exp)
    batch = exp.batch_size
    figures = {"device": "cpu", "eager_steps_per_s": 10.0, "eager_samples_per_s": 10.0 * batch,
               "compiled_steps_per_s": 12.0, "compiled_samples_per_s": 12.0 * batch, "eager_energy_j_per_step": None,
               "compiled_energy_j_per_step": None, "unavailable": {"eager_energy_j_per_step": "no RAPL here"},
               **result}
    store.finish(run_id, result=figures, env={"torch": "2.13.0+cpu", "device": "cpu"})
    return run_id


def unlock(at: AppTest, passcode: str) -> AppTest:
    at.switch_page("app_pages/system.py").run()
    at.text_input(key="instructor_attempt").set_value(passcode)
    next(b for b in at.button if b.label == "Unlock").click().run()
    return at


def figure(chart) -> dict:
    """The plotly figure an AppTest plotly_chart element carries, as JSON."""
    return json.loads(chart.proto.spec)


def chart_titled(at: AppTest, start: str) -> dict:
    return next(f for f in map(figure, at.get("plotly_chart")) if f["layout"]["title"]["text"].startswith(start))


EAGER_TINY = QUICK  # the tests' one quick experiment (tests.helpers), by the name the Diagnose tests use
