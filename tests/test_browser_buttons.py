"""Every button that changes state, clicked in a real browser, with what the page shows next.

AppTest runs callbacks and reruns but not a live session's checks: Streamlit refuses, only in a live session,
to change the state of a widget already drawn in the same run ("Queue it" did, on the Run page). So each button
is clicked here in headless Chromium against `streamlit run app.py`, and every page's console and requests are
watched (tests.test_browser.Watch). One server and store for the file; a participant per browser context:
Ada and Bob, and the instructor (passcode set through the environment). Runs are the tiny captioner on the CPU
with the eager or aot_eager backend and a timed stage of two steps, one round.
"""
from __future__ import annotations

import re
import time

import pytest

from tests.browser_harness import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, Watch, click_until_shown, serve

pytestmark = pytest.mark.browser

PASSCODE = "letmein"
ADA, BOB, TEACHER = "ada~1a2b.00000000c0ffee00", "bob~2b3c.00000000c0ffee00", "teacher~9f9f.00000000c0ffee00"
LONG_MS = 180_000  # this 2-core machine is shared: a page can take a minute to draw while a run compiles
RUN_MS = 400_000  # a run: worker start, imports, compile, a short timed stage


def seeded_run(store, owner: str, *, step_ms: float | None = None, **changes) -> str:
    """A finished run of `owner`'s, as a worker would have recorded it (nothing is compiled); with `step_ms`, both
    variants profiled at that step, as timed."""
    from tcore.experiment.spec import Experiment
    from tests.helpers import insert_run

    exp = Experiment(**{"model": "captioner", "preset": "tiny", "batch_size": 2, "device": "cpu", "backend": "eager",
                        **changes})
    run_id = insert_run(store, exp)
    with store._write() as db:
        db.execute("UPDATE runs SET owner=? WHERE id=?", (owner, run_id))
    profiled = {}
    if step_ms is not None:
        bd = {"step_ms": step_ms, "steps": 3, "source": "cpu ops", "overlap_ms": 0.0, "top": [],
              "ms": {"matmul": step_ms * 0.6, "pointwise": step_ms * 0.3, "idle": step_ms * 0.1}}
        profiled = {"breakdown": {"eager": bd, "compiled": bd}, "eager_latency_ms_p50": step_ms,
                    "compiled_latency_ms_p50": step_ms}
    store.finish(run_id, env={"torch": "2.14", "device": "cpu"}, result={
        "device": "cpu", "variants": ["eager", "compiled"], "eager_steps_per_s": 10.0, "eager_samples_per_s": 20.0,
        "compiled_steps_per_s": 12.0, "compiled_samples_per_s": 24.0, "speedup": 1.2, "speedup_min": 0.7,
        "speedup_max": 1.9, "busy_cores": 1.5, "compile_s": 3.0, "breakeven_steps": 450.0,  # noisy: a busy CPU
        "graph_count": 1, "graph_break_count": 0, "graph_breaks": [], "recompile_count": 0, "recompiles": [],
        "unavailable": {}, **profiled})
    return run_id


