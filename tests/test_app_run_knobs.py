"""The Run page's knobs, headless: a value the page refuses turns Run off and says why, a batch far past the model's
practical one is warned about before it runs (its memory and time), the settings survive the loss of their widgets'
values, and the timeline's table and subtitle read as a person reads them. tests/test_browser_run_knobs.py checks the
same in Chromium, where a box's own bounds and a live fragment behave as they do for a person."""
from tcore.experiment.spec import Experiment
from tests.app_harness import app, db, stored_run, texts  # noqa: F401 (the db fixture)
from ui.panels import timeline_bar

OWNER = "ada~abcd.00000000c0ffee00"  # a name tag and its secret part, as the page keeps them


def app_as(owner: str):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file("../app.py", default_timeout=300)
    at.query_params["me"] = owner
    return at.run()


def will_run(at) -> list[str]:
    return [str(c.value) for c in at.caption if str(c.value).startswith("Will run")]


def test_a_batch_past_the_labs_limit_turns_run_off_and_says_why(db):
    """The box refused 1,000,000 in the browser without telling the page, and Run went on to run batch 8."""
    at = app()
    at.number_input(key="run_batch_size").set_value(1_000_000).run()
    assert not at.exception
    assert at.button(key="run_start").disabled
    assert not will_run(at)
    assert ("batch_size 1,000,000 is over this lab's limit (max_batch_size = 1024); choose a batch size of at most "
            "1,024") in texts(at.error)


def test_a_batch_past_the_specs_bound_turns_run_off_without_a_lab_limit(db, monkeypatch):
    monkeypatch.setenv("COMPILE_LAB_MAX_BATCH_SIZE", "none")
    at = app()
    at.number_input(key="run_batch_size").set_value(1_000_000).run()
    assert at.button(key="run_start").disabled
    assert "batch_size must be a whole number from 1 to 65536, not 1000000" in texts(at.error)
    at.number_input(key="run_batch_size").set_value(0).run()
    assert at.button(key="run_start").disabled and "not 0" in texts(at.error)
    at.number_input(key="run_batch_size").set_value(4).run()
    assert not at.button(key="run_start").disabled and "bs4 " in will_run(at)[0]


def test_measurement_boxes_past_their_bounds_turn_run_off(db):
    at = app()
    at.number_input(key="run_rounds").set_value(500).run()
    assert at.button(key="run_start").disabled and "rounds must be a whole number from 1 to 100" in texts(at.error)
    at.number_input(key="run_rounds").set_value(6)
    at.number_input(key="run_timeout_min").set_value(100_000).run()
    assert at.button(key="run_start").disabled
    assert "the time limit must be from 1 to 15 min" in texts(at.error) and "not 100000 min" in texts(at.error)
    at.number_input(key="run_timeout_min").set_value(10).run()
    assert not at.button(key="run_start").disabled


def test_a_batch_far_past_the_practical_one_is_warned_about_with_its_memory_and_time(db):
    """A batch of 1,024 training on the CPU queued with no word of its time or memory."""
    at = app()
    at.radio(key="run_task").set_value("training").run()
    at.number_input(key="run_batch_size").set_value(1024).run()
    warning = texts(at.warning)
    assert "**Batch 1,024 is 128× this model's practical batch on the CPU (8).**" in warning
    assert "It needs an estimated" in warning and "GiB (weights, gradients, AdamW state and activations)" in warning
    assert "No earlier run of this model, preset, task and precision on this machine says how long" in warning
    assert not at.button(key="run_start").disabled  # a warning: the person may still run it

    earlier = stored_run(db, Experiment(model="captioner", preset="tiny", batch_size=8, task="training",
                                        device="cpu"), eager_samples_per_s=80.0)
    at.run()
    warning = texts(at.warning)
    assert (f"A step should take about 13 s (run {earlier[-6:]} ran 80 samples/s eager at batch 8), so its first "
            "calls, warm-ups and fewest rounds alone, 20 steps, take about 4 min 16 s, and the compile comes on "
            "top.") in warning
    at.number_input(key="run_batch_size").set_value(16).run()
    assert "practical batch" not in texts(at.warning)  # twice the practical batch: nothing to warn about


