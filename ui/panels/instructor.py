"""The instructor's panel (System page): unlock with the passcode, pause the queue, change the limits.

The passcode is set in compile-lab.toml or the environment (tcore.lab.policy.guards.instructor_passcode);
without one, nobody has these actions. Unlocked, the session may also cancel or delete anyone's run
(ui.panels.queue, the Compare page).
"""
from __future__ import annotations

import secrets
import time

import streamlit as st

from tcore.lab import api
from tcore.store import RunStore
from ui.panels import people

# limit -> (label, unit, smallest value, step, whether "no limit" is allowed)
_FIELDS = {
    "max_run_s": ("Longest run", "s", 30.0, 30.0, False),
    "max_batch_size": ("Largest batch", "samples", 1, 1, True),
    "max_memory_gib": ("Most memory per run (estimated)", "GiB", 0.5, 0.5, True),
    "max_queued_per_session": ("Runs one person may have waiting", "runs", 1, 1, False),
    # a room behind one NAT address needs this raised to its head count (tcore.lab.policy.guards.NewPeopleGuard)
    "max_new_people_per_address": (f"New participants one network address may start in {api.NEW_PEOPLE_WINDOW_H} h",
                                   "people", 1, 1, False),
}


def panel(store: RunStore) -> None:
    st.markdown("#### Instructor")
    try:
        code = api.instructor_passcode()
    except api.LimitsError as e:
        st.error(f"The lab's settings cannot be read: {e}")
        return
    if code is None:
        st.caption("No instructor passcode is set, so nobody can cancel or delete another person's run, pause "
                   "the queue or change the limits. To allow it, set `passcode` under `[instructor]` in "
                   "compile-lab.toml, or `COMPILE_LAB_INSTRUCTOR_PASSCODE`, and restart the app.")
        return
    if not people.is_instructor():
        with st.form("instructor_unlock", border=False):
            st.text_input("Instructor passcode", type="password", key="instructor_attempt",
                          help="Unlocks cancelling or deleting anyone's run, pausing the queue and changing the "
                               "limits, in this browser (tabs opened or reloaded later too) until Lock, the app's "
                               f"restart or {people.UNLOCK_HOURS} hours.")
            st.form_submit_button("Unlock", icon=":material/lock_open:", on_click=_try_passcode)
            if why := st.session_state.pop(_REFUSED, None):
                st.error(why)
        return
    if tries := api.wrong_passcode_tries():
        st.caption(f":orange[{people.plain(tries)}]")
    # Each action runs in its button's callback, before the page is drawn again: a click followed by st.rerun()
    # in the page's body was seen, in Chromium with the queue's fragments ticking, to change the store while the
    # panel went on saying "Paused" with its Resume button.
    left, right = st.columns(2)
    since = api.paused_since(store)
    if since is None:
        left.button("Pause the queue", icon=":material/pause:", key="instructor_pause", on_click=api.pause,
                    args=(store, True),
                    help="Runs under way finish; waiting runs keep their place; nothing new starts.")
    else:
        # A clock time, not "N s ago": this panel is drawn once, while the queue box beside it ticks on.
        left.markdown(f":orange[Paused since {time.strftime('%H:%M:%S', time.localtime(since))} (the server's clock).]")
        left.button("Resume the queue", icon=":material/play_arrow:", key="instructor_resume", on_click=api.pause,
                    args=(store, False))
    right.button("Lock", icon=":material/lock:", key="instructor_lock", on_click=people.lock,
                 help="Give up the instructor's actions in every tab unlocked on this app; the passcode unlocks "
                      "them again.")
    limits_form(store)


_REFUSED = "instructor_refused"  # session_state: why the last passcode tried did not unlock, said under the form


def _try_passcode() -> None:
    """Unlock's callback. It runs before the next page is drawn, whichever page that is: read in the System page's
    body, a click on Unlock followed at once by a click on another page (both handled in one run on a loaded
    server) was never seen, and the browser stayed locked."""
    # guesses are slowed per session and per address, and logged (tcore.lab.policy.guards.PasscodeGuard)
    attempt = st.session_state.get("instructor_attempt", "")
    session = st.session_state.setdefault("passcode_session", secrets.token_hex(8))
    unlocked, why = api.try_passcode(session, attempt, address=people.client_address())
    if unlocked:
        people.unlock(attempt)
        st.session_state.pop(_REFUSED, None)  # a wrong try's sentence not yet shown: stale once unlocked
    else:
        st.session_state[_REFUSED] = why