# The bars of "Where the time goes" across the chosen runs, read from the page's plotly chart: name -> ms per step.
COMPARE_BARS = """() => {
    const gd = [...document.querySelectorAll('.js-plotly-plot')].find(g => g.layout && g.layout.title
        && ((g.layout.title.subtitle || {}).text || '').replace(/<br>/g, ' ').includes('compiled of each run'));
    if (!gd) return null;
    const totals = {};
    for (const t of gd.data) if (t.type === 'bar') t.y.forEach((y, i) => { totals[y] = (totals[y] || 0) + t.x[i]; });
    return totals;
}"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    from tcore.store import RunStore

    folder = tmp_path_factory.mktemp("buttons")
    store = RunStore(folder / "runs.sqlite")
    seeded = {"ada": seeded_run(store, ADA), "bob": seeded_run(store, BOB, batch_size=4)}
    with serve(folder, COMPILE_LAB_INSTRUCTOR_PASSCODE=PASSCODE, COMPILE_LAB_CACHE_DIR=str(folder / "cache")) as url:
        yield {"url": url, "store": store, "seeded": seeded, "log": folder / "streamlit.log"}


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import expect, sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    expect.set_options(timeout=LONG_MS)  # expect() has a clock of its own, 5 s unless told
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


OPEN: list = []  # every person's context, for a screenshot of each page when a test fails


@pytest.fixture(autouse=True)
def _screenshots_on_failure(request):
    failed = request.session.testsfailed
    yield
    for n, context in enumerate(OPEN):
        for i, page in enumerate(context.pages):
            if request.session.testsfailed > failed and not page.is_closed():
                page.screenshot(path=ARTIFACTS / f"buttons-failed-{request.node.name[:40]}-{n}-{i}.png")
        context.close()
    OPEN.clear()
    if request.session.testsfailed > failed and (lab := request.node.funcargs.get("lab")):
        # in the failure's report ("Captured stdout teardown"): what the server said, where CI keeps no artifacts
        print("the server's log, last 80 lines:", *lab["log"].read_text().splitlines()[-80:], sep="\n")


class Person:
    """One participant's browser context: pages opened under their id, each watched."""

    def __init__(self, browser, lab, owner: str, width: int = 1440):
        self.context = browser.new_context(viewport={"width": width, "height": 2400}, accept_downloads=True)
        self.context.set_default_timeout(LONG_MS)
        self.context.set_default_navigation_timeout(LONG_MS)
        self.server, self.owner, self.watches = lab["url"], owner, []
        OPEN.append(self.context)

    def open(self, path: str, heading: str):
        page = self.context.new_page()
        self.watches.append(Watch(page, self.server))
        page.goto(f"{self.server}{path}{'&' if '?' in path else '?'}me={self.owner}")
        page.get_by_role("heading", name=heading).first.wait_for()
        return page

    def problems(self) -> list[str]:
        return [p for w in self.watches for p in w.problems()]



def no_exception(page) -> None:
    shown = page.locator('[data-testid="stException"]')
    assert shown.count() == 0, shown.first.inner_text()


def table_says(page, words: str) -> None:
    """Wait until the "Your runs" table (a canvas grid, read through its accessible copy) has a cell starting so."""
    page.locator('[data-testid="stDataFrame"] [role="gridcell"]').filter(has_text=re.compile("^" + re.escape(words))) \
        .first.wait_for(state="attached")  # the accessible copy is hidden behind the canvas


def pick_cpu_and(page, backend: str) -> None:
    from playwright.sync_api import expect

    page.locator('[data-testid="stRadio"]').filter(has_text="Device").get_by_text("cpu", exact=True).click()
    page.get_by_role("combobox", name=re.compile("^Backend")).click()
    page.get_by_role("option", name=backend, exact=True).click()
    expect(page.get_by_role("combobox", name=re.compile("^Backend"))).to_have_value(backend)


def short_stage(page) -> None:
    """Advanced: two timed steps, one round, one warm-up step."""
    from playwright.sync_api import expect

    page.get_by_text("Advanced: how long and how carefully to measure").click()
    radio = page.locator('[data-testid="stRadio"]').filter(has_text="Timed stage length")
    radio.get_by_text("steps", exact=True).click()
    for label, value in (("Timed steps per variant", "2"), ("Rounds", "1"), ("Warm-up steps", "1")):
        box = page.get_by_label(label, exact=True)
        box.fill(value)
        box.press("Enter")
        expect(box).to_have_value(value)
    expect(page.get_by_label("Timed steps per variant", exact=True)).to_be_enabled()


def delete_shown(page, run_id: str) -> None:
    """Delete the run the Compare page shows in detail; wait until the page shows another."""
    from playwright.sync_api import expect

    page.get_by_role("button", name="Delete this run").click()
    page.get_by_role("button", name="Delete", exact=True).click()
    expect(page.get_by_text(re.compile(rf"^Run {run_id} ·"))).to_have_count(0)
    no_exception(page)


def queue_row(page, whose: str, run_id: str | None = None):
    """The queue box's row of a run of `whose` ('yours', 'bob', ...), with its Cancel button; with `run_id`, that
    run's row only (a page redrawn every 2 s can still show a run that ended a moment ago)."""
    # the innermost block that says so (the page's own columns hold it too): last in document order
    row = page.locator('[data-testid="stHorizontalBlock"]').filter(has_text="in the queue").filter(has_text=whose)
    return (row.filter(has_text=f"run {run_id[-6:]}") if run_id else row).last


