"""The shared run queue as a page sees it: who this browser session is, submitting runs, its runs, the room's queue.

Every run waits its turn in the queue kept in the store (tcore.lab.queue.scheduler), across every session and process.
On a GPU several runs share a device (tcore.lab.queue.room): they compile side by side and hold the GPU alone, in turn,
to measure; on a CPU runs take turns whole. A participant submits under their own id (ui.panels.people), so the lab's
limit on queued runs applies per person, and only the owner or the instructor may cancel.
"""
from __future__ import annotations

import sqlite3
import threading
import time
import traceback

import pandas as pd
import streamlit as st

from tcore.experiment.protocol import PHASE_TITLES
from tcore.experiment.spec import Experiment, SpecError
from tcore.lab import api
from tcore.store import RunStore, StoreError
from tcore.store.changes import reads
from ui.panels import people
from ui.words import run_state, store_words

MY_RUNS_SHOWN = 8
# How often a view of the queue redraws: every BUSY_S while something in it can change by the second (a run
# queued or running: its place, its wait, its time so far), every IDLE_S while nothing is under way (only
# someone's new run can change it then). Twenty idle tabs must cost the server next to nothing.
BUSY_S = 2.0
IDLE_S = 10.0
_CANCELLING: dict[str, float] = {}  # run id -> when someone in this process asked to cancel it (every session sees it)
STATE_COLUMN_PX = 250
TOAST = "queue_toast"  # session_state: a cancel's answer, for the next redraw to show
CANCEL_WAIT_S = 0.5  # how long a click on Cancel waits for the cancel before the page redraws
CANCELLED = "Cancelled: a queued run never starts"  # the toast's words once a cancel is done
_LATE_FAILURES: dict[str, str] = {}  # owner id -> why their cancel failed after the click stopped waiting


def whose(owner: str | None, me: str) -> str:
    """'yours', or whose it is: 'ada', 'guest 3f9a', 'the command line'."""
    return "yours" if owner == me else people.display_name(owner)


def submit(experiments: list[Experiment], store: RunStore, *, key: str, timeout_s: float | None = None,
           checked: api.Checked | None = None) -> list[str]:
    """Queue the experiments in order for this session; returns the ids queued. `checked`: the device check's answer
    for a single experiment, made by the page as it drew (knobs.build), so the submit does not check again.

    A refusal (batch too big, too much memory, too many queued runs) stops the rest, and
    show_refusal(key) shows it after the rerun; what was queued before it stays queued.
    """
    queued = []
    for exp in experiments:
        try:
            queued.append(api.queue(exp, store, owner=people.me(), timeout_s=timeout_s, from_app=True,
                                    checked=checked if len(experiments) == 1 else None))
        except (SpecError, StoreError, sqlite3.Error) as e:
            # a store that can only be read, or is full or locked: said here, as a click's callback runs outside the
            # page's own handler of store errors (app.py), where it was a bare "This app has encountered an error"
            why = store_words.store_trouble(e) if isinstance(e, (StoreError, sqlite3.Error)) else e
            st.session_state[f"{key}_refusal"] = (f"**{people.plain(exp.label)} cannot be queued:** {why}"
                                              + (f" ({len(queued)} run(s) before it were queued.)" if queued else ""))
            break
        if (twins := identical_waiting(exp, store)) > 1:
            st.session_state[f"{key}_notice"] = (
                f"You have {twins} identical runs of **{people.plain(exp.label)}** queued or running: each repeats the "
                "same measurement. If that was a double click, cancel the extra ones in the queue.")
    return queued


def submit_in_turn(experiments: list[Experiment], store: RunStore, *, key: str) -> list[str]:
    """Queue as many of `experiments` as this person may have waiting now (the lab's max_queued_per_session); the lab
    holds the rest (pending(key)) and queues them, in order, as places free up, whether or not this page is open:
    one press queues them all, however low the bound. Returns the ids queued now; feed_pending(key) those since."""
    try:
        token = api.queue_in_turn(experiments, store, owner=people.me())
    except (SpecError, StoreError, sqlite3.Error) as e:
        why = store_words.store_trouble(e) if isinstance(e, (StoreError, sqlite3.Error)) else e
        st.session_state[f"{key}_refusal"] = f"**{people.plain(experiments[0].label)} cannot be queued:** {why}"
        return []
    st.session_state[f"{key}_batch"], st.session_state[f"{key}_refused"] = token, False
    return list(api.in_turn_view(token).queued)


def _batch(key: str, *, feed: bool = False):
    token = st.session_state.get(f"{key}_batch")
    return api.in_turn_view(token, feed=feed) if token else None