# Set when the limits in force changed from this form: its fields are refilled from them on the next run, before
# they are drawn (Streamlit takes a widget's state only before the widget exists), so they never show stale values.
_REFILL = "instructor_limits_refill"
_TOLD = "instructor_limits_told"  # the toast to show after that rerun


def limits_form(store: RunStore) -> None:
    """The limits in force, where each comes from, and a form to change them for everyone."""
    now = api.lab_limits(store)
    if st.session_state.pop(_REFILL, False) or f"instructor_{next(iter(_FIELDS))}" not in st.session_state:
        st.session_state.update(field_values(now))
    told = st.session_state.pop(_TOLD, None)  # said under the form, where the click was, until the next action
    # Enter in a field does not submit: it applied a half-typed change to the whole room at once (and the click meant
    # for it then read "no limit changed"). Only the buttons act.
    with st.form("instructor_limits", enter_to_submit=False):
        st.markdown("**Limits for every run** (they apply to the next run submitted)")
        values, too_low = {}, []
        for name, (label, unit, low, step, optional) in _FIELDS.items():
            current = getattr(now, name)
            where = now.origin.get(name, "default")
            cols = st.columns([3, 1], vertical_alignment="bottom")
            # An optional limit's field is empty while it has none (it showed the smallest value beside "No limit").
            # No min_value: Streamlit drops a number below it without a word, which left an optional field empty,
            # read as no limit (-1 in Largest batch); the form refuses it in a sentence instead.
            shown = "%g" if isinstance(step, float) else None  # "900", not "900.00"
            number = cols[0].number_input(f"{label} ({unit})", step=step, format=shown,
                                          **({"value": None} if optional else {}), key=f"instructor_{name}",
                                          help=f"Now {current if current is not None else 'no limit'} ({where})."
                                               + (" Empty or No limit: none." if optional else ""))
            unlimited = optional and cols[1].checkbox("No limit", key=f"instructor_{name}_none")
            values[name] = None if unlimited or number is None else number
            if values[name] is not None and values[name] < low:
                too_low.append(f"{label} must be at least {amount(low, unit)}, not {number:g}")
        apply, reset = st.columns(2)
        if apply.form_submit_button("Apply to everyone", type="primary"):
            # a refusal leaves the typed values in the fields, beside the sentence that refuses them
            if too_low:
                st.error("Nothing was changed: " + "; ".join(too_low) + ".")
            else:
                try:
                    api.set_limits(store, values)
                except api.LimitsError as e:
                    st.error(str(e))
                else:
                    _refill(applied_words(now, api.lab_limits(store), "Applied to everyone"))
        if reset.form_submit_button("Back to the file's limits"):
            api.set_limits(store, None)
            _refill(applied_words(now, api.lab_limits(store), "Back to the config file's and environment's limits"))
        if told:
            st.success(told, icon=":material/check_circle:")


def applied_words(before: api.Limits, after: api.Limits, what: str) -> str:
    """'Applied to everyone at 14:02:11: Longest run 900 → 600 s. They apply to the next run submitted.'"""
    def shown(value, unit: str) -> str:
        return "no limit" if value is None else amount(value, unit)

    changed = [f"{label} {shown(getattr(before, name), unit)} → {shown(getattr(after, name), unit)}"
               for name, (label, unit, *_) in _FIELDS.items() if getattr(before, name) != getattr(after, name)]
    return (f"{what} at {time.strftime('%H:%M:%S')}: " + ("; ".join(changed) if changed else "no limit changed")
            + ". They apply to the next run submitted.")


_ONE = {"samples": "sample", "runs": "run", "people": "person"}  # a unit's name for one


def amount(value: float, unit: str) -> str:
    """'900 s', '1 run', '3 runs', '1 person'."""
    return f"{value:g} {_ONE.get(unit, unit) if value == 1 else unit}"


def field_values(now: api.Limits) -> dict[str, object]:
    """The form's widget state for the limits in force: each number, and "No limit" ticked (its number empty) where
    an optional limit has none."""
    state: dict[str, object] = {}
    for name, (_, _, low, _, optional) in _FIELDS.items():
        current = getattr(now, name)
        state[f"instructor_{name}"] = None if current is None else type(low)(current)
        if optional:
            state[f"instructor_{name}_none"] = current is None
    return state


def _refill(told: str) -> None:
    st.session_state[_REFILL], st.session_state[_TOLD] = True, told
    st.rerun()
