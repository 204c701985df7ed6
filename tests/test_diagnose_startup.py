"""The Diagnose page's "Start-up and stances" tab: the start-up ladder and the set_stance probes, which lived on the
command line alone, started from the page, followed while they run, then read as a table and sentences.

The page's tests replace the ladder's fresh processes with made-up step reports (tests/test_ladder.py climbs it for
real) and the stance probes' process with its JSON; one test runs that process for real, through tcore.lab.probes."""
import time

import pytest

from tcore.experiment.spec import Experiment
from tcore.lab import ladder, probes
from tests.app_harness import app, db, texts  # noqa: F401 (the db fixture)
from tests.test_ladder import report

TAB = "Start-up and stances"


def opened(at):
    at.switch_page("app_pages/diagnose.py").run()
    at.session_state["diagnose_tab"] = TAB
    return at.run()


def wait_done(probe_id: str, limit_s: float = 300) -> probes.Probe:
    deadline = time.time() + limit_s
    while not probes.get(probe_id).done:
        assert time.time() < deadline, f"{probe_id} still running after {limit_s} s"
        time.sleep(0.1)
    return probes.get(probe_id)


def test_the_tab_names_each_rung_and_stance_in_the_run_pages_words(db):
    at = opened(app())
    assert not at.exception
    words = texts(at.markdown)
    assert "**warm**: torch.compile again on the cold rung's cache folders: a restart on this machine (the Run " \
           "page's cache=warm)" in words
    assert ("artifacts loaded, as a new machine that ships its cache (the Run page's cache=artifacts, the same "
            "bundle)") in words
    assert "**eager_then_compile**: a function's first call runs eagerly, its second compiles" in words
    assert {b.key for b in at.button} >= {"diag_ladder_start", "diag_stance_start"}


def test_a_ladder_started_on_the_page_shows_its_steps_then_its_table(db, monkeypatch):
    def climbed(spec_json, rungs, *, timeout_s=None, on_step=None, stop=None):
        steps = {"eager": report("eager", 2.0, 50.0), "cold": report("cold", 40.0, 100.0),
                 "warm": report("warm", 10.0, 100.0)}
        for step, found in steps.items():
            on_step(step, {**found, "process_wall_s": found["phases"]["first_result_s"]})
        return {"spec": {}, "device": "cpu", "device_name": "cpu", "torch": "2.x", "steps": steps,
                "rungs": ladder.summarize(steps, rungs)}

    monkeypatch.setattr(ladder, "ladder", climbed)
    at = opened(app())
    at.multiselect(key="diag_ladder_rungs").set_value(["eager", "cold", "warm"])
    at.button(key="diag_ladder_start").click().run()
    assert not at.exception
    probe = wait_done(at.session_state["diag_ladder_probe"])
    assert probe.steps == ["eager: 2.0 s; first result after 2.0 s (s: imports 0.50, first call 1.50)",
                           "cold: 40.0 s; first result after 40.0 s (s: imports 0.50, first call 39.50)",
                           "warm: 10.0 s; first result after 10.0 s (s: imports 0.50, first call 9.50)"]
    at.run()
    table = next(d.value for d in at.dataframe if "rung" in d.value.columns)
    assert list(table["rung"]) == ["eager first call", "cold compile", "warm local caches"]
    assert list(table["vs cold"])[1:] == ["1.00x", "0.25x"]
    # each figure with its unit, n/a where there is none (the table showed "1.9321", "1361.375", "None")
    assert list(table["first result"]) == ["2.00 s", "40.00 s", "10.00 s"]
    assert list(table["throughput"])[1:] == ["100.0 samples/s", "100.0 samples/s"] and "None" not in str(table)
    assert ("**warm local caches** reached its first result in 10.0 s against the cold compile's 40.0 s (0.25x)"
            in texts(at.markdown))
    assert "**eager first call** reached its first result in 2.0 s" in texts(at.markdown)
    assert any("what the Run page calls compile time" in c.value for c in at.caption)


def test_the_person_who_started_a_ladder_can_stop_it_and_keeps_the_steps_it_finished(db, monkeypatch):
    """A climb takes minutes on a CPU (AOTInductor builds the whole model's C++): the session that started it has a
    Stop button while it runs; a stop ends it at once and the page says so with the steps that finished. Another
    session following the same climb sees its steps but no Stop."""
    def climbed(spec_json, rungs, *, timeout_s=None, on_step=None, stop=None):
        on_step("eager", {**report("eager", 2.0, 50.0), "process_wall_s": 2.0})
        assert stop.wait(300), "the page's Stop never reached the climb"
        return ladder.climb(spec_json, ["cold"], step_runner=lambda *a, **kw: (_ for _ in ()).throw(
            ladder.Stopped(ladder.STOPPED_WORDS)), stop=None)

    monkeypatch.setattr(ladder, "ladder", climbed)
    at = opened(app())
    at.button(key="diag_ladder_start").click().run()
    probe_id = at.session_state["diag_ladder_probe"]
    deadline = time.time() + 300
    while not probes.get(probe_id).steps:
        assert time.time() < deadline
        time.sleep(0.05)
    at.run()
    assert "Each step is a fresh process that reports its phases" in texts(at.caption)  # why the one under way has none
    other = opened(app())
    assert f"diag_stop_{probe_id}" not in {b.key for b in other.button}  # following it is not owning it
    at.button(key=f"diag_stop_{probe_id}").click().run()
    probe = wait_done(probe_id)
    assert probe.stopped and probe.error == ladder.STOPPED_WORDS and probe.steps == [
        "eager: 2.0 s; first result after 2.0 s (s: imports 0.50, first call 1.50)"]
    at.run()
    assert not at.exception
    said = texts(at.info)
    assert "was stopped by the person who started it" in said and "- eager: 2.0 s" in said