def queued_run_of(store, owner: str) -> str:
    """The id of `owner`'s run that waits in the queue."""
    (run_id,) = [r.id for r in store.list() if r.owner == owner and r.status == "queued"]
    return run_id


@pytest.fixture
def resumed_after(lab):
    """Whatever the test left, the next one finds the queue running (a paused queue would stall every later run)."""
    yield
    from tcore.lab.run import runs
    runs.pause(lab["store"], False)


# The cancel's toast: done within the click, or still under way (a loaded machine) and shown as cancelling
# (ui.panels.queue)
CANCEL_TAKEN = re.compile(r"^(Cancelled: a queued run never starts|Cancelling: it takes longer)")


def test_the_instructor_pauses_and_cancels_and_a_participant_cancels_their_own(browser, lab, resumed_after):
    teacher, bob = Person(browser, lab, TEACHER), Person(browser, lab, BOB)
    system = teacher.open("/system", "System")
    system.get_by_label("Instructor passcode", exact=True).fill(PASSCODE)
    system.get_by_role("button", name="Unlock").click()
    system.get_by_role("button", name="Pause the queue").click()
    system.get_by_role("button", name="Resume the queue").wait_for()
    system.get_by_text("The instructor paused the queue").first.wait_for()
    no_exception(system)

    run = bob.open("/", "Run an experiment")
    pick_cpu_and(run, "eager")
    run.get_by_role("button", name="Run", exact=True).click()  # waits: the queue is paused
    run.get_by_text("The instructor paused the queue").first.wait_for()
    queue_row(run, "yours").get_by_role("button", name="Cancel").click()
    run.get_by_text(CANCEL_TAKEN).first.wait_for()
    table_says(run, "cancelled by you")
    no_exception(run)

    run.get_by_role("button", name="Run", exact=True).click()
    queue_row(run, "yours").wait_for()
    # the instructor's, on someone else's run: this one, not the one Bob cancelled, whose row the System page may
    # still show until its next redraw (CI once cancelled that one, "had already ended", and waited for this one)
    second = queued_run_of(lab["store"], BOB)
    queue_row(system, "bob", second).get_by_role("button", name="Cancel").click()  # another person's: asked first
    system.get_by_text(re.compile(r"^Cancel bob.*'s run .*\? It leaves the queue and never starts")).wait_for()
    click_until_shown(system, system.get_by_role("button", name="Cancel their run"), CANCEL_TAKEN)
    table_says(run, "cancelled by the instructor")  # the owner is told who cancelled it
    run.get_by_text("cancelled by the instructor while waiting in the queue").wait_for()
    run.screenshot(path=ARTIFACTS / "buttons-cancelled-by-instructor.png")
    no_exception(run)

    system.get_by_role("button", name="Resume the queue").click()
    system.get_by_role("button", name="Pause the queue").wait_for()
    assert system.get_by_text("The instructor paused the queue").count() == 0
    system.get_by_role("button", name="Lock", exact=True).click()
    system.get_by_label("Instructor passcode", exact=True).wait_for()
    no_exception(system)
    assert not (problems := teacher.problems() + bob.problems()), problems


def test_run_then_queue_the_suggested_counterpart_and_see_the_two_side_by_side(browser, lab):
    """The issue's crash: "Queue it" under a result on the Run page, where the "Show below" selector is drawn."""
    from playwright.sync_api import expect

    ada = Person(browser, lab, ADA)
    page = ada.open("/", "Run an experiment")
    dynamic = page.locator('[data-testid="stRadio"]').filter(has_text="Dynamic shapes")
    expect(dynamic.locator("input:checked")).to_have_count(1)  # "auto" shows as chosen, not a blank radio
    dynamic.get_by_text("auto", exact=True).click()
    time.sleep(2)
    expect(dynamic.locator("input:checked")).to_have_count(1)  # and stays chosen when clicked
    pick_cpu_and(page, "aot_eager")
    page.get_by_text("Insert a graph break").click()
    short_stage(page)
    page.get_by_text(re.compile(r"Will run: .*graph break")).wait_for()
    page.get_by_role("button", name="Run", exact=True).click()
    page.get_by_text("Compiled output matches eager").wait_for(timeout=RUN_MS)
    no_exception(page)
    # on a real run: the breaks are counted as listed, the .item() guard explained
    page.get_by_text(re.compile(r"^2 graph breaks, counted by place in the code")).wait_for()
    page.get_by_text("Recompiled on a value nobody chose.").wait_for()

    suggestion = page.locator('[data-testid="stHorizontalBlock"]').filter(
        has_text="Try without the deliberate graph break").last
    # drawn above the button: the crash's cause
    expect(page.get_by_role("combobox", name="Show below")).to_have_count(1)
    suggestion.get_by_role("button", name="Queue it").click()
    page.get_by_text("Side by side with the run that suggested it").wait_for(timeout=RUN_MS)
    page.get_by_text("graph_break: True → False").wait_for()
    no_exception(page)
    page.screenshot(path=ARTIFACTS / "buttons-side-by-side.png")
    assert not (problems := ada.problems()), problems