def test_the_settings_come_back_when_their_widgets_values_are_lost(db):
    """After a visit to another page while the Run page followed a run, Streamlit had dropped every widget's value:
    the batch came back at 1 and the backend at its default (tests/test_browser_run_knobs.py: the real thing)."""
    at = app()
    at.number_input(key="run_batch_size").set_value(5)
    at.selectbox(key="run_backend").set_value("aot_eager").run()
    at.switch_page("app_pages/compare.py").run()
    for key in ("run_batch_size", "run_backend"):  # what the switch did to them in the browser
        del at.session_state[key]
    at.switch_page("app_pages/run.py").run()
    assert not at.exception
    assert at.number_input(key="run_batch_size").value == 5 and at.selectbox(key="run_backend").value == "aot_eager"
    assert "bs5 " in will_run(at)[0]
    # a model change sets that model's practical batch, and changing back sets the captioner's
    at.selectbox(key="run_builtin").set_value("resnet50").run()
    assert at.number_input(key="run_batch_size").value == 8
    at.number_input(key="run_batch_size").set_value(3)
    at.selectbox(key="run_builtin").set_value("captioner").run()
    assert at.number_input(key="run_batch_size").value == 8


def test_another_page_keeps_no_widget_default_that_stood_in_for_a_setting(db):
    """A click on Compare while a loaded machine still read hf:gpt2's sizes cut the Run page's run short: its token
    boxes stayed registered with no value from the browser, so the Compare run read them at their minimum, 0, and
    kept that. Back on Run: 128+256 tokens, minutes on the CPU, for a generation the page had set to 32+32."""
    at = app()
    at.radio(key="run_task").set_value("generate").run()
    at.radio(key="run_source").set_value("hf").run()
    assert "32\\+32 tokens" in will_run(at)[0]
    at.switch_page("app_pages/compare.py")
    for key in ("run_prompt_len", "run_new_tokens"):  # the boxes' defaults where the browser sent no value
        at.session_state[key] = 0
    at.run()
    at.switch_page("app_pages/run.py").run()
    assert not at.exception
    assert [at.number_input(key=k).value for k in ("run_prompt_len", "run_new_tokens")] == [32, 32]
    assert "hf\\:gpt2\\/tiny bs1 fp32 generate" in will_run(at)[0] and "32\\+32 tokens" in will_run(at)[0]


def test_a_reload_brings_the_knobs_back_as_it_brings_the_name_back(db):
    """A reload kept the name (its id is in the address) and put every knob back to its default."""
    from streamlit.testing.v1 import AppTest

    at = app()
    at.selectbox(key="run_builtin").set_value("resnet50").run()
    # the device and the task first: each brings its practical sizes and precision
    chosen = {"radio": {"run_device": "cpu", "run_task": "training", "run_compile": "regional",
                        "run_dynamic": "always dynamic", "run_cache": "warm"},
              "number_input": {"run_batch_size": 3, "run_timed_s": 3.5, "run_warmup_steps": 4},
              "selectbox": {"run_preset": "full", "run_precision": "tf32", "run_mode": "max-autotune"},
              "toggle": {"run_channels_last": True, "run_compile_optimizer": True}}
    for kind, values in chosen.items():
        for key, value in values.items():
            getattr(at, kind)(key=key).set_value(value).run()
    assert not at.exception
    made = {key: getattr(at, kind)(key=key).value for kind, values in chosen.items() for key in values}
    assert made == {key: value for values in chosen.values() for key, value in values.items()}  # as set

    reloaded = AppTest.from_file("../app.py", default_timeout=300)  # a new session from the same address
    reloaded.query_params["me"] = at.session_state["owner"]
    reloaded.run()
    assert not reloaded.exception
    assert reloaded.selectbox(key="run_builtin").value == "resnet50"
    assert {key: getattr(reloaded, kind)(key=key).value for kind, values in chosen.items() for key in values} == made
    assert will_run(reloaded) == will_run(at)
    # someone else's new session starts from the defaults
    assert app().selectbox(key="run_builtin").value == "captioner"


def test_kept_settings_of_a_model_that_cannot_be_built_here_are_not_restored():
    from ui.panels import knobs

    saved = {"run_model": "file:gone.py", "run_batch_size": 3, "sweep_model": "resnet50", "sweep_batch_size": 2,
             "run_no_such_knob": 1}
    assert knobs.restorable(saved) == {"sweep_model": "resnet50", "sweep_batch_size": 2}


def test_the_timeline_table_puts_its_seconds_first_and_its_subtitle_reads_with_spaces():
    """The phase table's seconds lay past the right edge of the result column; the bar's subtitle read
    "blue,waiting" as text (its lines joined without a space)."""
    phases = [{"name": "queue (waiting for a place on the device)", "kind": "wait", "s": 0.2, "start_s": 0.0},
              {"name": "compile", "kind": "compile", "s": 3.1, "start_s": 0.2}]
    assert list(timeline_bar.phase_rows(phases)[0]) == ["phase", "seconds", "from (s)", "is"]
    assert list(timeline_bar.PHASE_COLUMNS) == ["phase", "seconds", "from (s)", "is"]
    text = timeline_bar.timeline_chart({"timeline": phases}).layout.title.subtitle.text
    assert "<br>" in text and "<br>" not in text.replace(" <br>", "")
    assert text.replace(" <br>", " ") == timeline_bar.SUBTITLE


