"""The Sweep page headless (AppTest): settings crossed, invalid ones skipped, a two-run sweep one run at a time, a
cancelled sweep, and a sweep with nothing to cross."""
import time

from tcore.experiment.spec import Experiment
from tcore.lab import sweeps
from tcore.lab.run import registry
from tests.app_harness import app, db, texts  # noqa: F401 (the db fixture)


def test_sweep_crosses_settings_and_skips_invalid_ones():
    base = Experiment(model="captioner", device="cpu", backend="aot_eager")
    experiments, skipped = sweeps.cross(base, {"compile": ["off", "whole"], "mode": ["default", "max-autotune"]})
    assert [(e.compile, e.mode) for e in experiments] == [("off", "default"), ("whole", "default")]
    assert experiments[0].backend == "inductor"  # the eager baseline ignores the base's backend
    assert len(skipped) == 2 and all("max-autotune" in s for s in skipped)
    assert "compile settings (mode, dynamic, fullgraph, backend) need compile=whole or regional" in skipped[0]


def test_two_run_sweep_runs_one_at_a_time_and_its_page_names_the_best(db):
    base = Experiment(model="captioner", device="cpu", backend="aot_eager", batch_size=2, timed_steps=4, rounds=2,
                      warmup_steps=2)
    experiments, _ = sweeps.cross(base, {"compile": ["whole", "regional"]})
    sweep_id = sweeps.start(experiments, db)
    at = app().switch_page("app_pages/sweep.py").run()  # a fresh session finds the running sweep
    assert not at.exception
    assert any(s.value.startswith("Sweep running") for s in at.subheader)
    deadline = time.time() + 1800  # only against a hang: a loaded machine is slow, not wrong
    while not sweeps.get(sweep_id, db).done:
        assert len([r for r in registry.active() if r.status == "running"]) <= 1  # never two runs at once
        assert time.time() < deadline, "the sweep did not finish within 1800 s"
        time.sleep(0.5)
    sweep = sweeps.get(sweep_id, db)
    assert [r.status for r in sweep.runs] == ["finished", "finished"] and sweep.finished_count == 2

    at.run()
    assert not at.exception
    assert any(s.value == "Sweep finished: 2 of 2 runs finished" for s in at.subheader)
    # What every run shared, since the knobs beside it may have moved on (or reset, after a refresh).
    assert "fp32 inference, batch 2, backend aot_eager, 4 steps per variant in 2 rounds" in texts(at.caption)
    # a setting named the fastest, or the two said to be not told apart (these short runs' intervals may overlap)
    # aot_eager compiles no code: the sweep says so rather than crowning a setting
    assert texts(at.success).startswith("None of these settings compiled code (backend aot_eager")
    assert len(at.get("plotly_chart")) == 1  # the heatmap
    assert at.button(key="sweep_start").disabled is False


def test_cancelled_sweep_starts_no_further_runs(db):
    base = Experiment(model="captioner", device="cpu", backend="aot_eager", batch_size=2, timed_steps=4, rounds=2)
    sweep_id = sweeps.start(sweeps.cross(base, {"compile": ["whole", "regional"]})[0], db)
    while sweeps.get(sweep_id, db).runs[0].status == "queued":
        time.sleep(0.05)
    sweeps.cancel(sweep_id, db)
    deadline = time.time() + 1800  # only against a hang
    while not sweeps.get(sweep_id, db).done:
        assert time.time() < deadline, "the cancelled sweep did not stop within 1800 s"
        time.sleep(0.2)
    sweep = sweeps.get(sweep_id, db)
    assert sweep.cancelled and [r.error_kind for r in sweep.runs] == ["cancelled", "cancelled"]
    assert sweep.runs[1].started_at is None  # the second never started
    assert "its sweep was cancelled" in sweep.runs[1].error["message"]

    # The page says what happened: cancelled, not failed, and no "None" in the cells of runs that never ran.
    at = app().switch_page("app_pages/sweep.py").run()
    at.session_state["sweep_id"] = sweep_id
    at.run()
    assert any(s.value == "Sweep cancelled: 0 of 2 runs finished, 2 cancelled" for s in at.subheader)
    table = at.dataframe[0].value
    assert list(table.status) == ["cancelled", "cancelled"] and "None" not in table.astype(str).to_string()


