"""Choosing the Ray executor by configuration, the cluster's slots, and a sweep spreading over them: no Ray needed."""
import sys

import pytest

from tcore.experiment.spec import Experiment
from tcore.lab.launch import cluster
from tcore.lab.queue import scheduler
from tcore.lab.settings import config


@pytest.fixture(autouse=True)
def _no_config_from_outside(monkeypatch, tmp_path):
    monkeypatch.delenv(cluster.ADDRESS_ENV, raising=False)
    monkeypatch.delenv("COMPILE_LAB_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)


def test_without_an_address_nothing_changes_and_ray_is_not_imported(monkeypatch):
    monkeypatch.delitem(sys.modules, "ray", raising=False)
    assert cluster.address() is None and not cluster.configured()
    assert scheduler.device_slots("cpu") == ("cpu",)
    assert "ray" not in sys.modules


def test_the_address_comes_from_the_environment_then_compile_lab_toml(monkeypatch, tmp_path):
    (tmp_path / "compile-lab.toml").write_text('[cluster]\naddress = "10.0.0.1:6379"\n')
    assert cluster.address() == "10.0.0.1:6379"
    monkeypatch.setenv(cluster.ADDRESS_ENV, "auto")
    assert cluster.address() == "auto"
    monkeypatch.delenv(cluster.ADDRESS_ENV)
    (tmp_path / "compile-lab.toml").write_text('[cluster]\nadress = "10.0.0.1:6379"\n')
    with pytest.raises(config.LimitsError, match="unknown setting.*adress.*known: address"):  # the settings' error
        cluster.address()


def test_a_configured_cluster_without_ray_installed_says_how_to_install_it(monkeypatch):
    # not through connect(): another test's queue thread, still ticking, would try to reach "auto" meanwhile
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(cluster.ClusterError, match=r"configured \(auto\).*pip install -r requirements-cluster.txt"):
        cluster._import_ray("auto")


def node(nid, gpus, cpus=8.0):
    return cluster.Node(nid * 8, "10.0.0." + nid, "host-" + nid, gpus, cpus, "H100" if gpus else None)


def test_slots_are_every_gpu_of_every_node_interleaved_or_one_per_node_without_gpus(monkeypatch):
    monkeypatch.setattr(cluster, "nodes", lambda: [node("a", 2), node("b", 1), node("c", 0)])
    assert cluster.slots() == ("ray:aaaaaaaa:gpu0", "ray:bbbbbbbb:gpu0", "ray:aaaaaaaa:gpu1")
    assert cluster.node_of("ray:bbbbbbbb:gpu0").hostname == "host-b"
    monkeypatch.setattr(cluster, "nodes", lambda: [node("a", 0), node("b", 0, cpus=0.5)])
    assert cluster.slots() == ("ray:aaaaaaaa:cpu",)  # a node without a whole CPU takes no run
    monkeypatch.setenv(cluster.ADDRESS_ENV, "auto")
    assert scheduler.device_slots("cuda") == scheduler.device_slots("cpu") == ("ray:aaaaaaaa:cpu",)
    assert scheduler.slot_env("ray:aaaaaaaa:cpu") == {}  # Ray pins the GPU itself (CUDA_VISIBLE_DEVICES)


def test_a_sweep_has_as_many_runs_in_the_queue_as_there_are_slots_and_each_end_lets_the_next_in(store):
    exp = Experiment(model="captioner", preset="tiny", device="cpu")
    proc = scheduler.this_process()
    sweep_id = store.sweeps.create_sweep(owner=None, label="s", size=5, skipped=[])
    ids = [store.queue.enqueue(exp, device="cpu", owner="o", proc=proc, timeout_s=None, sweep=(sweep_id, i),
                               sweep_width=2) for i in range(5)]
    held = lambda: [store.get(i).held for i in ids]  # noqa: E731
    assert held() == [False, False, True, True, True]
    store.finish(ids[0], error={"type": "error", "kind": "cancelled", "message": "x"})
    assert held() == [False, False, False, True, True]
    # one machine, as before: one at a time
    sweep_id = store.sweeps.create_sweep(owner=None, label="s", size=2, skipped=[])
    ids = [store.queue.enqueue(exp, device="cpu", owner="o", proc=proc, timeout_s=None, sweep=(sweep_id, i))
           for i in range(2)]
    assert held() == [False, True]


def test_a_gpu_run_for_a_cluster_is_checked_without_a_gpu_on_the_apps_machine(monkeypatch, store):
    from tcore.lab.policy import limits
    from tcore.lab.run import runs

    monkeypatch.setenv(cluster.ADDRESS_ENV, "auto")
    monkeypatch.setattr(cluster, "nodes", lambda: [node("a", 1)])
    exp = Experiment(model="resnet50", preset="tiny", batch_size=4)
    device, _ = runs.preflight(exp)
    assert device == "cuda"  # "auto" means the cluster's GPUs, though this machine has none
    assert limits.device_memory_gib("cuda")[0] is None
    limits.check(exp.replace(device="cuda"), device, None, store)  # no GPU here to compare with: no error
