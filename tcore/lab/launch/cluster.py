"""Runs on a Ray cluster: its GPUs become the queue's device slots, and each run a Ray task on one of them.

Chosen by configuration: a Ray address in $COMPILE_LAB_RAY_ADDRESS, else `address` under [cluster] in
compile-lab.toml: "auto" (the cluster this machine has joined), "host:6379", or "local" (start a
one-machine cluster inside this process: the demo). Without one nothing here imports Ray, and runs
use local worker processes (tcore.lab.launch.launcher).

The store on the app's machine stays the one record of the queue, the owners, the limits and the
results: the scheduler (tcore.lab.queue.scheduler) claims a slot in it as it does for a local GPU, and only
then submits the run to Ray, pinned to that slot's node (NodeAffinitySchedulingStrategy, hard) and
asking for one GPU (one CPU on a cluster with no GPUs), so Ray never queues a run of ours behind
another: our queue decides, Ray places. Slots: one per GPU of each live node ("ray:1a2b3c4d:gpu0"),
or one per node on a cluster without GPUs ("ray:1a2b3c4d:cpu"); a node that leaves takes its slots
with it, and the run it had ends as crashed with Ray's reason.

The task (tcore.lab.launch.remote.run_on_node) runs in a fresh Ray worker process (max_calls=1) that starts
`python -m tcore.worker` there with empty Inductor and Triton cache folders, and streams its events
back as a Ray generator: RayRunHandle turns them into what a local RunHandle gives, so the live view,
the record and the artifacts do not know the difference. The code travels as Ray's working_dir; each
machine needs the same Python environment (torch, the models' libraries, Ray).
"""
from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path
from typing import Any, Callable, NamedTuple

from tcore.experiment import protocol
from tcore.experiment.spec import Experiment
from tcore.lab.launch.handles import RunEvents, timeout_message
from tcore.lab.launch.remote import WORKDIR, run_on_node
from tcore.lab.settings import config
from tcore.lab.settings.config import REPO_ROOT
from tcore.store.run_queue import CLUSTER_SLOT_PREFIX

ADDRESS_ENV = "COMPILE_LAB_RAY_ADDRESS"
SLOT_PREFIX = CLUSTER_SLOT_PREFIX  # "ray:": the store knows such a slot has no local worker (queue.recover)
NODES_FRESH_S = 2.0  # the scheduler asks for the slots every tick; the cluster's nodes are read at most this often
CANCEL_GRACE_S = 5.0  # after a cancel, how long the task has to stop its worker before Ray kills it outright
NAMESPACE = "compile-lab"
# What the working_dir Ray ships to every node leaves out: only the engine and the models run there.
SHIP_EXCLUDES = [".git", ".venv", ".ray", "static", "tests", "bench", "docs", "*.sqlite*", "__pycache__"]


class ClusterError(RuntimeError):
    """The cluster configured cannot be used (Ray missing, a node gone); the message says what to do. An address
    written wrongly is the lab's settings' error, config.LimitsError, said before anything connects."""


ADDRESS_WORDS = ('"auto" (the cluster this machine has joined), "local" (a one-machine cluster started here) or '
                 'HOST:PORT of the cluster\'s head, e.g. "10.0.0.1:6379"')
# HOST:PORT as Ray takes it: a name or IPv4 address, or an IPv6 address in brackets; ray:// is Ray Client's form
_HOST_PORT = re.compile(r"^(ray://)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?):([0-9]{1,5})$")


def address(environ: dict[str, str] | None = None, cwd: str | Path | None = None) -> str | None:
    """The Ray address configured ($COMPILE_LAB_RAY_ADDRESS, then [cluster] address in compile-lab.toml), or None.

    LimitsError (the lab's settings written wrongly) for an address of the wrong form, before anything connects:
    Ray would try to reach it, or fail with its own traceback."""
    environ = os.environ if environ is None else environ
    if environ.get(ADDRESS_ENV, "").strip():
        return _checked(environ[ADDRESS_ENV], ADDRESS_ENV)
    tables, path = config.read(environ, cwd)
    table = tables.get("cluster", {})
    unknown = sorted(set(table) - {"address"})
    if unknown:
        raise config.LimitsError(f"{path}: unknown setting(s) in [cluster]: {', '.join(unknown)}; known: address")
    value = table.get("address", "")
    if not isinstance(value, str):
        raise config.LimitsError(f"address = {value!r} (from [cluster] in {path}): it must be text in quotes: "
                                 f"{ADDRESS_WORDS}")
    return _checked(value, f"[cluster] in {path}") if value.strip() else None


