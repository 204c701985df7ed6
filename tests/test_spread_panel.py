"""This machine's spread between fresh processes on the System page (ui.panels.spread, tcore.lab.calibrate.standing):
what the store's reruns taught it, what that rests on and how old it is, and the instructor's reset."""
from streamlit.testing.v1 import AppTest

from tcore.experiment.spec import Experiment
from tcore.lab import calibrate
from tcore.lab.rerun_outlook import machine_env
from tcore.store import RunStore
from tests.helpers import insert_run


def _reruns(store: RunStore) -> None:
    """Two CPU settings run three times each on this machine, as the lab stores them."""
    env = machine_env("cpu")
    for model, centre in (("captioner", 1.3), ("resnet50", 1.1)):
        exp = Experiment(model=model, preset="tiny", device="cpu")
        for d in (-1, 0, 1):
            run_id = insert_run(store, exp)
            speedup = centre * (1 + 0.03 * d)
            store.finish(run_id, env=env, result={"device": "cpu", "speedup": speedup, "speedup_low": 0.97 * speedup,
                                                   "speedup_kind": "cpu", "speedup_within_pct": 0.5})


def _table(at) -> str:
    return at.dataframe[0].value.to_string()


def test_the_system_page_shows_the_machines_spread_its_age_and_an_instructor_resets_it(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPILE_LAB_DB", str(tmp_path / "runs.sqlite"))
    monkeypatch.setenv("COMPILE_LAB_INSTRUCTOR_PASSCODE", "sesame")
    store = RunStore()
    _reruns(store)
    (cpu,) = calibrate.standing(store, "cpu")
    assert cpu.runs == 6 and cpu.settings == 2 and 1.0 < cpu.sigma_pct < 6.0 and cpu.newest_at is not None
    at = AppTest.from_file("../app.py", default_timeout=300).run()
    at.switch_page("app_pages/system.py").run()
    assert not at.exception, at.exception
    table = next(d for d in at.dataframe if "kind of run" in d.value.columns).value
    row = table.iloc[0]
    assert row["kind of run"] == "CPU runs" and row["rests on"] == "6 reruns of 2 setting(s)"
    assert row["learned σ"] == f"{cpu.sigma_pct:.2f}%" and row["age"].startswith("newest run ")
    assert "10% (the CPU's starting value)" == row["starting value"]
    said = "\n".join(str(c.value) for c in at.caption)
    assert "starts from the CPU's starting value (σ 10%" in said and "GPU model" not in said  # a CPU-only machine
    assert not any(b.key == "spread_reset" for b in at.button)  # a participant cannot reset it

    at.text_input(key="instructor_attempt").set_value("sesame")
    next(b for b in at.button if b.label == "Unlock").click().run()
    at.button(key="spread_reset").click().run()  # asks first, as the instructor's Cancel of a person's run does
    assert not at.exception, at.exception
    assert calibrate.reset_at(store) is None and "There is no undo" in "\n".join(m.value for m in at.markdown)
    at.button(key="spread_reset_keep").click().run()
    assert calibrate.reset_at(store) is None and not any(b.key == "spread_reset_confirm" for b in at.button)
    at.button(key="spread_reset").click().run()
    at.button(key="spread_reset_confirm").click().run()
    assert not at.exception, at.exception
    assert calibrate.reset_at(store) is not None
    assert not any(b.key == "spread_reset_confirm" for b in at.button)
    row = next(d for d in at.dataframe if "kind of run" in d.value.columns).value.iloc[0]
    assert row["learned σ"] == "none yet" and row["rests on"] == "the starting value" and row["age"] == "n/a"
    assert row["a new setting gets σ"] == "10.00%"
    assert "since the instructor's reset" in "\n".join(str(c.value) for c in at.caption)
    _reruns(store)  # runs finished after the reset teach it again
    assert calibrate.standing(store, "cpu")[0].runs == 6


def test_the_spread_caption_says_where_the_starting_value_comes_from_on_each_machine():
    from types import SimpleNamespace as S

    from ui.panels.spread import start_words

    assert start_words("cpu", [S(start_pct=10.0, start_where="the CPU's starting value")]).startswith(
        "the CPU's starting value (σ 10%")
    measured = S(start_pct=0.4, start_where="measured on H100s (ResNet-50)")
    assert start_words("cuda", [measured]) == "what was measured on this GPU model"
    unknown = S(start_pct=2.0, start_where="a wide starting value for a GPU not measured yet (B200)")
    assert "has not been measured" in start_words("cuda", [measured, unknown])