def test_the_instructor_changes_the_limits_and_sets_them_back(browser, lab):
    from playwright.sync_api import expect

    from tcore.lab.policy.limits import INSTRUCTOR_LIMITS

    teacher = Person(browser, lab, TEACHER)
    system = teacher.open("/system", "System")
    system.get_by_label("Instructor passcode", exact=True).fill(PASSCODE)
    system.get_by_role("button", name="Unlock").click()
    largest = system.get_by_label("Largest batch (samples)", exact=True)
    largest.fill("8")
    largest.press("Enter")  # applied a half-typed 8 to the whole room at once; only the button applies
    largest.fill("16")
    system.get_by_role("button", name="Apply to everyone").click()
    applied = system.get_by_text(re.compile(r"^Applied to everyone at [\d:]+: Largest batch \d+ samples → 16 samples\. "
                                            r"They apply to the next run submitted\."))
    applied.wait_for()
    assert "8 samples →" not in applied.inner_text()  # the 8 was never applied
    no_exception(system)
    assert lab["store"].lab.lab_state(INSTRUCTOR_LIMITS)["max_batch_size"] == 16

    ada = Person(browser, lab, ADA)
    run = ada.open("/", "Run an experiment")
    batch = run.get_by_label("Batch size (samples per step)", exact=True)
    batch.fill("64")
    batch.press("Enter")
    # the page refuses it, says the instructor's 16 is why, and Run is off: nothing runs at another batch
    run.get_by_text("batch_size 64 is over this lab's limit").wait_for()
    expect(run.get_by_role("button", name="Run", exact=True)).to_be_disabled()

    system.get_by_role("button", name="Back to the file's limits").click()
    system.get_by_text(re.compile(r"^Back to the config file's and environment's limits at ")).wait_for()
    assert not lab["store"].lab.lab_state(INSTRUCTOR_LIMITS)
    no_exception(system)
    assert not (problems := teacher.problems() + ada.problems()), problems