def test_a_sweep_started_in_the_browser_belongs_to_the_person_who_started_it(db):
    """A guest's sweep runs were owned by "the command line or a sweep" in every queue view, and were not in the guest's
    "Your runs" on the Run page. They are the guest's now, and do not count against the guest's waiting-run limit."""
    from tcore.lab.run import runs
    from ui.panels import queue

    runs.pause(db, True)  # nothing starts: the runs wait in the queue, as a sweep's do behind others
    try:
        at = app().switch_page("app_pages/sweep.py").run()
        me = at.session_state["owner"]
        at.button(key="sweep_start").click().run()
        assert not at.exception
        sweep = sweeps.get(at.session_state["sweep_id"], db)
        assert len(sweep.runs) >= 2 and {r.owner for r in sweep.runs} == {me} and sweep.owner == me
        assert {queue.whose(r.owner, me) for r in sweep.runs} == {"yours"}
        assert db.queue.queued_count(me) == 0 and runs.places_left(me, db)[0] == runs.places_left("x", db)[0]
        at.switch_page("app_pages/run.py").run()
        assert not at.exception
        shown = at.session_state["run_shown"]
        assert shown in {r.id for r in sweep.runs}  # the newest of "Your runs" is one of the sweep's
    finally:
        sweeps.cancel(sweep.id, db)
        runs.pause(db, False)


def test_a_sweep_cancelled_before_any_run_started_says_so(db):
    """"Cancel the sweep" said "Cancelling the current run" with nothing running yet."""
    from tcore.lab.run import runs

    base = Experiment(model="captioner", device="cpu", backend="eager", batch_size=2, timed_steps=2, rounds=1)
    runs.pause(db, True)  # nothing starts
    try:
        sweep_id = sweeps.start(sweeps.cross(base, {"compile": ["whole", "regional"]})[0], db)
        at = app().switch_page("app_pages/sweep.py").run()
        at.button(key=f"sweep_cancel_{sweep_id}").click().run()
        assert not at.exception
        said = [str(t.value) for t in at.toast]
        assert "Sweep cancelled: none of its runs had started, and none will." in said, said
        assert not any("current run" in t for t in said), said
        assert [r.error_kind for r in sweeps.get(sweep_id, db).runs] == ["cancelled", "cancelled"]
    finally:
        runs.pause(db, False)


def test_a_sweep_with_nothing_to_cross_says_what_to_pick(db):
    at = app().switch_page("app_pages/sweep.py").run()
    at.multiselect(key="sweep_mode").set_value([]).run()
    assert "**Nothing to run.** Pick at least one value for: mode" in texts(at.warning)
    assert at.button(key="sweep_start").disabled


def test_a_generate_sweep_crosses_prompt_and_new_token_lengths(db):
    at = app().switch_page("app_pages/sweep.py").run()
    at.radio(key="sweep_task").set_value("generate").run()
    assert not at.exception
    assert at.multiselect(key="sweep_prompt_lens").value == [0] and at.multiselect(key="sweep_new_tokens").value == [0]
    at.multiselect(key="sweep_compile").set_value(["whole"]).run()
    at.multiselect(key="sweep_prompt_lens").set_value([0, 4, 8]).run()
    at.multiselect(key="sweep_new_tokens").set_value([8, 512]).run()
    assert not at.exception
    # 3 prompts x 2 outputs; the captioner tiny has 16 positions, so every 512-token output is skipped, said why
    assert "**3 runs** to do, 3 combinations skipped." in texts(at.markdown)
    assert "prompt_len=4, new_tokens=512: prompt_len + new_tokens = 516 is more than the 16 positions" in \
        texts(at.markdown) + texts(at.text)