def pending(key: str) -> list[Experiment]:
    """The runs submit_in_turn(key) left with the lab until this person's queue has room for them."""
    return list(batch.held) if (batch := _batch(key)) is not None else []


def feed_pending(key: str, store: RunStore) -> list[str]:
    """The ids the lab queued from submit_in_turn(key) since this session last asked (offering the places free now
    first), in order. A refusal other than a full queue (memory, say) ended the lab's feed: show_refusal(key) says
    why, and what was queued stays queued."""
    if (batch := _batch(key, feed=True)) is None:
        return []
    if batch.refusal and not st.session_state.get(f"{key}_refused"):
        label, why = batch.refusal
        st.session_state[f"{key}_refusal"] = (f"**{people.plain(label)} cannot be queued:** {why} "
                                              f"({len(batch.queued)} run(s) before it were queued.)")
        st.session_state[f"{key}_refused"] = True
    known = set(st.session_state.get(key, []))
    return [i for i in batch.queued if i not in known]


def let_go(key: str) -> None:
    """The held runs of submit_in_turn(key) are not queued (a button's on_click): one press queued them all, one lets
    the rest go; the queued ones are cancelled as any."""
    if token := st.session_state.get(f"{key}_batch"):
        n = api.let_go_held(token)
        # said by the page as it redraws: a toast from a callback of a fragment's button is refused with a warning
        st.session_state[f"{key}_notice"] = (f"{n} held run{'s' * (n != 1)} will not be queued; those queued stay, "
                                             "each with its Cancel." if n else "Nothing was held any more.")


def pending_words(key: str, store: RunStore) -> str | None:
    """'2 more runs to queue ...', while the lab holds some of submit_in_turn(key)'s runs."""
    if not (held := pending(key)):
        return None
    _, bound = api.places_left(people.me(), store)
    return (f"**{len(held)} more run{'s' * (len(held) != 1)} to queue**: this lab lets one person have {bound} "
            f"run{'s' * (bound != 1)} waiting at once, so {'they go' if len(held) != 1 else 'it goes'} in, in order, "
            "as yours start, whether or not this page is open.")


def identical_waiting(exp: Experiment, store: RunStore) -> int:
    """This session's runs of exactly `exp` that are queued or running."""
    spec = exp.to_dict()
    return sum(1 for r in my_runs(store, limit=200) if r.status in ("queued", "running") and r.spec == spec)


def show_refusal(key: str, *, panel: bool = False) -> None:
    """The last refusal or notice, once: submit() is followed by st.rerun(), which would wipe one drawn there. panel:
    live_runs_panel(feed=key) was drawn above this run and said the notice of a press of Don't queue them already:
    it says it at each of its redraws until the page runs whole again (a person's next click), and then no more."""
    if message := st.session_state.pop(f"{key}_refusal", None):
        st.error(message)
    if (message := st.session_state.pop(f"{key}_notice", None)) and not panel:
        st.warning(message)


def my_runs(store: RunStore, limit: int | None = MY_RUNS_SHOWN) -> list:
    """This session's latest runs (all of the store's latest 200 with limit None), newest first: queued, running
    and ended."""
    me = people.me()
    return [r for r in reads(store).list(limit=200) if r.owner == me][:limit]


def my_runs_table(store: RunStore) -> None:
    """This session's runs with their state; redrawn every BUSY_S while one of them is queued or running, else
    drawn once (only this person's own actions change it then, and they rerun the page). A page that follows a
    run live draws runs_table within its own fragment instead (ui.panels.live.follow)."""
    busy = any(r.status in ("queued", "running") for r in my_runs(store))
    st.fragment(_my_runs_table, run_every=BUSY_S if busy else None)(store, busy=busy)


def _my_runs_table(store: RunStore, *, busy: bool) -> None:
    mine = my_runs(store)
    if busy and not any(r.status in ("queued", "running") for r in mine):
        st.rerun()  # the last of them has ended: draw it once more, and stop refreshing
    runs_table(store, mine)


