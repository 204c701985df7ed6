"""The experiment spec: validation messages, JSON round trip, device checks."""
import pytest

from tcore.experiment.device import check_on_device, resolve_device
from tcore.experiment.spec import MODES, Experiment, SpecError


def test_defaults_are_valid_and_round_trip_through_json():
    exp = Experiment(model="flux", preset="tiny", dynamic=True, task="training", compile_optimizer=True)
    again = Experiment.from_json(exp.to_json())
    assert again == exp
    assert again.dynamic is True


@pytest.mark.parametrize("changes, message", [
    (dict(model="gpt9"), "unknown model 'gpt9'; choose one of: captioner, resnet50, flux"),
    (dict(preset="huge"), "unknown preset 'huge' for captioner; choose one of: tiny, small, full"),
    (dict(batch_size=0), "batch_size must be a whole number from 1 to 65536"),
    (dict(compile_optimizer=True), "compile_optimizer needs task=training"),
    (dict(precision="int8"), "unknown precision 'int8'; choose one of: fp32, tf32, amp-bf16, amp-fp16, bf16, fp16"),
    (dict(task="training", precision="fp16"), "casts the weights to float16, which training cannot update"),
    (dict(task="training", freezing=True), "freezing treats the weights as constants: it applies to task=inference"),
    (dict(compile="off", coordinate_descent=True), "coordinate_descent set(s) Inductor options: it needs the inductor"),
    (dict(backend="aot_eager", max_fusion_size=8), "max_fusion_size set(s) Inductor options"),
    (dict(max_fusion_size=0), "max_fusion_size must be a whole number from 1 to 1024"),
    (dict(mode="turbo"), "unknown mode 'turbo'"),
    (dict(backend="aot_eager", mode="max-autotune"), "applies only to the inductor backend"),
    (dict(compile="off", mode="reduce-overhead"), "need compile=whole or regional"),
    (dict(model="flux", channels_last=True), "channels_last applies to convolutional models only"),
    (dict(warmup_steps=0), "warmup_steps must be a whole number from 1 to 100"),
    (dict(timed_steps=2, rounds=5), "timed_steps (2) must be at least rounds (5)"),
    (dict(timed_s=0), "timed_s must be a number from 0.1 to 3600"),
    (dict(dynamic="yes"), "dynamic must be None, True or False"),
])
def test_invalid_experiments_are_refused_with_what_to_change(changes, message):
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Experiment(**changes)


def test_unknown_json_fields_are_refused_not_ignored():
    with pytest.raises(SpecError, match="unknown experiment field"):
        Experiment.from_dict({"model": "resnet50", "batchsize": 8})


def test_optimizer_compile_alone_is_a_compiled_variant():
    exp = Experiment(task="training", compile="off", compile_optimizer=True)
    assert exp.has_compiled_variant and not exp.compiles
    assert "optimizer only" in exp.label
    assert not Experiment(compile="off").has_compiled_variant


def test_device_resolution():
    assert resolve_device("auto", cuda_available=False) == "cpu"
    assert resolve_device("auto", cuda_available=True) == "cuda"
    with pytest.raises(SpecError, match="no usable CUDA GPU; choose device=cpu or auto"):
        resolve_device("cuda", cuda_available=False)


def test_settings_that_do_nothing_on_cpu_run_with_a_note():
    notes = check_on_device(Experiment(mode="reduce-overhead"), "cpu")
    assert any("behaves like default" in n for n in notes)
    assert check_on_device(Experiment(mode="reduce-overhead"), "cuda") == []
    with pytest.raises(SpecError, match="cudagraphs needs a CUDA GPU"):
        check_on_device(Experiment(backend="cudagraphs"), "cpu")


def test_mode_list_matches_installed_inductor():
    import torch._inductor

    assert set(MODES) == set(torch._inductor.list_mode_options())


def test_every_field_documents_itself_and_each_of_its_choices():
    import dataclasses

    from tcore.experiment.spec import CHOICES, choice_docs, describe

    for f in dataclasses.fields(Experiment):
        assert describe(f.name).endswith(".") and len(describe(f.name)) > 15, f.name
        for value, doc in choice_docs(f.name).items():
            assert doc.endswith("."), (f.name, value)
    assert {name: tuple(choice_docs(name)) for name in CHOICES} == CHOICES
    assert set(choice_docs("dynamic")) == {None, True, False}


