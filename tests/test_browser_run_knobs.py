"""The Run page's knobs and the Diagnose page's start-up tab as a person meets them, in Chromium: a batch kept across a
visit to another page while a run is followed live, a batch the box refuses turning Run off, a search followed as it
is typed, the timeline's subtitle read with its spaces, the CPU's solid-figure button, and on Diagnose the stance
probes and the ladder started, followed, read, and stopped. (tests/test_app_run_knobs.py and
tests/test_diagnose_startup.py check the page's side headless.)"""
import re
import time

import pytest

from tcore.lab import ladder
from tests.browser_harness import (  # noqa: F401 (the fixture)
    ARTIFACTS,
    WAIT_MS,
    click_until_shown,
    open_run_page,
    server,
    settle_charts,
)

pytestmark = pytest.mark.browser


def batch_box(page):
    return page.get_by_role("spinbutton", name="Batch size (samples per step)")


def will_run(page) -> list[str]:
    return [t for t in page.locator('[data-testid="stCaptionContainer"]').all_inner_texts() if t.startswith("Will run")]


def go(page, name: str) -> None:
    page.get_by_test_id("stSidebarNavItems").get_by_role("link", name=name, exact=True).click()


def test_the_batch_survives_a_visit_to_another_page_while_a_run_is_followed(server):
    """With the Run page following a run live, a visit to Compare brought the batch box back at 1 and the backend at
    its default: the widgets' values were dropped after the live panel's redraws."""
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser, page, watch = open_run_page(p, server)
        page.get_by_role("combobox", name="Backend").click()
        page.get_by_role("option", name="aot_eager", exact=True).click()
        batch_box(page).fill("5")
        batch_box(page).press("Enter")
        page.get_by_text("Will run: captioner/tiny bs5 fp32 inference, whole aot_eager").wait_for()
        page.get_by_role("button", name="Run", exact=True).click()
        page.get_by_text("Running: captioner/tiny bs5").wait_for(timeout=WAIT_MS)
        for _ in range(3):  # the run is followed, then ends, then is drawn: each time the batch comes back as it was
            go(page, "Compare")
            page.get_by_role("heading", name=re.compile("Compare")).first.wait_for(timeout=WAIT_MS)
            time.sleep(3)  # the live panel's redraws, as a person reading the other page lets them happen
            go(page, "Run")
            page.get_by_text("Run an experiment").wait_for(timeout=WAIT_MS)
            page.get_by_text("Will run: captioner/tiny bs5 fp32 inference, whole aot_eager").wait_for(timeout=WAIT_MS)
            assert batch_box(page).input_value() == "5"

        # The finished run's timeline: its subtitle's lines read with a space between them, as the words are
        page.get_by_text("Compiled output matches eager").wait_for(timeout=WAIT_MS)
        bar = page.locator(".js-plotly-plot").filter(has_text="The run's timeline")
        bar.wait_for(timeout=WAIT_MS)
        settle_charts(page)
        text = bar.evaluate("e => e.textContent")
        assert "compile red-orange, measurement blue, waiting purple, the lab grey" in text, text
        assert page.locator('[data-testid="stException"]').count() == 0
        assert watch.problems() == []
        browser.close()


def test_a_generations_cpu_lengths_survive_a_visit_to_another_page(server):
    """Task generate, then the transformers source: 32+32 tokens on the CPU. A walk saw a visit to Compare bring the
    Run page back at 128+256 (both boxes at "0: default"), a generation that ran minutes on the CPU."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser, page, watch = open_run_page(p, server)
        page.get_by_text("generate", exact=True).click()
        page.get_by_text(re.compile(r"Will run: captioner/tiny bs1 fp32 generate, .*4\+12 tokens")).wait_for()
        page.get_by_text("transformers (hf:)", exact=True).click()
        cpu = re.compile(r"Will run: hf:gpt2/tiny bs1 fp32 generate, .*32\+32 tokens")
        page.get_by_text(cpu).wait_for()
        for other in ("Compare", "System"):
            go(page, other)
            page.get_by_role("heading", name=re.compile(other)).first.wait_for(timeout=WAIT_MS)
            go(page, "Run")
            page.get_by_text(cpu).wait_for(timeout=WAIT_MS)
            for box in ("Prompt tokens (0: default)", "New tokens (0: default)"):
                assert page.get_by_role("spinbutton", name=box).input_value() == "32"
        assert watch.problems() == []
        browser.close()


def test_a_batch_the_box_refuses_turns_run_off_and_says_why(server):
    """The box refused 1,000,000 (past its maximum) without telling the page: Run stayed on and would run batch 8."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser, page, watch = open_run_page(p, server)
        batch_box(page).fill("1000000")
        batch_box(page).press("Enter")
        page.get_by_text("batch_size 1,000,000 is over this lab's limit").wait_for(timeout=WAIT_MS)
        assert page.get_by_role("button", name="Run", exact=True).is_disabled()
        assert will_run(page) == []
        batch_box(page).fill("16")
        batch_box(page).press("Enter")
        page.get_by_text("Will run: captioner/tiny bs16").wait_for(timeout=WAIT_MS)
        assert not page.get_by_role("button", name="Run", exact=True).is_disabled()

        # A batch far past the practical one is warned about before it runs: its memory and its time
        page.locator('[data-testid="stRadio"]').filter(has_text="Task").get_by_text("training", exact=True).click()
        batch_box(page).fill("1024")
        batch_box(page).press("Enter")
        page.get_by_text(re.compile(r"Batch 1,024 is 128× this model's practical batch on the CPU")).wait_for(
            timeout=WAIT_MS)
        assert page.get_by_text(re.compile(r"It needs an estimated [\d.]+ GiB")).count() == 1
        assert watch.problems() == []
        browser.close()