CANNED = [
    {"stance": "fail_on_recompile", "sizes": [5, 11], "top": "captioner.py:185 forward", "raised": True,
     "error": "Detected recompile when torch.compile stance is 'fail_on_recompile'.",
     "failed_guards": ["0/0: tensor 'tokens' size mismatch at index 1. expected 5, actual 11"],
     "calls": [{"size": 5, "stance": "default", "compiled": True, "frames": ["forward"],
                "where": ["captioner.py:185 forward"], "top": True, "reasons": [], "ms": 900.0, "correctness_ok": True,
                "note": "warm-up"},
               {"size": 5, "stance": "fail_on_recompile", "compiled": False, "frames": [], "where": [], "top": False,
                "reasons": [], "ms": 2.0, "correctness_ok": True, "note": "the same shape again"}]},
    {"stance": "eager_then_compile", "sizes": [5, 11], "top": "captioner.py:185 forward", "compiles": 2,
     "top_compiled_at_call": 2, "inner_compiled_first": ["captioner.py:122 forward"],
     "calls": [{"size": 5, "stance": "eager_then_compile", "compiled": True, "frames": ["forward"],
                "where": ["captioner.py:122 forward"], "top": False, "reasons": [], "ms": 300.0,
                "correctness_ok": True, "note": "the model's forward ran eagerly, yet 1 compile ran inside it"},
               {"size": 11, "stance": "eager_then_compile", "compiled": True, "frames": ["forward"],
                "where": ["captioner.py:185 forward"], "top": True, "reasons": [], "ms": 800.0,
                "correctness_ok": True, "note": "the model's forward compiled"}]},
]


def test_stance_probes_started_on_the_page_show_each_call_and_what_it_means(db, monkeypatch):
    seen = []

    def probed(exp, *, timeout_s, on_line, stop=None):
        seen.append(exp)
        on_line("fail_on_recompile: done")
        return CANNED

    monkeypatch.setattr(probes, "run_stances", probed)
    at = opened(app())
    at.number_input(key="diag_stance_count").set_value(2)
    at.button(key="diag_stance_start").click().run()
    probe = wait_done(at.session_state["diag_stance_probe"])
    assert probe.steps == ["fail_on_recompile: done"]
    assert seen[0].shape_count == 2 and seen[0].backend == "eager"  # Dynamo's side, in seconds on this CPU
    at.run()
    assert not at.exception
    words = texts(at.markdown)
    assert "A new size raised instead of recompiling" in words
    assert "The model's forward (`captioner.py:185 forward`) ran eagerly on call 1 and compiled on call 2" in words
    assert "Yet call 1 was not all eager: 1 compile ran inside it (`captioner.py:122 forward`)" in words
    calls = next(d.value for d in at.dataframe if "what happened" in d.value.columns and len(d.value) == 2
                 and list(d.value["under"]) == ["eager_then_compile"] * 2)
    assert list(calls["compiled"]) == ["captioner.py:122 forward", "captioner.py:185 forward"]


def test_one_probe_of_a_kind_at_a_time(monkeypatch):
    monkeypatch.setattr(probes, "run_stances", lambda exp, *, timeout_s, on_line, stop=None: time.sleep(1) or [])
    exp = Experiment(model="captioner", preset="tiny", batch_size=2, device="cpu", backend="eager", shape_count=2)
    first = probes.start_stances(exp)
    with pytest.raises(probes.Busy, match="one at a time"):
        probes.start_stances(exp)
    assert wait_done(first.id).result == [] and probes.latest("stances") is first


def test_the_stance_probes_run_in_a_fresh_process_from_the_lab():
    lines = []
    exp = Experiment(model="captioner", preset="tiny", batch_size=2, device="cpu", backend="eager", shape_count=3)
    found = probes.run_stances(exp, timeout_s=600, on_line=lines.append)
    assert [p["stance"] for p in found] == ["fail_on_recompile", "eager_on_recompile", "eager_then_compile"]
    assert lines == [f"{p['stance']}: done" for p in found]
    etc = found[-1]
    assert etc["top_compiled_at_call"] == 2 and etc["inner_compiled_first"]


def test_a_model_file_the_lab_does_not_allow_is_refused_before_any_process_starts(monkeypatch):
    """Its code would run in the probes' processes: the gate every run the app queues passes applies here too."""
    from tcore.experiment.spec import SpecError
    from tcore.lab.policy import limits

    monkeypatch.setattr(limits, "files_allowed", lambda *a, **k: False)
    exp = Experiment(model="captioner", preset="tiny", device="cpu", backend="eager", shape_count=2)
    object.__setattr__(exp, "model", "file:examples/my_model.py")  # named, not read: the gate is what is tested
    with pytest.raises(SpecError, match="allow_files"):
        probes.start_ladder(exp, ["eager"])
    with pytest.raises(SpecError, match="allow_files"):
        probes.start_stances(exp)