def _checked(value: str, where: str) -> str:
    text = value.strip()
    if text.lower() in ("auto", "local"):
        return text.lower()
    found = _HOST_PORT.match(text)
    if found is None or not 1 <= int(found.group(4)) <= 65535:
        raise config.LimitsError(f"address = {value!r} (from {where}): it must be {ADDRESS_WORDS}, with a port "
                                 "from 1 to 65535")
    return text


def configured() -> bool:
    return address() is not None


def is_ray_slot(slot: str | None) -> bool:
    return bool(slot) and slot.startswith(SLOT_PREFIX)


_connect_lock = threading.Lock()
_task = None  # the Ray remote function, made on connecting


def connect():
    """Ray, connected to the configured cluster (once per process); ClusterError with the fix if it cannot be."""
    global _task
    with _connect_lock:
        ray = _import_ray(address())
        if not ray.is_initialized():
            where = address()
            # "local" as is: Ray then starts a cluster of its own; None would join any Ray instance running on this
            # machine (another process's test cluster, which takes this one down with it when it ends)
            ray.init(address=where, namespace=NAMESPACE, log_to_driver=False,
                     runtime_env={"working_dir": str(REPO_ROOT), "excludes": SHIP_EXCLUDES})
        if _task is None:
            # a fresh process per run (.options() cannot set max_calls); a run is never silently repeated
            _task = ray.remote(max_calls=1, max_retries=0)(run_on_node)
        return ray


def own_runtime_dir(index: int) -> dict[str, str]:
    """Arguments to ray.cluster_utils.Cluster.add_node for the index-th of several nodes started on one machine (the
    tests' cluster, bench/cluster_demo.py): a folder of its own for what Ray unpacks, the working_dir among it. Nodes
    of one machine share a session folder, and each node's first task unpacks the working_dir afresh there
    (overwrite=True), deleting the copy another node's worker is running from."""
    return {"runtime_env_dir_name": f"runtime_resources_node{index}"}


def _import_ray(where: str | None):
    try:
        import ray
    except ImportError:
        raise ClusterError(f"a Ray cluster is configured ({where}) but Ray is not installed here: "
                           "pip install -r requirements-cluster.txt") from None
    return ray


class Node(NamedTuple):
    node_id: str
    ip: str
    hostname: str
    gpus: int
    cpus: float
    gpu_type: str | None  # Ray's accelerator_type resource, e.g. "H100"; None where Ray saw none


_nodes_cache: tuple[float, list[Node]] = (0.0, [])


def nodes() -> list[Node]:
    """The cluster's live nodes (read at most every NODES_FRESH_S)."""
    global _nodes_cache
    read_at, known = _nodes_cache
    if time.monotonic() - read_at < NODES_FRESH_S:
        return known
    ray = connect()
    known = []
    for n in ray.nodes():
        if not n.get("Alive"):
            continue
        res = n.get("Resources", {})
        kind = next((k.split(":", 1)[1] for k in res if k.startswith("accelerator_type:")), None)
        known.append(Node(n["NodeID"], n.get("NodeManagerAddress", "?"), n.get("NodeManagerHostname", "?"),
                          int(res.get("GPU", 0)), float(res.get("CPU", 0)), kind))
    _nodes_cache = (time.monotonic(), known)
    return known


def _slots_of(node: Node, with_gpus: bool) -> list[str]:
    short = node.node_id[:8]
    if with_gpus:
        return [f"{SLOT_PREFIX}{short}:gpu{k}" for k in range(node.gpus)]
    return [f"{SLOT_PREFIX}{short}:cpu"] if node.cpus >= 1 else []


def slots() -> tuple[str, ...]:
    """The device slots: every GPU of every live node, or one per node where the cluster has no GPUs.

    Interleaved across nodes (each node's first GPU, then each one's second, ...), so the queue spreads
    runs over the machines before it doubles up on one.
    """
    live = nodes()
    with_gpus = any(n.gpus for n in live)
    per_node = [_slots_of(n, with_gpus) for n in live]
    return tuple(s for k in range(max(map(len, per_node), default=0)) for s in (p[k] for p in per_node if k < len(p)))


def has_gpus() -> bool:
    return any(n.gpus for n in nodes())


def node_of(slot: str) -> Node:
    short = slot[len(SLOT_PREFIX):].split(":")[0]
    for node in nodes():
        if node.node_id.startswith(short):
            return node
    raise ClusterError(f"slot {slot}: its node is no longer in the cluster")