def test_will_run_follows_a_search_as_it_is_typed(server):
    """Until Enter was pressed in the search box, "Will run" named the model picked before the search."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser, page, watch = open_run_page(p, server)
        source = page.locator('[data-testid="stRadio"]').filter(has_text="Source")
        source = source.get_by_text("torchvision", exact=True)
        click_until_shown(page, source, "Will run: torchvision:resnet18/")
        page.get_by_label("Search names").press_sequentially("vgg", delay=50)  # typed, no Enter, focus kept
        page.get_by_text("none is picked yet").wait_for(timeout=WAIT_MS)
        assert will_run(page) == []
        assert page.get_by_role("button", name="Run", exact=True).is_disabled()
        assert page.get_by_label("Search names").evaluate("e => e === document.activeElement")  # still typing there
        assert watch.problems() == []
        browser.close()


def test_the_stances_run_from_the_diagnose_page_and_say_what_happened(server):
    """The ladder and the stances lived on the command line alone: here a person opens the tab, starts the stance
    probes, sees them run, and reads each stance's calls and what they mean."""
    from playwright.sync_api import expect, sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser, page, watch = open_run_page(p, server)
        go(page, "Diagnose")
        page.get_by_role("tab", name="Start-up and stances").click()
        page.get_by_text("The start-up ladder", exact=True).wait_for(timeout=WAIT_MS)
        page.get_by_role("button", name="Probe the stances").click()
        page.get_by_text(re.compile(r"Running stances: captioner/tiny")).wait_for(timeout=WAIT_MS)
        page.get_by_text("torch applies this stance per function").wait_for(timeout=WAIT_MS)
        page.get_by_text("A new size raised instead of recompiling").wait_for(timeout=WAIT_MS)
        page.get_by_text(re.compile(r"ran eagerly on call 1 and compiled on call 2")).wait_for(timeout=WAIT_MS)
        page.get_by_text(re.compile(r"Yet call 1 was not all eager")).wait_for(timeout=WAIT_MS)
        expect(page.locator('[data-testid="stDataFrame"]')).to_have_count(3, timeout=WAIT_MS)  # each stance's calls
        page.screenshot(path=ARTIFACTS / "diagnose-stances.png")
        assert page.locator('[data-testid="stException"]').count() == 0
        assert watch.problems() == []
        browser.close()


def climb(page, keep: list[str]) -> None:
    """On Diagnose's start-up tab, the rungs not in `keep` taken out of the picker, then Climb the ladder."""
    go(page, "Diagnose")
    page.get_by_role("tab", name="Start-up and stances").click()
    rungs = page.locator('[data-testid="stMultiSelect"]').filter(has_text="Rungs")
    rungs.wait_for(timeout=WAIT_MS)
    for rung in ladder.RUNGS:
        if rung not in keep:
            rungs.get_by_label(f"Remove {rung}").first.click()
            rungs.get_by_label(f"Remove {rung}").first.wait_for(state="detached", timeout=WAIT_MS)
    page.get_by_role("button", name="Climb the ladder").click()


def test_the_ladder_climbs_from_the_diagnose_page_and_shows_its_table(server):
    """The eager rung alone (a fresh process, seconds): started, followed step by step, then its row in the table."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser, page, watch = open_run_page(p, server)
        climb(page, keep=["eager"])
        page.get_by_text(re.compile(r"Running ladder: captioner/tiny .*: eager")).wait_for(timeout=WAIT_MS)
        page.get_by_text("As the command line prints it").wait_for(timeout=WAIT_MS)
        # the table's cells, from the grid's accessible copy of its canvas
        cells = """document.querySelectorAll('[data-testid="stDataFrame"] [role="gridcell"]')"""
        page.wait_for_function(f"() => Array.from({cells}).some(c => c.innerText.trim() === 'eager first call')",
                               timeout=WAIT_MS)
        assert page.locator('[data-testid="stException"]').count() == 0
        assert watch.problems() == []
        browser.close()


def test_a_ladder_climb_can_be_stopped_from_the_page_and_keeps_what_finished(server):
    """A climb on a CPU takes minutes once a compile rung runs: the person who started it stops it from the page, the
    rung under way ends at once, and the page says it was stopped with the steps that finished."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser, page, watch = open_run_page(p, server)
        climb(page, keep=["eager", "cold"])
        page.get_by_text(re.compile(r"^eager: [\d.]+ s\b")).wait_for(timeout=WAIT_MS)  # the cold rung is compiling now
        page.get_by_role("button", name="Stop", exact=True).click()
        page.get_by_text(re.compile(r"was stopped by the person who started it")).wait_for(timeout=WAIT_MS)
        assert page.get_by_text("As the command line prints it").count() == 0  # no table of a climb cut short
        assert page.locator('[data-testid="stException"]').count() == 0
        assert watch.problems() == []
        browser.close()


def test_the_solid_figure_button_sets_the_cpu_measurement_in_a_live_session(server):
    """The button sets the measurement boxes from its callback: a live session (not AppTest) is where Streamlit would
    refuse a widget's value set after the widget is drawn."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser, page, watch = open_run_page(p, server)
        page.get_by_role("button", name="Measure for a solid figure").click()
        page.get_by_text(re.compile(r"a measurement long enough \(10 s a variant, all of it: set\)")).wait_for(
            timeout=WAIT_MS)
        assert page.get_by_role("button", name="Measure for a solid figure").is_disabled()
        page.get_by_text("Advanced: how long and how carefully to measure").click()
        box = page.get_by_label("Timed seconds per variant, at most (s)")
        box.wait_for(timeout=WAIT_MS)
        assert box.input_value() == "10.00"
        assert page.locator('[data-testid="stException"]').count() == 0
        assert watch.problems() == []
        browser.close()