def runs_table(store: RunStore, mine: list | None = None) -> None:
    """This session's runs (`mine`, else read now) and the state of each, as run_state.state() answers it."""
    mine = my_runs(store) if mine is None else mine
    if not mine:
        return
    places = run_state.places_by_id(store)
    st.markdown("**Your runs**")
    # The state gets a fixed width that holds its longest words ("running: Measuring eager vs compiled"); the
    # run's label, which the selector below repeats, takes what is left and is the one cut short, so the time and
    # the id that tell two runs of one label apart come first, where no cut reaches them.
    st.dataframe(pd.DataFrame({"Started": [time.strftime("%H:%M:%S", time.localtime(r.created_at)) for r in mine],
                               "Id": [r.id[-6:] for r in mine],
                               "Run": [r.label for r in mine],
                               "State": [run_state.state(r.id, store, record=r, places=places).words()
                                         for r in mine]}),
                 hide_index=True, width="stretch", key="my_runs_table",
                 column_config={"Started": st.column_config.TextColumn(width=64),
                                "Id": st.column_config.TextColumn(width=56),
                                "Run": st.column_config.TextColumn(width="medium"),
                                "State": st.column_config.TextColumn(width=STATE_COLUMN_PX)})
    if len(mine) == MY_RUNS_SHOWN and (count := len(my_runs(store, limit=None))) > MY_RUNS_SHOWN:
        st.caption(f"Your latest {MY_RUNS_SHOWN} of {count} runs; every one of them is on the Compare page.")


@st.fragment(run_every=IDLE_S)
def queue_box(store: RunStore, *, key: str) -> None:
    """The room's queue on this machine, redrawn every IDLE_S; while runs are under way their rows are a fragment
    of their own, redrawn every BUSY_S, which this one stops calling, and so stops, at its first redraw after the
    queue has emptied. A page that follows a run live draws draw_queue within its own fragment instead."""
    with people.store_trouble_said():
        draw_queue(store, key=key, rows=queue_rows)


def draw_queue(store: RunStore, *, key: str, rows=None) -> None:
    """The queue: running, then queued runs, whose they are; cancel your own (the instructor: any). `rows` draws
    the runs under way (default: draw_queue_rows, in the caller's own redraw)."""
    show_toast()
    st.markdown("**The queue on this machine**")
    if (since := api.paused_since(reads(store))) is not None:
        # a clock time, not "N min ago": the words stood still between redraws while the rows under them ticked on
        st.warning(f"The instructor paused the queue at {time.strftime('%H:%M:%S', time.localtime(since))} (the "
                   "server's clock): runs under way "
                   "finish, waiting runs keep their place and start when it resumes.", icon=":material/pause:")
    if problem := api.queue_problem(store):
        st.error(f"The queue cannot start runs right now and keeps retrying every {api.QUEUE_TICK_S:g} s: {problem}")
    if not api.under_way(reads(store)):
        st.caption(empty_queue_words(paused=since is not None))
        return
    st.caption(sharing_words(api.under_way(reads(store))))
    (rows or draw_queue_rows)(store, key=key)


def empty_queue_words(*, paused: bool) -> str:
    """The queue's line when nothing is under way: a run starts at once, unless the instructor paused the queue."""
    if paused:
        return ("Nothing is running or waiting; the queue is paused, so a run queued now waits for the instructor to "
                "resume it.")
    return "Nothing is running or waiting: a run starts at once."


def sharing_words(rows: list[dict]) -> str:
    """How the queue's runs share the devices, for the caption over the queue: the room's plan in a sentence."""
    kind = "cuda" if any(row.get("device") == "cuda" for row in rows) else "cpu"
    try:
        plan = api.room_plan(kind)
    except SpecError as e:
        return f"The room's plan cannot be made: {e}"
    order = " Runs leave the queue in the order they were queued, across every browser and the command line."
    if not plan.shares:
        return ("One run at a time per device: two runs timed at once would disturb each other's figures." + order
                if kind == "cpu" or plan.runs_per_slot == 1 else plan.why + order)
    return plan.why + " No run's timed rounds ever overlap another's GPU work." + order


@st.fragment(run_every=BUSY_S)
def queue_rows(store: RunStore, *, key: str) -> None:
    with people.store_trouble_said():
        draw_queue_rows(store, key=key)


