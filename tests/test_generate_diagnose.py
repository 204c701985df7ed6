"""Diagnose, one generate run: what a new prompt length costs, the static KV cache beside the dynamic one, from two
real tiny generate runs (aot_eager: traced, eager kernels, seconds on the CPU)."""
from tcore.experiment.spec import Experiment
from tcore.lab.run import runs
from tests.app_harness import app, db, texts  # noqa: F401 (the db fixture)
from ui.panels import generate

COLUMNS = ("Recompilations as the cache grew", "Recompilations for a prompt 1 token shorter", "In which function")


def generate_run(store, kv_cache: str):
    exp = Experiment(model="captioner", task="generate", device="cpu", backend="aot_eager", batch_size=2, rounds=2,
                     timed_steps=2, cache="warm", prompt_len=4, new_tokens=6, kv_cache=kv_cache)
    record = runs.start(exp, store, timeout_s=600).wait()
    assert record.status == "finished", record.error
    return record


def test_diagnose_shows_the_recompilations_a_new_prompt_length_causes_with_each_kv_cache(db):
    static = generate_run(db, "static")
    at = app()
    at.query_params["run"] = static.id  # opened by id, as the Compare page's link does
    at.switch_page("app_pages/diagnose.py").run()
    assert not at.exception and at.selectbox(key="diag_run").value == static.id
    assert "A new prompt length: static against dynamic KV cache" in texts(at.markdown)
    assert "a **static** cache is allocated at its full length" in texts(at.caption)
    (only,) = at.dataframe[0].value.to_dict("records")
    assert only["KV cache"] == "static" and only[COLUMNS[0]] == 0 and only[COLUMNS[1]] >= 1
    assert "prefill" in only[COLUMNS[2]] and "decode" not in only[COLUMNS[2]]  # the prefill only
    assert "size mismatch" in only["Why (Dynamo's guard)"]
    assert any(b.label == "Run this setting with the dynamic KV cache to compare" for b in at.button)

    dynamic = generate_run(db, "dynamic")
    at.run()
    rows = {r["KV cache"]: r for r in at.dataframe[0].value.to_dict("records")}
    assert list(rows) == ["static", "dynamic"] and rows["dynamic"]["Run"] == dynamic.id[-6:]
    assert rows["dynamic"][COLUMNS[0]] >= 1  # the cache grew by a token: a new shape for the decode step
    assert rows["dynamic"][COLUMNS[1]] >= 1
    assert not any(b.label.startswith("Run this setting with the") for b in at.button)  # both are shown


def test_the_prompt_recompilations_are_found_on_the_compile_timeline_by_their_reason():
    result = {"prompt_recompile_reasons": ["size mismatch at index 1. expected 4, actual 3"],
              "compile_events": [
                  {"kind": "compile", "frame": "prefill", "reason": "", "t_s": 1.0},
                  {"kind": "recompile", "frame": "decode", "reason": "size mismatch at index 1. expected 4, actual 3",
                   "t_s": 2.0},
                  {"kind": "recompile", "frame": "prefill", "reason": "size mismatch at index 1. expected 4, actual 3",
                   "t_s": 9.0}]}
    assert generate.prompt_frames(result) == ["prefill"]  # the latest with that reason: after the timing
    assert generate.prompt_frames({"prompt_recompile_reasons": ["x"]}) is None  # no timeline stored