def test_on_the_cpu_the_page_offers_the_measurement_a_solid_figure_needs_and_says_what_else_it_needs(db):
    """A CPU run's interval rests on a 10% default until the machine's spread is learned, and 2 s a variant is short:
    the page offers the longer measurement with one button, which sets the boxes (in its callback, before they
    exist: a live session refuses a widget's value set after it is drawn), and says the rest in words."""
    from ui.panels import knobs

    at = app()
    assert at.session_state["run_device"] in ("auto", "cpu")  # this machine has no GPU: the CPU is the device
    assert "A solid figure on this CPU" in texts(at.caption)
    at.button(key="run_solid_cpu").click().run()
    assert not at.exception
    assert at.number_input(key="run_timed_s").value == knobs.SOLID_CPU_TIMED_S
    assert at.number_input(key="run_target_pct").value == 0.0
    assert at.button(key="run_solid_cpu").disabled  # set: nothing more to press
    said = texts(at.caption)
    assert "a quiet machine" in said and "python -m tcore calibrate" in said and "set)" in said
    assert will_run(at) and not at.button(key="run_start").disabled


def test_mode_is_greyed_out_with_its_reason_for_a_backend_that_takes_none(db):
    """Mode's words for Inductor ("Inductor's balanced setting") stood beside backend=eager and aot_eager."""
    at = app()
    assert not at.selectbox(key="run_mode").disabled
    at.selectbox(key="run_mode").set_value("max-autotune").run()
    at.selectbox(key="run_backend").set_value("aot_eager").run()
    assert at.selectbox(key="run_mode").disabled
    said = texts(at.caption)
    assert "backend=aot_eager takes none" in said and "Benchmarks many kernel variants" not in said
    # greyed out, it does nothing: the run takes the neutral mode, not the one left in the box
    assert not at.button(key="run_start").disabled and "max-autotune" not in will_run(at)[0]


def test_a_generation_draws_no_knob_that_does_nothing_for_it(db):
    """channels_last and the graph-break toggle were drawn for task=generate, which has no layout to change and
    refuses the break."""
    at = app()
    keys = {t.key for t in at.toggle}
    assert {"run_channels_last", "run_graph_break"} <= keys
    at.radio(key="run_task").set_value("generate").run()
    assert not at.exception
    assert not {"run_channels_last", "run_graph_break"} & {t.key for t in at.toggle}
    assert not at.button(key="run_start").disabled  # and the run it builds is one a generation can do


def test_a_batch_the_instructors_limit_lowers_says_so_under_the_box(db, monkeypatch):
    """An instructor's limit of 16 turned a typed 32 into 16 with a toast that went by unseen."""
    at = app()
    at.number_input(key="run_batch_size").set_value(32).run()
    monkeypatch.setenv("COMPILE_LAB_MAX_BATCH_SIZE", "16")
    at.run()
    assert at.number_input(key="run_batch_size").value == 16
    assert "Lowered from 32 to 16: this lab's limit, which the instructor sets." in texts(at.info)
    at.run()
    assert "Lowered from 32" not in texts(at.info)  # said once, where it happened


def test_a_generation_gets_one_batch_whichever_of_task_and_model_is_picked_first(db):
    """hf:gpt2 tiny generate read bs1 with the task picked first and bs2 with the model first (bs8 for the captioner):
    a model's pick set the batch for the task shown, a task's pick left it. A batch the person typed stays."""
    def sizes(at) -> tuple:
        return at.number_input(key="run_batch_size").value, at.session_state["run_model"]

    task_first = app()
    task_first.radio(key="run_task").set_value("generate").run()
    assert sizes(task_first) == (1, "captioner")
    task_first.radio(key="run_source").set_value("hf").run()
    model_first = app()
    model_first.radio(key="run_source").set_value("hf").run()
    assert sizes(model_first) == (2, "hf:gpt2")  # its practical batch for inference on the CPU
    model_first.radio(key="run_task").set_value("generate").run()
    assert sizes(task_first) == sizes(model_first) == (1, "hf:gpt2")
    assert will_run(task_first) == will_run(model_first)
    model_first.radio(key="run_task").set_value("inference").run()
    assert sizes(model_first) == (2, "hf:gpt2")  # back to the task's own
    model_first.number_input(key="run_batch_size").set_value(4).run()
    model_first.radio(key="run_task").set_value("generate").run()
    assert sizes(model_first) == (4, "hf:gpt2")  # typed: kept