def test_compare_exports_and_owners_and_the_instructor_delete(browser, lab, tmp_path):
    from playwright.sync_api import expect

    store, seeded = lab["store"], lab["seeded"]
    # Two runs of one label, profiled at 721 and 1,059 ms per step: the newest, so the page chooses them
    pair = [seeded_run(store, ADA, step_ms=ms) for ms in (721.0, 1059.0)]
    ada = Person(browser, lab, ADA)
    compare = ada.open("/compare", "Compare runs")
    compare.locator(".js-plotly-plot").first.wait_for()
    with compare.expect_download() as got:
        compare.get_by_role("button", name="Download this comparison (HTML)").click()
    saved = tmp_path / got.value.suggested_filename
    got.value.save_as(saved)
    exported = saved.read_text()
    assert "<h2>The runs</h2>" in exported and exported.count("class='chart'") >= 5
    assert "<th>Noisy</th>" in exported and "other processes kept 1.5 CPU cores busy" in exported  # noisy, flagged
    assert any("Compile time vs speedup" in chart and "Each point is a run" in chart  # the words under their chart
               for chart in exported.split("<div class='chart'>"))
    # Where the time goes: each run its own bars, named by its id (the two once drew as one bar of 1,780 ms)
    (exported_bars,) = [c for c in exported.split("<div class='chart'>") if "Where the time of a step goes" in c]
    assert all(run_id[-6:] in exported_bars for run_id in pair)
    compare.get_by_role("tab", name="Where the time goes").click()
    compare.wait_for_function(COMPARE_BARS)
    bars = compare.evaluate(COMPARE_BARS)
    for run_id, ms in zip(pair, (721.0, 1059.0)):
        mine = {name: total for name, total in bars.items() if f" · {run_id[-6:]} · " in name}
        assert {name.rsplit(" · ", 1)[1] for name in mine} == {"eager", "compiled"} and len(mine) == 2, bars
        assert all(abs(total - ms) < 0.01 for total in mine.values()), bars
    no_exception(compare)

    def show_in_detail(page, run_id):
        # Typed, not scrolled to: the list is virtualized, so with the module's other tests' runs in the store an
        # older run's option is not in the page until the search narrows the list to it.
        box = page.get_by_role("combobox", name="One run in detail")
        box.click()
        box.press_sequentially(run_id[-6:])
        page.get_by_role("option", name=re.compile(run_id[-6:])).click()
        page.get_by_text(re.compile(rf"^Run {run_id} ·")).wait_for()

    show_in_detail(compare, seeded["bob"])  # someone else's: Ada may not delete it
    expect(compare.get_by_role("button", name="Delete this run")).to_be_disabled()
    show_in_detail(compare, seeded["ada"])
    delete_shown(compare, seeded["ada"])
    assert seeded["ada"] not in {r.id for r in store.list()}

    teacher = Person(browser, lab, TEACHER)
    system = teacher.open("/system", "System")
    system.get_by_label("Instructor passcode", exact=True).fill(PASSCODE)
    system.get_by_role("button", name="Unlock").click()
    # Compare at once, as a person might: the unlock holds whichever page the server draws next. (A wait for the
    # button "Lock" here was met by "Unlock", its name a substring, so the click always came this early.)
    theirs = system.locator('[data-testid="stSidebarNav"]').get_by_role("link", name=re.compile("Compare"))
    theirs.click()
    system.get_by_role("heading", name="Compare runs").wait_for()
    system.locator('[data-testid="stSidebar"]').get_by_text("instructor", exact=True).wait_for()
    show_in_detail(system, seeded["bob"])
    delete_shown(system, seeded["bob"])
    assert seeded["bob"] not in {r.id for r in store.list()}
    # a new tab of the same browser is unlocked too (the unlock's cookie), and Lock there locks the first tab's
    # session as well, which is still open: it learns at its next page
    other = teacher.open("/system", "System")
    other.get_by_role("button", name="Lock", exact=True).click()
    other.get_by_label("Instructor passcode", exact=True).wait_for()
    system.locator('[data-testid="stSidebarNav"]').get_by_role("link", name=re.compile("System")).click()
    system.get_by_label("Instructor passcode", exact=True).wait_for()
    expect(system.locator('[data-testid="stSidebar"]').get_by_text(re.compile(r"^You: "))).to_have_text("You: teacher")
    assert not (problems := ada.problems() + teacher.problems()), problems


def test_start_a_sweep_see_it_finish_and_cancel_another(browser, lab):
    bob = Person(browser, lab, BOB)
    page = bob.open("/sweep", "Sweep compile settings")
    pick_cpu_and(page, "eager")
    page.get_by_role("button", name="Remove regional").click()
    short_stage(page)
    page.get_by_text(re.compile(r"^1 run to do")).wait_for()
    page.get_by_role("button", name="Start sweep").click()
    page.get_by_text(re.compile(r"Sweep (running|finished)")).first.wait_for()
    page.get_by_text("Sweep finished: 1 of 1 runs finished").wait_for(timeout=RUN_MS)
    no_exception(page)

    page.get_by_role("combobox", name="Compile scope").click()
    page.get_by_role("option", name="regional", exact=True).click()
    page.keyboard.press("Escape")
    page.get_by_text(re.compile(r"^2 runs to do")).wait_for()
    page.get_by_role("button", name="Start sweep").click()
    page.get_by_role("button", name="Cancel the sweep").click()
    page.get_by_text(re.compile(r"^Sweep cancelled")).wait_for(timeout=RUN_MS)
    no_exception(page)
    page.screenshot(path=ARTIFACTS / "buttons-sweep-cancelled.png")
    assert not (problems := bob.problems()), problems