def draw_queue_rows(store: RunStore, *, key: str) -> None:
    """One line per run under way: when it starts (the reason on hover) or how long it has run; Cancel where this
    person may use it (their own runs; the instructor: any), and no button where they may not."""
    show_toast()
    me = people.me()
    instructor = people.is_instructor()
    rows = api.under_way(reads(store))
    if not rows:
        st.caption("Nothing is running or waiting now.")
    stopping = cancelling(rows)
    for row in rows:
        left, right = st.columns([4, 1], vertical_alignment="center")
        owner = whose(row["owner"], me)
        reason = None
        if row["run_id"] in stopping:
            state = "**cancelling**: its worker is being stopped"
        elif row["status"] == "running":
            where = f" on {row['device_slot']}" if row.get("device_slot") else ""
            state = f"**running**{where} for {api.duration_words(_since(row['started_at']))}"
            if row.get("device_state"):  # a shared GPU: holding it, waiting for it, or compiling beside its holder
                state += f" · {row['device_state']}"
        else:
            state = f"**#{row['queue_position'] or '?'} in the queue** · {api.wait_words(row['wait'])[0]}"
            reason = api.wait_words(row["wait"])[1]
        # the id's end, as the runs table shows it: two runs of one label tell apart
        left.markdown(f"{state} · {people.plain(row['label'])} · :gray[{people.plain(owner)}] · "
                      f":gray[run {row['run_id'][-6:]}]",
                      help=reason)
        if (owner == "yours" or instructor) and row["run_id"] not in stopping:
            # on_click: the cancel happens before this fragment redraws, so the line changes on the click itself.
            # Another person's run (the instructor's Cancel) is cancelled only once the instructor confirms.
            theirs = owner != "yours"
            right.button("Cancel", key=f"{key}_cancel_{row['run_id']}", icon=":material/cancel:",
                         on_click=ask_to_cancel if theirs else cancel,
                         args=(row["run_id"],) if theirs else (row["run_id"], store),
                         disabled=st.session_state.get(CONFIRM) == row["run_id"])
            if theirs and st.session_state.get(CONFIRM) == row["run_id"]:
                confirm_cancel(row, owner, store, key=key)


CONFIRM = "queue_confirm_cancel"  # session_state: the run of another person whose cancel awaits the instructor's yes


def ask_to_cancel(run_id: str) -> None:
    """The instructor's Cancel on another person's run: ask first (the run is someone's work, and may be minutes in)."""
    st.session_state[CONFIRM] = run_id


def keep_run() -> None:
    st.session_state.pop(CONFIRM, None)


def confirm_and_cancel(run_id: str, store: RunStore) -> None:
    st.session_state.pop(CONFIRM, None)
    cancel(run_id, store)


def confirm_cancel(row: dict, owner: str, store: RunStore, *, key: str) -> None:
    """Under a row of another person's run: what the instructor's cancel does, Cancel it and Keep it."""
    with st.container(border=True):
        what = ("stops now, and its measurements so far are lost" if row["status"] == "running"
                else "leaves the queue and never starts")
        who = people.plain(owner)  # a name as typed, and a label: anyone's words, shown as such
        st.markdown(f"Cancel {who}'s run {people.plain(row['label'])} · {row['run_id'][-6:]}? It {what}; {who} sees "
                    "that the instructor cancelled it.")
        yes, no = st.columns(2)
        yes.button("Cancel their run", key=f"{key}_confirm_{row['run_id']}", type="primary", icon=":material/cancel:",
                   on_click=confirm_and_cancel, args=(row["run_id"], store))
        no.button("Keep it", key=f"{key}_keep_{row['run_id']}", on_click=keep_run)


def cancel(run_id: str, store: RunStore) -> None:
    """Cancel as this person (a button's on_click, so the queue redraws after it). A running run's worker takes
    a few seconds to stop: that goes on in the background, and meanwhile every tab of this process shows the run
    as cancelling. The toast says "Cancelled" only once the cancel has been asked for where it acts (the queue, the
    run's worker, or the store for another process); one still under way after CANCEL_WAIT_S says "Cancelling",
    and if it then fails, the person's next redraw says why (_LATE_FAILURES)."""
    outcome: list[BaseException | None] = []
    told = threading.Lock()  # the outcome goes to the click or, once it has stopped waiting, to show_toast
    late: list[bool] = []

    def stop() -> None:
        try:
            done = None if api.cancel(run_id, store, owner=owner, instructor=instructor) else AlreadyEnded(run_id)
        except BaseException as e:
            done = e
        if done is not None:
            _CANCELLING.pop(run_id, None)  # its row is not "cancelling"
        with told:
            outcome.append(done)
            if late and late[0] and done is not None:  # the click has stopped waiting: for the next redraw
                if isinstance(done, AlreadyEnded):
                    _LATE_FAILURES[owner] = str(done)
                else:
                    traceback.print_exception(done)
                    why = people.plain(str(done)) or type(done).__name__
                    _LATE_FAILURES[owner] = f"The cancel of run {run_id} failed: {why}"

    owner, instructor = people.me(), people.is_instructor()  # read here: the thread has no session
    _CANCELLING[run_id] = time.time()
    worker = threading.Thread(target=stop, name=f"cancel-{run_id}", daemon=True)
    worker.start()
    worker.join(CANCEL_WAIT_S)  # a queued run, or one in another process, is cancelled well within this
    with told:
        late.append(not outcome)
        done = outcome[0] if outcome else None
    if isinstance(done, (PermissionError, KeyError, AlreadyEnded)):  # not theirs, gone or ended meanwhile
        st.session_state[TOAST] = str(done)
    elif done is not None:
        raise done
    elif late[0]:
        st.session_state[TOAST] = ("Cancelling: it takes longer than usual. The queue shows the run as cancelling "
                                   "until it is done; a failure would be told here.")
    else:
        st.session_state[TOAST] = f"{CANCELLED}; a running one has its worker stopped."


