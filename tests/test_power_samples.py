"""A run's power samples go into the store with its end (finish(power_samples=...)) and come back on its page."""
from tcore.experiment.protocol import PHASE_TITLES
from tcore.experiment.spec import Experiment
from tests.app_harness import app, chart_titled, db, stored_run, texts  # noqa: F401 (the db fixture)
from tests.helpers import insert_run, power_trace


def test_a_runs_power_samples_come_back_as_its_power_chart(db):
    exp = Experiment(model="captioner", device="cpu", backend="aot_eager")
    samples = power_trace(10.0)
    with_power = insert_run(db, exp)
    db.finish(with_power, result={"device": "cpu", "eager_steps_per_s": 10.0, "compiled_steps_per_s": 12.0},
              env={"device": "cpu"}, power_samples=samples)
    without = stored_run(db, exp.replace(compile="regional"))
    assert db.power_samples(with_power) == samples and db.power_samples(without) == []

    at = app().switch_page("app_pages/compare.py").run()
    at.selectbox(key="compare_detail").set_value(with_power).run()
    at.session_state["compare_detail_run_charts"] = "Power over the run"  # a lazy tab: drawn once opened
    at.run()
    assert not at.exception
    chart = chart_titled(at, "Power over the run, by phase")
    assert {PHASE_TITLES[phase] for _, _, phase, _ in samples} <= {line["name"] for line in chart["data"]}

    at.selectbox(key="compare_detail").set_value(without).run()
    assert "No power trace for this run" in texts(at.caption)
