"""How the lab connects to the configured Ray cluster (tcore.lab.launch.cluster.connect), without starting one."""
from types import SimpleNamespace

from tcore.lab.launch import cluster


def test_the_local_demo_starts_a_cluster_of_its_own_rather_than_joining_one_running_here(monkeypatch):
    asked = {}
    fake = SimpleNamespace(is_initialized=lambda: False, init=lambda **kw: asked.update(kw),
                           remote=lambda **kw: (lambda fn: fn))
    monkeypatch.setattr(cluster, "_import_ray", lambda where: fake)
    monkeypatch.setattr(cluster, "_task", None)
    monkeypatch.setenv(cluster.ADDRESS_ENV, "local")
    cluster.connect()
    # ray.init(address=None) would connect to any Ray instance it finds on the machine (ray_current_cluster)
    assert asked["address"] == "local" and asked["namespace"] == cluster.NAMESPACE
