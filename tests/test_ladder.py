"""The start-up ladder: its arithmetic and order on made-up step reports, a rung this torch lacks, and the eager,
cold, warm and Mega-Cache rungs for real on a tiny model (one climb for the whole module; the artifact rungs
climb in test_ladder_aot_compile.py and test_ladder_aoti.py, beside this file: tests/ladder_rungs.py says why)."""
import json
import subprocess
import sys
import time

import pytest
import torch

from tcore.experiment.spec import Experiment
from tcore.lab import ladder
from tcore.worker import ladder_rung as worker_ladder
from tests.ladder_rungs import (
    PARTS,
    SPEC,
    assert_rung_reached_a_first_result_that_matches_eager,
    climb,
)

CACHE_RUNGS = ["eager", *PARTS["test_ladder.py"]]


def report(step, first_result_s=1.0, samples_per_s=100.0, **more):
    return {"step": step, "device": "cpu", "device_name": "cpu", "torch": "x", "notes": [],
            "phases": {"imports_s": 0.5, "first_call_s": first_result_s - 0.5, "first_result_s": first_result_s},
            "samples_per_s": samples_per_s, "step_ms": 10.0, "correctness_ok": True, **more}


def test_summary_compares_each_rung_with_the_cold_compile():
    steps = {"eager": report("eager", 2.0, 50.0), "cold": report("cold", 40.0, 100.0),
             "warm": report("warm", 10.0, 100.0), "aot_build": report("aot_build", artifact_bytes=1234),
             "aot_load": report("aot_load", 4.0, 120.0, artifact_bytes=1234)}
    rows = {r["rung"]: r for r in ladder.summarize(steps, ["eager", "cold", "warm", "aot_compile"])}
    assert rows["warm"]["first_result_vs_cold"] == 0.25
    assert rows["eager"]["throughput_vs_cold"] == 0.5
    assert rows["aot_compile"]["throughput_vs_cold"] == 1.2
    assert rows["aot_compile"]["artifact_bytes"] == 1234
    assert rows["aot_compile"]["build"]["artifact_bytes"] == 1234  # what making it cost is shown beside it
    assert "build" not in rows["warm"]


def test_each_step_of_a_climb_says_its_phases_as_it_ends():
    """While climbing, the rungs showed 'cold: 33.1 s' alone: the phase split waited for the whole ladder's table."""
    from tcore.lab import probes

    said = probes.step_words("cold", {**report("cold", 40.0), "process_wall_s": 41.2})
    assert said == "cold: 41.2 s; first result after 40.0 s (s: imports 0.50, first call 39.50)"
    assert probes.step_words("aoti_build", {"step": "aoti_build", "unavailable": "torch.export failed\nmore"}) == \
        "aoti_build: torch.export failed"
    climbed = []
    ladder.climb(SPEC, ["eager", "cold"], step_runner=lambda step, *a, **k: {**report(step), "process_wall_s": 2.0},
                 on_step=lambda step, rep: climbed.append(probes.step_words(step, rep)))
    assert climbed == ["eager: 2.0 s; first result after 1.0 s (s: imports 0.50, first call 0.50)",
                       "cold: 2.0 s; first result after 1.0 s (s: imports 0.50, first call 0.50)"]
    # the phases in words, the compile inside the first call said as such, never a raw key
    split = ladder.phase_split({"interpreter_s": 0.05, "imports_s": 3.1, "build_s": 0.41, "load_s": 2.25,
                                "first_call_s": 25.02, "save_s": 0.1, "first_result_s": 30.8,
                                "first_call_extra_s": 24.9})
    assert split == ("interpreter 0.05, imports 3.10, model build 0.41, loading the artifact 2.25, first call 25.02 "
                     "(of it compiling 24.90), saving the artifacts 0.10")
    assert "_" not in split
    eager = ladder.phase_split({"imports_s": 3.1, "first_call_s": 0.9, "first_call_extra_s": 0.82}, compiled=False)
    assert eager == "imports 3.10, first call 0.90 (of it one-time set-up 0.82)"  # eager compiles nothing