class AlreadyEnded(Exception):
    """The run had ended before the click reached it (its row was drawn before its end): nothing was cancelled."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"Run {run_id} had already ended: nothing was cancelled.")


def show_toast() -> None:
    """The cancel's answer, as a toast. Kept in the session by the click's callback and shown by whichever redraw
    comes next: a toast made in the callback itself is lost when that redraw turns into a whole-page rerun (the
    queue emptied, or the followed run ended, so the page goes round). A cancel that failed after its click stopped
    waiting is told the same way, to the person who clicked. Each message is forgotten only once st.toast has
    returned: a rerun asked for meanwhile (another tab's sync, a click) stops the script inside st.toast before its
    message is sent, and a message taken out first would be lost with it; the next redraw shows it instead."""
    if message := st.session_state.get(TOAST):
        st.toast(message)
        st.session_state.pop(TOAST, None)
    me = people.me()
    if message := _LATE_FAILURES.get(me):
        st.toast(message, icon=":material/error:")
        _LATE_FAILURES.pop(me, None)


def cancelling(rows: list[dict]) -> set[str]:
    """The runs among `rows` (the queue) that someone in this process has asked to cancel; forgets the rest."""
    under_way = {row["run_id"] for row in rows}
    for run_id in [i for i in _CANCELLING if i not in under_way and time.time() - _CANCELLING[i] > CANCEL_WAIT_S]:
        _CANCELLING.pop(run_id, None)
    return under_way & set(_CANCELLING)


def _since(t: float | None) -> float | None:
    return None if t is None else time.time() - t


def live_ids(run_ids: list[str], store: RunStore) -> list[str]:
    """The ids among `run_ids` that this process is still running or holding in the queue, and whose record does not
    say they have ended (run_state.state: the record says so a moment before the LiveRun does, and a line saying
    "Running" beside that run's result held for seconds)."""
    return [i for i in run_ids if i and run_state.state(i, store).followed]


@st.fragment(run_every=2.0)
def live_runs_panel(run_ids: list[str], *, key: str, feed: str | None = None, store: RunStore | None = None) -> None:
    """One line per run still queued or running, with a cancel button; reruns the page when all have ended.
    feed: the submit_in_turn key whose held runs this panel queues as places free up (into session_state[feed])."""
    if feed is not None:
        st.session_state[feed] = [*st.session_state.get(feed, []), *feed_pending(feed, store)]
        run_ids = st.session_state[feed]
    waiting = live_ids(run_ids, store or RunStore())
    held = pending_words(feed, store) if feed is not None else None
    if not waiting and not held:
        st.rerun()  # the page draws their results now (and show_refusal what Don't queue them said)
    if feed is not None and (said := st.session_state.get(f"{feed}_notice")):
        # a press of Don't queue them reruns this fragment alone: said here, at each redraw, until the page runs whole
        # (show_refusal lets it go then); popped at the first, it went with the next redraw, 2 s on, unread
        st.info(said)
    if held:
        words, button = st.columns([4, 1], vertical_alignment="center")
        words.markdown(held)
        button.button("Don't queue them", key=f"{key}_let_go", icon=":material/playlist_remove:", on_click=let_go,
                      args=(feed,), help="The runs still held are not queued; those queued stay, each with its Cancel.")
    for run_id in waiting:
        if (run := api.follow(run_id)) is None:  # dropped since live_ids: the next redraw reruns the page
            continue
        snap = run.snapshot
        left, right = st.columns([4, 1], vertical_alignment="center")
        if snap["status"] == "queued":
            state = run_state.queue_words(snap["queue_position"], snap["wait"], snap["waited_s"])
        else:
            phase = PHASE_TITLES.get(snap["phase"], "Starting the worker")
            started = snap["phase_started_at"].get(snap["phase"])
            in_phase = f", {api.duration_words(_since(started))} in this phase" if started else ""
            state = f"Running: {phase}{in_phase}, {api.duration_words(snap['elapsed_s'])} in all"
        left.markdown(f"**{people.plain(run.exp.label)}** · {state}")
        if right.button("Cancel", key=f"{key}_cancel_{run_id}", icon=":material/cancel:"):
            api.stop(run_id)