def test_what_a_passing_limit_lowered_comes_back_when_the_instructor_lifts_it(db):
    """The instructor set Longest run to 30 s and Largest batch to 4 for a while, then pressed "Back to the file's
    limits": a participant's "Stop the run after" stayed at 1 min (their next run timed out at 60 s) and their batch at
    4, with no word. What a limit lowered comes back, and the page says so; what the person changed since stays."""
    from tcore.lab import api

    at = app()
    assert (at.number_input(key="run_batch_size").value, at.number_input(key="run_timeout_min").value) == (8, 15)
    api.set_limits(db, {"max_run_s": 30.0, "max_batch_size": 4})
    at.run()
    assert (at.number_input(key="run_batch_size").value, at.number_input(key="run_timeout_min").value) == (4, 1)
    api.set_limits(db, {"max_run_s": 300.0, "max_batch_size": 6})  # raised, not yet lifted: as far as it allows
    at.run()
    assert (at.number_input(key="run_batch_size").value, at.number_input(key="run_timeout_min").value) == (6, 5)
    assert "Back to 6, from 4: this lab's limit that lowered it was raised to 6." in texts(at.info)
    api.set_limits(db, None)  # Back to the file's limits
    at.run()
    assert (at.number_input(key="run_batch_size").value, at.number_input(key="run_timeout_min").value) == (8, 15)
    assert "Back to 15, from 5: this lab's limit that lowered it was raised to 15." in texts(at.info)
    assert not at.button(key="run_start").disabled

    # A value the person changed after the limit lowered it is theirs: lifting the limit leaves it.
    api.set_limits(db, {"max_run_s": 60.0, "max_batch_size": 4})
    at.run()
    at.number_input(key="run_batch_size").set_value(3).run()
    api.set_limits(db, None)
    at.run()
    assert (at.number_input(key="run_batch_size").value, at.number_input(key="run_timeout_min").value) == (3, 15)

    # A model picked under the limit opens at its practical batch brought down to it, which comes back the same way.
    api.set_limits(db, {"max_batch_size": 4})
    at.run()
    at.selectbox(key="run_builtin").set_value("resnet50").run()
    assert at.number_input(key="run_batch_size").value == 4
    api.set_limits(db, None)
    at.run()
    assert at.number_input(key="run_batch_size").value == 8


def test_what_a_limit_lowered_and_brought_back_stays_back_across_page_switches(db):
    """Walk 6: with the 30 s limit on, the participant changed other settings, the instructor lifted the limit, and
    "Stop the run after" read 15 min, then 1 min again after a visit to Compare: the kept copy of the page's settings
    was taken before the limit lowered or brought back the box, and a page switch put the stale copy back."""
    from tcore.lab import api

    at = app()
    api.set_limits(db, {"max_run_s": 30.0, "max_batch_size": 4})
    at.run()
    at.radio(key="run_task").set_value("training").run()
    at.radio(key="run_task").set_value("inference").run()
    at.switch_page("app_pages/compare.py").run()
    at.switch_page("app_pages/run.py").run()
    assert (at.number_input(key="run_batch_size").value, at.number_input(key="run_timeout_min").value) == (4, 1)
    api.set_limits(db, None)
    at.run()
    for _ in range(2):
        at.switch_page("app_pages/compare.py").run()
        at.switch_page("app_pages/run.py").run()
        assert not at.exception
        assert (at.number_input(key="run_batch_size").value, at.number_input(key="run_timeout_min").value) == (8, 15)


def test_a_run_the_instructors_longest_run_stopped_says_so_and_not_to_raise_its_own_limit(db):
    """A run stopped at the instructor's 30 s longest run was told to "raise 'Stop the run after'", which cannot go
    past that limit. Once the limit is lifted, raising it is the advice again."""
    from tcore.lab import api
    from tests.helpers import insert_run

    run_id = insert_run(db, Experiment(model="captioner", preset="tiny", batch_size=2, device="cpu"))
    with db._write() as c:
        c.execute("UPDATE runs SET owner=?, timeout_s=30 WHERE id=?", (OWNER, run_id))
    db.finish(run_id, error={"kind": "timeout", "phase": "compiling",
                             "message": "stopped at the 30 s time limit, in the phase 'Compiling (first call)'"})
    api.set_limits(db, {"max_run_s": 30.0})
    at = app_as(OWNER)
    said = texts(at.caption)
    assert ("What stopped it is this lab's longest run, 30 s, set by the instructor: 'Stop the run after' cannot go "
            "past it, so a longer run needs the instructor to raise Longest run on the System page.") in said
    assert "raise 'Stop the run after'" not in said
    api.set_limits(db, None)
    at.run()
    assert "Or raise 'Stop the run after' under Advanced." in texts(at.caption)
    assert "What stopped it" not in texts(at.caption)