def test_every_rung_that_ran_gets_a_sentence_with_its_whole_start_and_its_compile():
    """The summary covered warm and Mega-Cache only (aot_compile and AOTInductor stood in the table alone), and said
    first results alone: the Mega-Cache's 25.8 s against cold's 27.7 s read as 'artifacts barely help' beside the
    Run page's 3.6 s compile of the same artifacts. Each rung now says its whole start and the compile in it."""
    def phases(first, load=None, compile_s=None):
        out = {"interpreter_s": 0.05, "imports_s": 4.0, "build_s": 0.45, "first_call_s": first - 4.5 - (load or 0),
               "first_result_s": first}
        if load is not None:
            out["load_s"] = load
        if compile_s is not None:
            out["first_call_extra_s"] = compile_s
        return out

    steps = {"eager": {**report("eager", 5.0, 30.0), "phases": phases(5.0, compile_s=0.3)},
             "cold": {**report("cold", 81.5, 120.0), "phases": phases(81.5, compile_s=76.3), "cpp_kernels_built": 14},
             "mega_cache": {**report("mega_cache", 10.2, 118.0, artifact_bytes=3_200_000, cpp_kernels_built=0,
                                     cpp_kernels_loaded=14), "phases": phases(10.2, load=2.2, compile_s=3.4)},
             "aot_build": {**report("aot_build", artifact_bytes=1_000_000), "process_wall_s": 60.0},
             "aot_load": {**report("aot_load", 7.0, 125.0, artifact_bytes=1_000_000),
                          "phases": phases(7.0, load=1.0, compile_s=0.0)},
             "aoti_build": {"step": "aoti_build", "phases": {}, "unavailable": "torch.export does not take it: X"}}
    rows = ladder.summarize(steps, ["eager", "cold", "mega_cache", "aot_compile", "aoti"])
    opening, *said = ladder.summary_words({"rungs": rows})
    assert "the first call less one steady step, what the Run page calls compile time" in opening
    assert "about 4.5 s here" in opening
    eager, cold, mega, aot, aoti = said
    assert eager.startswith("**eager first call** reached its first result in 5.0 s, with nothing to compile")
    assert cold.startswith("**cold compile** reached its first result in 81.5 s: compiling took 76.3 s")
    assert "14 C++ kernels had to be built" in cold
    assert mega.startswith("**artifacts loaded (Mega-Cache)** reached its first result in 10.2 s against the cold "
                           "compile's 81.5 s (0.13x): compiling took 3.4 s against cold's 76.3 s; loading its 3.20 MB "
                           "artifact 2.2 s; no C++ kernel had to be built")
    assert aot.startswith("**aot_compile artifact loaded** reached its first result in 7.0 s against the cold")
    assert "making the artifact took 60.0 s in a process of its own, paid once" in aot
    assert "1.04x the cold compile's throughput" in aot
    assert aoti == "**AOTInductor package loaded** did not run: torch.export does not take it: X"


def test_a_rung_that_cannot_run_says_why_and_its_load_is_not_tried():
    ran = []

    def runner(step, spec_json, workdir, cache_dir, timeout_s):
        ran.append((step, cache_dir.name))
        if step == "aoti_build":
            return {"step": step, "phases": {}, "unavailable": "torch.export does not take this model: X"}
        return report(step)

    result = ladder.climb(SPEC, ["warm", "aoti"], step_runner=runner)
    steps = [s for s, _ in ran]
    assert steps == ["eager", "cold", "warm", "aoti_build"]  # eager first (the reference), cold before warm
    caches = dict(ran)
    assert caches["cold"] == caches["warm"] == "local"  # warm is the cold rung's caches
    assert caches["aoti_build"] != caches["eager"]
    rows = {r["rung"]: r for r in result["rungs"]}
    assert list(rows) == ["warm", "aoti"]
    assert rows["aoti"]["unavailable"] == "torch.export does not take this model: X"


