"""What every rung of the start-up ladder must show when it runs for real on a tiny model.

The real ladder is climbed in three parts, each in a test file of its own (test_ladder.py: eager, cold, warm and
Mega-Cache; test_ladder_aot_compile.py; test_ladder_aoti.py): their rungs are cold Inductor compiles in fresh
processes, about a minute of a core each, and the suite gives each file to one worker, so three files run side by
side where one would run them one after the other. Each part starts with eager, the reference its rungs compare
their output with; only the part with the cold rung has throughput against cold's.
"""
import pytest

from tcore.experiment.spec import Experiment
from tcore.lab import ladder

SPEC = Experiment(model="captioner", preset="tiny", batch_size=2, device="cpu", timed_s=0.1).to_json()
# The real climbs take the example model file, a two-block MLP: each of their rungs is a cold compile in a fresh
# process, and its few kernels compile in about half the captioner's time, which the suite waits for three times
# over. What a rung shows does not depend on the model; a file model also climbs as a person's own would.
CLIMBED_MODEL = "file:examples/my_model.py"
# test file -> the rungs it climbs for real after eager; together, with eager, every rung
PARTS = {"test_ladder.py": ["cold", "warm", "mega_cache"], "test_ladder_aot_compile.py": ["aot_compile"],
         "test_ladder_aoti.py": ["aoti"]}


def climb(rungs: list[str], store_path) -> dict:
    """Eager, then `rungs`, each step in a fresh process, on the example model file (the lab allowing files, as the
    command line does; what its worker says of the file is kept in the store at `store_path`)."""
    from tcore.lab.outputs import model_files
    from tcore.store import RunStore

    model_files.install(RunStore(store_path), files_allowed=lambda: True, time_limit_s=1200)
    spec = Experiment(model=CLIMBED_MODEL, preset="tiny", batch_size=2, device="cpu", timed_s=0.1).to_json()
    return ladder.ladder(spec, ["eager", *rungs], timeout_s=1200)


def assert_rung_reached_a_first_result_that_matches_eager(climbed: dict, rung: str) -> None:
    row = next(r for r in climbed["rungs"] if r["rung"] == rung)
    assert "unavailable" not in row, row.get("unavailable")
    phases = row["phases"]
    assert row["first_result_s"] == pytest.approx(sum(phases.get(k, 0) for k in
                                                      ("interpreter_s", "imports_s", "build_s", "load_s",
                                                       "first_call_s")), abs=1e-3)
    assert row["samples_per_s"] > 0
    if "cold" in climbed["steps"]:
        assert row["throughput_vs_cold"] > 0
    if rung != "eager":
        assert row["correctness_ok"] is True, row
    if rung in ("mega_cache", "aot_compile", "aoti"):
        assert row["artifact_bytes"] > 0 and phases["load_s"] >= 0
    if rung in ("aot_compile", "aoti"):
        assert row["build"]["phases"]["compile_s"] > 0
