"""Before a run, the lab says when its setting cannot be expected to give the same headline within ± 5% again: from the
store's earlier runs of the setting on this machine (their spread, a host-bound verdict) and the device, the same
evidence the run's interval uses after it (tcore.figures.rerun.outlook); the Run page shows it above its Run button."""
import socket

import pytest

from tcore.experiment.spec import Experiment
from tcore.figures import rerun
from tcore.host import machine
from tcore.lab import api, rerun_outlook
from tests.app_harness import app, db, texts  # noqa: F401 (the db fixture)
from tests.helpers import insert_run
from tests.test_app import H200
from tests.test_rerun import recorded_host_bound_run
from ui.panels import knobs

NOTE = "The headline may move by more than ± 5% between reruns of this setting"


def test_a_cpu_setting_is_expected_to_move_and_a_busy_gpu_setting_to_hold():
    cpu = rerun.outlook([], "cpu")
    assert not cpu.holds and cpu.between_pct == pytest.approx(rerun.FALLBACK_BETWEEN_PCT["cpu"])
    words = cpu.words()
    assert words.startswith(f"**{NOTE}**: on the CPU the run shares the machine's cores")
    assert ("σ 10% between fresh processes" in words
            and "90% of reruns should land within ± 17% of their median" in words)
    # A GPU setting with no evidence against it, or with earlier runs that agreed (the captioner small's four reruns
    # on an H100, 1.517-1.531x), is expected to hold: no note.
    assert rerun.outlook([], "cuda").words() is None
    steady = rerun.outlook([1.522, 1.529, 1.531, 1.517], "cuda")
    assert steady.holds and steady.reach_pct < rerun.HOLD_PCT and steady.words() is None


def test_earlier_host_bound_or_scattered_runs_of_the_setting_are_said_with_their_figures():
    # ResNet-50's GPU default, three fresh processes on an H100, all host-bound in eager.
    bound = rerun.outlook([1.652, 2.027, 1.783], "cuda", host_bound_runs=3)
    words = bound.words()
    assert "its 3 earlier runs on this machine read 1.65–2.03x, up to 14% from their median 1.78x" in words
    assert "all of them were host-bound (the GPU waited on the host CPU's launches)" in words
    assert bound.between_pct > rerun.FALLBACK_BETWEEN_PCT["cuda-host-bound"] and f"± {bound.reach_pct:.0f}%" in words
    # Host-bound once, with no spread to learn from yet: the host-bound default alone says it.
    once = rerun.outlook([1.652], "cuda", host_bound_runs=1).words()
    assert "its earlier run here was host-bound" in once and "σ 10% between fresh processes" in once
    # Host-bound at a larger batch only: this batch will be too, and the host-bound default says how far it moves.
    larger = rerun.outlook([], "cuda", bound_at_batch=(512, 256))
    assert larger.between_pct == pytest.approx(rerun.FALLBACK_BETWEEN_PCT["cuda-host-bound"])
    assert "an earlier run of this setting here at batch 512 was host-bound" in larger.words()
    # Two runs 12% apart, too few to learn from: the runs themselves are the evidence, and the reading they allow.
    two = rerun.outlook([1.65, 2.03], "cuda")
    assert not two.holds and two.reach_pct < rerun.HOLD_PCT
    assert "The earlier runs strayed further than that σ allows" in two.words()
    assert "no closer than ± 12%" in two.words()


def finished(store, exp: Experiment, result: dict, device: str, gpu: str | None) -> None:
    run_id = insert_run(store, exp)
    low = 0.97 * result["speedup"] if result.get("speedup") else None  # a run with an interval of its own
    store.finish(run_id, result={"device": device, "speedup_low": low, **result},
                 env={"hostname": socket.gethostname(), "gpu": gpu, "cpu": machine.cpu_model()})


def on_an_h200(monkeypatch) -> None:
    """This machine, as the Run page and the outlook see it, has an H200."""
    monkeypatch.setattr(machine, "cuda_available", lambda: True)
    monkeypatch.setattr(machine, "gpus", lambda: ([H200], None))
    monkeypatch.setattr(rerun_outlook, "preflight", lambda exp: ("cuda", []))
    monkeypatch.setattr(api, "preflight", lambda exp: ("cuda", []))  # the page's one device check, handed on


def test_the_run_page_says_it_before_a_cpu_run_and_not_before_a_steady_gpu_one(db, monkeypatch):
    at = app()
    assert not at.exception
    (note,) = [i.value for i in at.info if NOTE in i.value]
    assert "on the CPU the run shares the machine's cores" in note and "σ 10%" in note
    # Eager only: no speedup to rerun, no note.
    at.radio(key="run_compile").set_value("off").run()
    assert not at.exception and NOTE not in texts(at.info)

    on_an_h200(monkeypatch)
    at = app()
    assert not at.exception and at.number_input(key="run_batch_size").value == 256  # the GPU default
    assert NOTE not in texts(at.info)  # a busy GPU: no earlier run says otherwise
    setting = Experiment(model="captioner", preset="small", batch_size=256, precision="bf16")  # what the page runs
    # Host-bound at a smaller batch says nothing about this one; at a larger batch, it does (less work per launch).
    finished(db, setting.replace(batch_size=64), recorded_host_bound_run(), "cuda", H200["name"])
    at.run()
    assert NOTE not in texts(at.info)
    finished(db, setting.replace(batch_size=512), recorded_host_bound_run(), "cuda", H200["name"])
    at.run()
    (note,) = [i.value for i in at.info if NOTE in i.value]
    assert "an earlier run of this setting here at batch 512 was host-bound" in note and "at batch 256 each" in note
    for speedup in (1.652, 2.027, 1.783):
        finished(db, setting, recorded_host_bound_run(speedup=speedup), "cuda", H200["name"])
    assert rerun_outlook.earlier(setting, db)[2] == 3  # all three host-bound, by figures.host_bound on their records
    at.run()
    (note,) = [i.value for i in at.info if NOTE in i.value]
    assert "its 3 earlier runs on this machine read 1.65–2.03x" in note and "all of them were host-bound" in note


def test_the_note_before_a_run_says_which_earlier_runs_teach_the_spread_nothing():
    """Walk 7: beside earlier runs that teach nothing (no interval, or rounds spread wider than ± 25%), the note said
    "until 3 earlier runs of this setting here teach it" as if any stored run counted."""
    words = rerun.outlook([], "cpu", untaught=2).words()
    assert ("until 3 earlier runs of this setting here teach it; its 2 earlier runs here teach nothing: a run teaches "
            "it with an interval of its own whose rounds agree within ± 25%") in words
    assert "teaches nothing" in rerun.outlook([], "cpu", untaught=1).words()
    assert "teach nothing" not in rerun.outlook([], "cpu").words()