def describe(records: list, whose: Callable[[str | None], str] = str) -> list[dict[str, Any]]:
    """One row per slot for the System page: the node, its GPU, and the run it holds now (from `records`,
    the store's running and queued runs), with its owner as `whose` names them."""
    running = {rec.device_slot: rec for rec in records if rec.status == "running"}
    live = nodes()
    with_gpus = any(n.gpus for n in live)
    rows = []
    for node in live:
        for slot in _slots_of(node, with_gpus):
            rec = running.pop(slot, None)
            rows.append({"node": f"{node.hostname} ({node.ip})", "ray node id": node.node_id[:8],
                         "slot": slot, "GPU": (node.gpu_type or "GPU") if with_gpus else "none (CPU)",
                         "running": f"{rec.label} · {whose(rec.owner)}" if rec else "idle",
                         "for (s)": round(time.time() - rec.started_at) if rec and rec.started_at else None})
    for slot, rec in running.items():  # its node has left: the run ends as crashed once Ray says so
        rows.append({"node": "gone", "ray node id": slot[len(SLOT_PREFIX):].split(":")[0], "slot": slot,
                     "GPU": "?", "running": f"{rec.label} · {whose(rec.owner)}", "for (s)": None})
    return rows


class RayRunHandle(RunEvents):
    """A run as a Ray task on one slot's node; like tcore.lab.launch.handles.RunHandle, iterate over it for events.

    workdir: a local folder; what the remote worker saves (artifacts, profiler traces, TORCH_TRACE) is brought back into
    it, and what is in it when the run starts (compile artifacts to load) travels to the node. remote: where it runs
    ({ray_node_id, node_ip, hostname, pid, ray_gpu_ids}) once the task has started.
    """

    pid = None  # the worker's pid is on another machine: the store keeps none (recover() must not kill a local pid)

    def __init__(self, exp: Experiment, slot: str, workdir: Path, *, timeout_s: float | None = None,
                 extra_env: dict[str, str] | None = None) -> None:
        ray = connect()
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        super().__init__(exp, timeout_s)
        self.slot, self.workdir = slot, workdir
        self.remote: dict[str, Any] = {}
        node = node_of(slot)
        env = {k: v.replace(str(workdir), WORKDIR) for k, v in (extra_env or {}).items()}
        files_in = {p.name: p.read_bytes() for p in workdir.iterdir() if p.is_file()}
        wants = {"num_gpus": 1, "num_cpus": 0} if slot.rsplit(":", 1)[1].startswith("gpu") else {"num_cpus": 1}
        self.started_at = time.time()
        self._gen = _task.options(
            **wants, scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=False),
        ).remote(protocol.envelope(exp.to_json(), env), files_in, exp.cache == "warm", exp.torch_trace)
        self._ray = ray
        if timeout_s is not None:
            self._start_timer(timeout_s)
        threading.Thread(target=self._read, name=f"ray-events-{slot}", daemon=True).start()

    def _stop(self, reason: str) -> bool:
        """KeyboardInterrupt in the task, which kills its worker's process group; Ray kills it if it lingers. False
        where the run had ended already."""
        if self.final is not None or self._stop_reason:
            return False
        self._stop_reason = reason
        self._ray.cancel(self._gen, force=False)
        force = threading.Timer(CANCEL_GRACE_S, self._force_stop)
        force.daemon = True
        force.start()
        return True

    def _force_stop(self) -> None:
        if self.final is None and self._ray.is_initialized():
            self._ray.cancel(self._gen, force=True)

    def _read(self) -> None:
        terminal, failure = None, None
        try:
            for ref in self._gen:
                event = self._ray.get(ref)
                kind = event["type"]
                if kind == "remote":
                    self.remote = {k: v for k, v in event.items() if k != "type"}
                elif kind == "_files":
                    self._unpack(event["files"])
                elif kind in protocol.TERMINAL:
                    terminal = event
                else:
                    if kind == "phase":
                        self.phase = event["phase"]
                    self._queue.put(event)
        except Exception as e:  # a RayError: cancelled, its worker or node died, or the cluster went away
            failure = e
        if self._timer:
            self._timer.cancel()
        if terminal is None:
            terminal = self._unsaid(timeout_message(self.timeout_s, self.phase), self._lost(failure))
            terminal["log_tail"] = []  # the log stayed on the node, which may be gone
        if terminal["type"] == "result":
            terminal["env"].update(self.remote, ray_slot=self.slot)  # the record names the node and GPU
            for local_to_the_node in ("pid", "workdir"):
                terminal["env"].pop(local_to_the_node, None)
        else:
            terminal["node"] = dict(self.remote, slot=self.slot)
        self._finish(terminal)

    def _lost(self, failure: BaseException | None) -> str:
        where = (f"{self.remote.get('hostname')} ({self.remote.get('node_ip')}, slot {self.slot})" if self.remote
                 else f"slot {self.slot}, before its task started")
        why = " ".join(str(failure).split())[:600] if failure else "the task ended without a result"
        return (f"the run's Ray task on {where} ended without a result, e.g. the node or its worker died: "
                f"{type(failure).__name__ if failure else ''}: {why}")

    def _unpack(self, files: dict[str, bytes]) -> None:
        for name, data in files.items():
            path = self.workdir / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
