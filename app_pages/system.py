"""System: the GPU or CPU this app runs on, the versions that matter, and what is not available here."""
import time

import streamlit as st

from tcore.host import machine
from tcore.lab import api
from tcore.store import RunStore
from tcore.store.changes import reads
from ui.charts import run_charts as charts
from ui.panels import exports, instructor, people, queue, spread


def gpu_slots() -> dict[int, str]:
    """NVML index (as nvidia-smi numbers GPUs) -> the queue's slot for it in this app, cuda:0, cuda:1, ..."""
    from tcore.host.power import nvml_index

    return {nvml_index(int(slot.split(":")[1])): slot for slot in api.device_slots("cuda")}


@st.fragment(run_every=2.0)
def gpu_now(store: RunStore, slot: str) -> None:
    """What this GPU is doing now, refreshed every 2 s: the runs in it and, where they share it, who holds it."""
    with people.store_trouble_said():
        _gpu_now(store, slot)


def _gpu_now(store: RunStore, slot: str) -> None:
    me = people.me()
    rows = [r for r in api.under_way(reads(store)) if r["status"] == "running" and r["device_slot"] == slot]
    if not rows:
        st.markdown(":gray[Idle: the next run in the queue can start here.]")
        return
    plan = api.room_plan("cuda")
    if plan.shares:
        st.markdown(f"**{len(rows)} of {plan.runs_per_slot} places taken** on this GPU")
    for row in rows:
        where = f" · {row['device_state']}" if row.get("device_state") else ""
        whose = people.plain(queue.whose(row["owner"], me))  # a name as typed: anyone's words
        st.markdown(f"**Running** {people.plain(row['label'])} · :gray[{whose}] · for "
                    f"{api.duration_words(time.time() - row['started_at'])}{where}")


@st.fragment(run_every=2.0)
def cluster_now(store: RunStore) -> None:
    """The Ray cluster's nodes, their GPUs and what each runs, refreshed every 2 s."""
    with people.store_trouble_said():
        _cluster_now(store)


def _cluster_now(store: RunStore) -> None:
    me = people.me()
    rows = api.cluster_rows(store, lambda owner: queue.whose(owner, me))
    nodes = {row["ray node id"] for row in rows if row["node"] != "gone"}
    busy = sum(row["running"] != "idle" for row in rows)
    st.markdown(f"**{len(nodes)} nodes, {len(rows)} slots, {busy} running**")
    st.dataframe(rows, hide_index=True, width="stretch")


def runs_by_gpu(store: RunStore, latest: int = 500) -> dict[str, list]:
    """GPU UUID -> the runs among the `latest` stored that ran on it, newest first (read once per page)."""
    out: dict[str, list] = {}
    for rec in store.list(limit=latest):
        if rec.env.get("gpu_uuid"):
            out.setdefault(rec.env["gpu_uuid"], []).append(rec)
    return out


facts = machine.facts()
st.title("System")

store = RunStore()
if facts["gpus"]:
    slots, done = gpu_slots(), runs_by_gpu(store)
    for gpu in facts["gpus"]:
        st.subheader(f"GPU {gpu['index']}: {gpu['name']}")
        st.caption(f"{gpu['uuid']}" + (f" · runs here take slot {slots[gpu['index']]}" if gpu["index"] in slots
                                         else " · not visible to this app (CUDA_VISIBLE_DEVICES)"))
        cols = st.columns(4)
        cols[0].metric("Driver", gpu["driver"])
        cols[1].metric("Memory", f"{gpu['memory_total_gib']:.0f} GiB")
        cols[2].metric("Power limit", f"{gpu['power_limit_w']:.0f} W")
        cols[3].metric("CUDA (torch build)", facts["cuda"] or "n/a")
        if gpu["index"] in slots:
            gpu_now(store, slots[gpu["index"]])
        if here := done.get(gpu["uuid"]):
            st.caption(f"{len(here)} of the last 500 stored runs ran on this GPU; the latest: "
                       f"{people.plain(here[0].label)}.")
else:
    st.subheader(f"CPU: {facts['cpu']}")
    st.metric("Cores", f"{facts['cpu_count']} cores")
st.caption(f"{facts['platform']}")
try:  # how this machine serves a room: runs per GPU, the cores kept for the measuring run (tcore.lab.queue.room)
    st.info(api.room_plan("cuda" if facts["gpus"] else "cpu").why, icon=":material/groups:")
except Exception as e:  # noqa: BLE001 (a [room] setting written wrongly: say which, the page goes on)
    st.error(f"The room's plan cannot be made: {e}")

if (ray_address := api.cluster_address()) is not None:
    st.subheader("Ray cluster")
    st.caption(f"Runs go to the Ray cluster at `{ray_address}`: one run per GPU (per node where there are "
               "none), each in a fresh worker process on its node; the queue and the records stay here.")
    cluster_now(store)

cols = st.columns(4)
cols[0].metric("torch", facts["torch"])
cols[1].metric("triton", facts["triton"] or "not installed")
cols[2].metric("python", facts["python"])
cols[3].metric("streamlit", facts["streamlit"] or "n/a")

if facts["missing"]:
    st.markdown("#### Not available here")
    st.warning("\n".join(f"- {line}" for line in facts["missing"]))
with st.container(border=True):
    queue.queue_box(store, key="system_queue")
if active := api.sweeps_under_way(store):
    st.caption(f"Sweeps in progress: {active}.")

with st.container(border=True):
    spread.panel(store, "cuda" if facts["gpus"] else "cpu")

with st.container(border=True):
    instructor.panel(store)

if "system_samples" not in st.session_state:
    st.session_state.system_samples = []  # [t_s, watts, "idle", util_pct], the last two minutes


def live_power() -> None:
    """Power and utilisation now, read from NVML (GPU) or RAPL (CPU) once a second; on a machine with neither,
    one sentence, drawn once: a tab that refreshed it every second would load the server for nothing."""
    if not facts["gpus"] and not (meter := machine.meter("cpu")).available:
        st.markdown("#### Live power")
        st.info(f"No power reading: {meter.reason}.")
        return
    st.fragment(_live_power, run_every=1.0)()


def _live_power() -> None:
    st.markdown("#### Live power")
    if facts["gpus"]:
        reading = machine.gpus()[0][0]
        watts, util = reading["power_w"], reading["utilization_pct"]
    else:
        watts, util = machine.meter("cpu").power_w(), None
    if watts is None:
        st.caption("Waiting for a second energy reading to compute power...")
        return
    samples = st.session_state.system_samples
    samples.append([time.time(), watts, "idle", util])
    del samples[:-120]
    cols = st.columns(2)
    cols[0].metric("Power now", f"{watts:.0f} W")
    cols[1].metric("Utilisation now", f"{util:.0f} %" if util is not None else "n/a")
    t0 = samples[0][0]
    exports.show(st, charts.power_trace_chart([[t - t0, w, p, u] for t, w, p, u in samples],
                                              title="Power over the last two minutes",
                                              x_title="Time (s)"), key="system_live_power")


live_power()
