"""The Run page's model picker, headless (AppTest): a source, a searchable list of its models, your own file only
where compile-lab.toml allows it, and the sizes that follow the picked model."""
import pytest
from streamlit.testing.v1 import AppTest

from ui.words.store_words import plain


@pytest.fixture
def app(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPILE_LAB_DB", str(tmp_path / "runs.sqlite"))
    monkeypatch.setenv("COMPILE_LAB_CONFIG", str(tmp_path / "compile-lab.toml"))
    (tmp_path / "compile-lab.toml").write_text("")
    return AppTest.from_file("../app.py", default_timeout=300).run()


def widget(elements, label):
    return next(e for e in elements if e.label == label)


def test_pick_a_source_search_its_names_and_get_the_model_s_presets(app):
    widget(app.radio, "Source").set_value("hf").run()
    assert not app.exception, app.exception
    assert app.session_state["run_model"] == "hf:gpt2"  # the source's first pick, with its sizes
    widget(app.text_input, "Search names").set_value("llama").run()
    pick = widget(app.selectbox, "Model")
    assert "hf:llama" in pick.options and all("llama" in o for o in pick.options)
    pick.set_value("hf:llama").run()
    assert not app.exception, app.exception
    assert app.session_state["run_model"] == "hf:llama"
    assert [o.split(":")[0] for o in widget(app.selectbox, "Preset").options] == ["tiny", "3.2-1b", "full"]
    assert app.session_state["run_preset"] == "tiny" and app.session_state["run_batch_size"] == 2  # the CPU's


def test_your_own_file_needs_the_lab_s_permission(app, tmp_path):
    widget(app.radio, "Source").set_value("file").run()
    assert not app.exception
    assert any("allow_files = true" in i.value for i in app.info)
    assert app.session_state["run_model"] == "captioner"  # nothing of the file was imported or picked
    # the rest of the page stays, and says why nothing runs (it went blank: the queue, Your runs and the results)
    said = "\n".join(str(m.value) for m in app.markdown)
    assert "**The queue on this machine**" in said and "#### Compiler" in said
    assert app.button(key="run_start").disabled
    assert any(w.value.startswith("**Your own file is off in this lab**") for w in app.warning)
    (tmp_path / "compile-lab.toml").write_text("[models]\nallow_files = true\n")
    widget(app.radio, "Source").set_value("builtin").run()
    widget(app.radio, "Source").set_value("file").run()
    assert not app.exception, app.exception
    assert app.session_state["run_model"] == "file:examples/my_model.py"
    widget(app.text_input, "Model file (.py)").set_value("examples/nothing_here.py").run()
    assert any("no Python file there" in e.value for e in app.error)
    assert app.session_state["run_model"] == "file:examples/my_model.py"  # the bad path was not taken


def test_no_path_in_the_app_queues_a_file_model_the_lab_does_not_allow(tmp_path, monkeypatch):
    """ui.panels.queue.submit is the app's one way to queue a run (Run, Sweep, Diagnose, a suggestion's Queue it); a
    `file:` counterpart of a run stored from the command line must be refused there too."""
    from tcore.experiment.spec import SpecError
    from tcore.lab.policy import limits
    monkeypatch.setenv("COMPILE_LAB_CONFIG", str(tmp_path / "compile-lab.toml"))
    (tmp_path / "compile-lab.toml").write_text("")
    with pytest.raises(SpecError, match="allow_files = true"):
        limits.check_app_model("file:examples/my_model.py")
    limits.check_app_model("captioner")
    (tmp_path / "compile-lab.toml").write_text("[models]\nallow_files = true\n")
    limits.check_app_model("file:examples/my_model.py")


def test_no_widget_is_given_a_default_and_a_session_value(app):
    """A widget created with value= whose key the session also holds (app.keep_settings stores every setting again on
    each run) makes Streamlit log "created with a default value but also had its value set via the Session State
    API"; switching the source and the page did it for six of the Run page's knobs, whose defaults now come from
    the session alone."""
    import logging

    said = []

    class Keep(logging.Handler):
        def emit(self, record):
            said.append(record.getMessage())

    from streamlit import config
    from streamlit.elements.lib import policies

    # .streamlit/config.toml silences this warning; the settings should not need it to.
    config.set_option("global.disableWidgetStateDuplicationWarning", False)
    policies._shown_default_value_warning = False  # Streamlit says it once per process
    logger = logging.getLogger("streamlit.elements.lib.policies")
    handler = Keep()
    logger.addHandler(handler)
    try:
        widget(app.radio, "Source").set_value("torchvision").run()
        widget(app.text_input, "Search names").set_value("resnet18").run()
        widget(app.selectbox, "Model").set_value("torchvision:resnet18").run()
        app.switch_page("app_pages/compare.py").run()
        app.switch_page("app_pages/run.py").run()
    finally:
        logger.removeHandler(handler)
        config.set_option("global.disableWidgetStateDuplicationWarning", True)
    assert not app.exception, app.exception
    assert not [m for m in said if "default value" in m], said
    assert app.session_state["run_warmup_steps"] == 3 and app.session_state["run_torch_trace"] is True


def test_a_search_with_no_pick_runs_nothing_until_a_match_is_picked(app):
    """Searching a library lists other names than the model picked before: until one is picked, Run is off and
    the page says to pick one, rather than running the model the person searched away from."""
    widget(app.radio, "Source").set_value("torchvision").run()
    assert app.session_state["run_model"] == "torchvision:resnet18"
    assert any("Will run: **" + plain("torchvision:resnet18") in c.value for c in app.caption)
    widget(app.text_input, "Search names").set_value("resnet").run()
    assert not app.exception, app.exception
    pick = widget(app.selectbox, "Model")
    assert pick.value == "torchvision:resnet18"  # the old pick is in this list: it stays picked
    widget(app.text_input, "Search names").set_value("vgg").run()
    pick = widget(app.selectbox, "Model")
    assert pick.value is None and len(pick.options) > 1
    assert pick.placeholder == f"{len(pick.options)} matches: pick one"
    assert any("Pick a model" in w.value for w in app.warning)
    assert not any("Will run:" in c.value for c in app.caption)
    run = next(b for b in app.button if b.label == "Run")
    assert run.disabled
    pick.set_value("torchvision:vgg11").run()
    assert not app.exception, app.exception
    assert not any("Pick a model" in w.value for w in app.warning)
    assert any("Will run: **" + plain("torchvision:vgg11") in c.value for c in app.caption)
    assert not next(b for b in app.button if b.label == "Run").disabled


def test_match_counts_read_as_english():
    from ui.panels.model_picker import matches
    assert [matches(n) for n in (0, 1, 5, 1200)] == ["no match", "1 match", "5 matches", "1,200 matches"]


def test_changing_the_device_says_which_settings_it_changed(app):
    """device=cuda takes the GPU's preset, batch and precision: the page says so rather than changing them silently."""
    widget(app.radio, "Device").set_value("cuda").run()
    assert not app.exception, app.exception
    said = " ".join(i.value for i in app.info)
    assert "Device cuda takes the GPU's practical settings" in said
    assert f"batch_size 8 → {app.session_state['run_batch_size']}" in said and "precision fp32 → bf16" in said
    widget(app.radio, "Device").set_value("auto").run()
    assert "Device auto takes the CPU's practical settings" in " ".join(i.value for i in app.info)
    widget(app.radio, "Task").set_value("training").run()
    assert "practical settings" not in " ".join(i.value for i in app.info)  # said once, at the change