def test_the_run_page_and_the_command_line_show_the_same_sentences(capsys):
    from tcore.cli import main
    from tcore.experiment.spec import describe
    from ui.panels.knobs import explain

    with pytest.raises(SystemExit):
        main(["run", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    for name, value in [("compile", "regional"), ("dynamic", None), ("cache", "artifacts"), ("timed_s", None),
                        ("channels_last", None)]:
        assert " ".join(explain(name, value).split()) in help_text, name
    assert describe("timed_s") == explain("timed_s")


def test_labels_tell_apart_runs_that_differ_in_backend_cache_or_fullgraph():
    base = Experiment(model="captioner", device="cpu", batch_size=8)
    assert base.label == "captioner/tiny bs8 fp32 inference, whole default"
    assert base.replace(backend="aot_eager").label == "captioner/tiny bs8 fp32 inference, whole aot_eager"
    assert base.replace(cache="artifacts").label == "captioner/tiny bs8 fp32 inference, whole default, artifacts cache"
    assert base.replace(fullgraph=True, mode="reduce-overhead").label == \
        "captioner/tiny bs8 fp32 inference, whole reduce-overhead fullgraph"
    assert len({base.label, base.replace(cache="warm").label, base.replace(backend="eager").label}) == 3
    assert base.replace(compile="off", cache="warm").label == "captioner/tiny bs8 fp32 inference, eager only"


def test_old_records_that_said_dtype_read_as_the_autocast_precision_they_ran():
    """Before the precision field, dtype=bfloat16 meant autocast over float32 weights: amp-bf16 now."""
    from tcore.experiment.spec import upgrade

    old = {"model": "resnet50", "preset": "tiny", "dtype": "bfloat16"}
    assert Experiment.from_dict(old).precision == "amp-bf16"
    assert Experiment.from_dict({**old, "dtype": "float32"}).precision == "fp32"
    assert Experiment.from_dict({**old, "dtype": "float16"}).label.split()[2] == "amp-fp16"
    assert upgrade({"precision": "bf16"}) == {"precision": "bf16"}


def test_each_precision_says_what_it_does_and_its_tolerance_where_it_is_chosen():
    from tcore.experiment.spec import PRECISIONS, describe

    for name, p in PRECISIONS.items():
        assert f"tolerance {p.tolerance:g}" in describe("precision", name)
    assert PRECISIONS["bf16"].weights == "bfloat16" and PRECISIONS["bf16"].autocast is None
    assert PRECISIONS["amp-bf16"].weights == "float32" and PRECISIONS["amp-bf16"].autocast == "bfloat16"
    assert PRECISIONS["tf32"].tf32 and not PRECISIONS["fp32"].tf32
    # reduced precisions are given more room than float32, and never less than TF32's
    assert PRECISIONS["fp32"].tolerance < PRECISIONS["tf32"].tolerance <= min(
        PRECISIONS[n].tolerance for n in ("amp-bf16", "amp-fp16", "bf16", "fp16"))


def test_labels_name_the_precision_and_any_inductor_option_changed():
    exp = Experiment(precision="bf16", freezing=True, coordinate_descent=True, max_fusion_size=16)
    assert exp.label == "captioner/tiny bs4 bf16 inference, whole default +freezing +coordinate-descent fusion<=16"
    assert "-epilogue-fusion" in Experiment(epilogue_fusion=False).label
    assert "+freezing" not in Experiment().label


def test_inductor_option_defaults_match_the_installed_inductor():
    """The spec keeps Inductor's own defaults, so an untouched knob changes nothing."""
    import torch._inductor.config as config

    from tcore.experiment.spec import DEFAULTS, INDUCTOR_OPTIONS

    for name, option in INDUCTOR_OPTIONS.items():
        assert getattr(config, option) == DEFAULTS[name], option


@pytest.mark.parametrize("device, task, expected", [
    ("cuda", "inference", dict(precision="bf16", channels_last=True, preset="full")),
    ("cuda", "training", dict(precision="amp-bf16", channels_last=True)),
    ("cpu", "inference", dict(precision="fp32", channels_last=False, preset="tiny")),
])
def test_practical_defaults_follow_the_device_and_task(device, task, expected):
    from tcore.experiment.device import practical_defaults

    got = practical_defaults("resnet50", device, task)
    assert {k: got[k] for k in expected} == expected
    assert practical_defaults("flux", device, task)["channels_last"] is False  # not a convolutional model
    Experiment(model="resnet50", task=task, **got)  # and they make a valid experiment


def test_tf32_on_the_cpu_runs_with_a_note():
    assert any("on the CPU it runs as fp32" in n for n in check_on_device(Experiment(precision="tf32"), "cpu"))


def test_the_same_compile_is_defined_once_and_counts_everything_that_changes_it():
    from tcore.experiment.comparable import same_compile

    base = Experiment(model="captioner", device="cpu").to_dict()
    assert same_compile(base, {**base, "timed_s": 9.0, "rounds": 7, "cache": "artifacts", "device": "auto"})
    for change in ({"backend": "aot_eager"}, {"shape_count": 6}, {"shape_remedy": "buckets"}, {"batch_size": 64},
                   {"precision": "bf16"}, {"graph_break": True}, {"compile": "regional"}):
        assert not same_compile(base, {**base, **change}), change
    assert same_compile(base, {**base, "compile": "regional"}, varying={"compile"})


def test_a_generation_refuses_a_compile_scope_it_has_no_blocks_for():
    """task=generate compiles the prefill and the decode step as two functions: regional and hierarchical would
    silently compile them whole (a page then described what never ran)."""
    for scope in ("regional", "hierarchical"):
        with pytest.raises(SpecError, match=f"compile={scope} has no blocks of its own to compile"):
            Experiment(model="captioner", task="generate", compile=scope)