def test_a_step_that_fails_is_reported_with_its_output():
    def runner(step, *args):
        if step == "cold":
            raise ladder.LadderError("ladder step cold exited with 1:\nRuntimeError: boom")
        return report(step)

    rows = {r["rung"]: r for r in ladder.climb(SPEC, ["cold"], step_runner=runner)["rungs"]}
    assert "boom" in rows["cold"]["unavailable"]


def test_a_step_that_dies_of_a_signal_says_which_and_where(tmp_path):
    """A real process killed by SIGSEGV (as an artifact's native loader can be): the message names the signal and
    ends with the Python stack faulthandler printed, not a bare exit code with nothing after it."""
    crash = tmp_path / "python"
    crash.write_text(f"#!/bin/sh\nexec {sys.executable} -c 'import ctypes; ctypes.string_at(0)'\n")
    crash.chmod(0o755)
    with pytest.raises(ladder.LadderError) as e:
        ladder.run_step("aoti_load", SPEC, tmp_path, tmp_path / "caches", timeout_s=60, python=str(crash))
    said = str(e.value)
    assert "was killed by SIGSEGV (a segmentation fault" in said, said
    assert "Segmentation fault" in said and "line 1" in said, said  # faulthandler's stack: where it died
    assert ladder.exit_words(3) == "exited with 3"


def test_machine_names():
    assert ladder.machine_slug("NVIDIA H100 80GB HBM3") == "h100"
    assert ladder.machine_slug("NVIDIA H200") == "h200"
    assert ladder.machine_slug("cpu") == "cpu"


def test_a_torch_without_aot_compile_greys_the_rung_with_the_release_that_brings_it(monkeypatch, tmp_path):
    monkeypatch.delattr(torch.compiler, "load_compiled_function")
    out = worker_ladder.run_step("aot_load", Experiment.from_json(SPEC), tmp_path)
    assert "2.12" in out["unavailable"] and "load_compiled_function" in out["unavailable"]
    assert "samples_per_s" not in out  # reported, not run


def test_what_a_ways_feature_check_imports_counts_with_the_steps_imports(monkeypatch, tmp_path):
    """AOTInductor's check imports torch._inductor, which a load in a fresh process pays: the first result counts it."""
    step = worker_ladder.Step("aoti_load", Experiment.from_json(SPEC), tmp_path)
    before = step.phases["imports_s"]

    def importing(feature):
        time.sleep(0.2)  # what importing torch._inductor takes, at least
        return None
    monkeypatch.setattr(worker_ladder.features, "missing", importing)
    step._require("aoti")
    assert step.phases["imports_s"] >= before + 0.2 - 1e-4  # stored to 0.1 ms; a busy machine only adds to it


def test_the_command_line_takes_the_ladder():
    out = subprocess.run([sys.executable, "-m", "tcore", "ladder", "--help"], capture_output=True, text=True,
                         check=True)
    assert "--rungs" in out.stdout and "aot_compile" in out.stdout


def test_the_real_climbs_together_take_every_rung():
    assert sorted(["eager", *(r for rungs in PARTS.values() for r in rungs)]) == sorted(ladder.RUNGS)


# --- the rungs made of caches for real, once -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def climbed(tmp_path_factory):
    return climb(PARTS["test_ladder.py"], tmp_path_factory.mktemp("ladder") / "runs.sqlite")


@pytest.mark.compile
@pytest.mark.parametrize("rung", CACHE_RUNGS)
def test_each_rung_reaches_a_first_result_that_matches_eager(climbed, rung):
    assert_rung_reached_a_first_result_that_matches_eager(climbed, rung)