def test_the_generation_lengths_name_the_sweep_matrix_columns():
    from ui.words import sweep_matrix

    base = Experiment(model="captioner", device="cpu", task="generate", backend="aot_eager")
    experiments, skipped = sweeps.cross(base, {"prompt_len": [4, 6], "new_tokens": [0, 8]})
    assert not skipped and [(e.prompt_len, e.new_tokens) for e in experiments] == [(4, 0), (4, 8), (6, 0), (6, 8)]
    frame = sweep_matrix.sweep_matrix(experiments, ["waiting"] * 4)
    assert list(frame["col"]) == ["4-token prompt · default new tokens", "4-token prompt · 8 new tokens",
                                  "6-token prompt · default new tokens", "6-token prompt · 8 new tokens"]


def test_the_cpu_words_count_earlier_runs_one_way_and_give_one_figure_for_how_far_a_rerun_moves(db):
    """The solid-figure caption said "seven runs" and "about ± 20%" beside an outlook of "3 earlier runs" and "± 17%",
    and a noisy run's advice "its third earlier run": one count and one figure, the outlook's."""
    from tcore.figures import rerun
    from ui.words import run_words

    at = app().switch_page("app_pages/sweep.py").run()
    assert not at.exception
    said = next(c.value for c in at.caption if "A solid figure on this CPU" in c.value)
    reach = rerun.outlook([], "cpu").reach_pct
    assert f"once {rerun.MIN_HISTORY} earlier runs of the setting are stored" in said and "seven" not in said
    assert f"of reruns should land within ± {reach:.0f}% of their median" in said and "± 20%" not in said
    assert f"within ± {reach:.0f}% of their median" in rerun.outlook([], "cpu").words()  # the outlook before a run
    advice = run_words.noise_advice({"device": "cpu", "speedup_rounds_pm_pct": 1.0, "speedup_between_pct": 10.0})
    assert f"once {rerun.MIN_HISTORY} earlier runs of it with an interval of their own are stored here" in advice
    assert "third" not in advice


def test_a_generate_sweep_on_the_cpu_starts_from_the_run_pages_lengths(db):
    """The Sweep page's axes started at the model's 128 + 256 tokens, which ran past a run's time limit on the CPU,
    while the Run page starts at a few dozen there."""
    from tcore.experiment.device import CPU_NEW_TOKENS, CPU_PROMPT_TOKENS

    at = app().switch_page("app_pages/sweep.py").run()
    at.radio(key="sweep_source").set_value("hf").run()  # picks hf:gpt2, whose own lengths are 128 + 256
    at.radio(key="sweep_device").set_value("cpu").run()
    at.radio(key="sweep_task").set_value("generate").run()
    assert not at.exception and at.session_state["sweep_model"] == "hf:gpt2"
    assert at.multiselect(key="sweep_prompt_lens").value == [CPU_PROMPT_TOKENS]
    assert at.multiselect(key="sweep_new_tokens").value == [CPU_NEW_TOKENS]
    at.multiselect(key="sweep_new_tokens").set_value([CPU_NEW_TOKENS, 8]).run()  # a pick is kept while the model is
    assert at.multiselect(key="sweep_new_tokens").value == [CPU_NEW_TOKENS, 8]
    at.radio(key="sweep_source").set_value("builtin").run()  # the captioner's own lengths are shorter: "default"
    assert at.multiselect(key="sweep_prompt_lens").value == [0] and at.multiselect(key="sweep_new_tokens").value == [0]


def test_the_sweep_says_why_its_rounds_stop_no_sooner_than_six_when_fewer_were_asked():
    """Walk 7: with Rounds 2 the sweep's caption said "after 6 at the fewest" and no word of the 2."""
    from tcore.store.records import RunRecord
    from tcore.store.sweep_records import SweepRecord
    from ui.panels import live

    def said(rounds: int) -> str:
        spec = Experiment(model="captioner", device="cpu", rounds=rounds, timed_steps=None).to_dict()
        run = RunRecord(id="r", status="queued", created_at=0.0, label="x", spec=spec)
        return live.sweep_settings(SweepRecord("s", 0.0, None, "x", 1, [], False, runs=[run]))

    assert "after 6 at the fewest; 2 asked, and 6 are the fewest for a 95% interval, or the seconds" in said(2)
    assert "after 8 at the fewest" in said(8) and "asked" not in said(8)