@pytest.mark.compile
def test_the_artifacts_rung_loads_what_the_run_pages_cache_artifacts_loads(climbed):
    """On the CPU the Mega-Cache leaves out the C++ kernels Inductor builds: the rung loaded it alone and built every
    kernel again with g++ (first call 43.6 s against cold's 76.4 s), while the Run page's cache=artifacts, which ships
    the kernels beside it, compiled in 3.6 s. Both load one bundle now: its first call builds no C++ kernel."""
    rows = {r["rung"]: r for r in climbed["rungs"]}
    assert rows["cold"]["cpp_kernels_built"] > 0
    assert rows["mega_cache"]["cpp_kernels_loaded"] >= rows["cold"]["cpp_kernels_built"]
    assert rows["mega_cache"]["cpp_kernels_built"] == 0 and rows["warm"]["cpp_kernels_built"] == 0
    assert any("as the Run page's cache=artifacts ships them" in n for n in rows["mega_cache"]["notes"])


@pytest.mark.compile
def test_the_ladder_result_is_one_json_document(climbed, tmp_path):
    text = json.dumps(climbed)
    assert json.loads(text)["machine"] == "cpu"
    assert "cold compile" in ladder.text_table(climbed)


def test_a_model_with_a_graph_break_has_no_aot_compile_rung_and_says_why(tmp_path):
    exp = Experiment.from_json(SPEC).replace(graph_break=True)
    torch._dynamo.reset()
    out = worker_ladder.run_step("aot_build", exp, tmp_path)
    assert out["unavailable"].startswith("aot_compile needs the model in one graph"), out


def test_a_stopped_step_ends_at_once_and_takes_its_process_group_along(tmp_path):
    """Stop on the Diagnose page must not wait for a minutes-long rung: the step's process and whatever it started
    (Inductor's compile workers) are killed as soon as the stop is set, and the climb starts no later step."""
    import os
    import threading
    import time

    pid_file = tmp_path / "child.pid"
    fake_python = tmp_path / "python"
    fake_python.write_text(f"#!/bin/sh\nsleep 120 & echo $! > {pid_file}\nwait\n")
    fake_python.chmod(0o755)
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    with pytest.raises(ladder.Stopped):  # unstopped, the step would end after its sleep with no report: LadderError
        ladder.run_step("cold", "{}", tmp_path, tmp_path / "caches", 600, python=str(fake_python), stop=stop)
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 60  # unkilled, the child sleeps 120 s: a slow machine cannot pass for a live one
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the step's own child outlived the stop")

    ran = []

    def runner(step, spec_json, workdir, cache_dir, timeout_s, stop=None):
        ran.append(step)
        stop.set()
        raise ladder.Stopped(ladder.STOPPED_WORDS)

    result = ladder.climb(SPEC, ["eager", "cold", "warm"], step_runner=runner, stop=threading.Event())
    assert ran == ["eager"] and result["steps"]["eager"]["failed"] == ladder.STOPPED_WORDS


def test_the_command_line_ladder_takes_a_model_file_as_run_does(tmp_path):
    """`tcore ladder --model file:examples/my_model.py` on a store where no run of the file was made said only that
    "this process never imports a model file": the command line always takes a file (run has its card read by a child
    and kept); the ladder now does the same, its path taken from where the command was given."""
    from tcore.lab.settings.config import REPO_ROOT

    model = tmp_path / "mine.py"
    model.write_text((REPO_ROOT / "examples" / "my_model.py").read_text())
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT), "HOME": str(tmp_path),
           "COMPILE_LAB_DB": str(tmp_path / "runs.sqlite")}
    done = subprocess.run([sys.executable, "-m", "tcore", "ladder", "--model", "file:mine.py", "--device", "cpu",
                           "--rungs", "eager", "--timed-s", "0.2"], capture_output=True, text=True, cwd=tmp_path,
                          env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "eager" in done.stdout and "failed" not in done.stdout, done.stdout
