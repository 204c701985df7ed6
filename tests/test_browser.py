"""The app as a person sees it: `streamlit run app.py`, driven in headless Chromium by Playwright.

Runs the tiny captioner on the CPU with backend=aot_eager (seconds), waits for the result charts,
opens the Diagnose page over hand-made stored runs, lays out stored runs at laptop widths, and saves
screenshots to artifacts/ (git-ignored) for a person to look at. Every page a test opens is watched: an
error or warning in the console, a request that fails or is refused, or one to another host fails the
test, save the exceptions Watch names with their reasons.
"""
import re
import time
from pathlib import Path

import pytest

from tests.browser_harness import (  # noqa: F401 (the server fixture)
    ARTIFACTS,
    CHART_LAYOUT,
    CHROMIUM,
    CHROMIUM_ARGS,
    ROOT,
    WAIT_MS,
    Watch,
    click_until_shown,
    open_run_page,
    server,
    settle_charts,
)

pytestmark = pytest.mark.browser


def test_tiny_cpu_run_in_a_real_browser(server):
    from playwright.sync_api import expect, sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser, page, watch = open_run_page(p, server)

        device = page.locator('[data-testid="stRadio"]').filter(has_text="Device")
        device.get_by_text("cpu", exact=True).click()
        page.get_by_role("combobox", name="Backend").click()
        page.get_by_role("option", name="aot_eager", exact=True).click()
        page.get_by_text("captioner/tiny bs8 fp32 inference, whole aot_eager").wait_for()
        assert page.locator('[data-testid="stAlertContentError"]').count() == 0

        page.evaluate(RECORD_STATES)
        page.get_by_role("button", name="Run", exact=True).click()
        page.get_by_text("Running: captioner/tiny").wait_for(timeout=WAIT_MS)
        # Screenshot while timing, so the phase steps show progress.
        progress = page.locator('[data-testid="stProgress"]')
        progress.filter(has_text=re.compile(r"Measuring eager vs compiled.*in this phase")).wait_for(timeout=WAIT_MS)
        assert page.get_by_text("Eager step (warm-up)").count() == 1  # the first figure, drawn before the compile's
        page.screenshot(path=ARTIFACTS / "run-page-running.png")

        page.get_by_text("Compiled output matches eager").wait_for(timeout=WAIT_MS)
        page.locator(".js-plotly-plot").nth(3).wait_for(timeout=WAIT_MS)
        settle_charts(page)
        page.screenshot(path=ARTIFACTS / "run-page.png")

        # The run's timeline, Where the time goes, then the Speed tab: throughput and latency; the other tabs draw
        # when clicked.
        # the charts above the tabs and the Speed tab's, not the kernels' classes one (drawn where compiled is slower)
        charts = page.locator(".js-plotly-plot").filter(has_not_text="Each class, eager vs compiled")
        expect(charts).to_have_count(4, timeout=WAIT_MS)
        bar = page.locator(".js-plotly-plot").filter(has_text="The run's timeline")
        expect(bar).to_have_count(1, timeout=WAIT_MS)
        bar.locator("g.trace.bars").nth(7).wait_for(timeout=WAIT_MS)  # at least 8: queue, build, ..., compile, saving
        page.get_by_text(re.compile(r"s from submit to saved: .* the compile")).wait_for(timeout=WAIT_MS)
        assert page.locator('[data-testid="stException"]').count() == 0
        expect(page.get_by_text("Speedup", exact=True)).to_have_count(1, timeout=WAIT_MS)
        for title in ("Throughput (samples/s)", "Step latency (ms)"):
            expect(page.locator(".js-plotly-plot").filter(has_text=title)).to_have_count(1, timeout=WAIT_MS)
        for tab, titles in (("Memory and energy", ("Peak memory (GiB)", "Power and energy per step")),
                            ("Compile phases", ("Compile time by phase",))):
            page.get_by_role("tab", name=tab).click()
            for title in titles:
                page.locator(".js-plotly-plot").filter(has_text=title).wait_for(timeout=WAIT_MS)
            expect(charts).to_have_count(2 + len(titles), timeout=WAIT_MS)
        settle_charts(page)
        page.screenshot(path=ARTIFACTS / "run-page-compile-phases-tab.png")
        assert page.locator('[data-testid="stException"]').count() == 0
        # The live panel, the queue and the runs table never disagree about whether the run is over (item 10).
        states = page.evaluate("() => window.__states")
        assert any(s["running"] for s in states) and states[-1]["result"] and states[-1]["nothing"]
        assert [s for s in states if s["running"] and (s["nothing"] or s["finished"])] == []
        assert watch.problems() == []
        browser.close()


def test_a_search_runs_nothing_until_a_match_is_picked_in_a_real_browser(server):
    """Search a library's names, then press Run before picking: the page says to pick a model and Run is off,
    instead of running the model picked before the search; picking a match turns Run back on."""
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser, page, watch = open_run_page(p, server)
        source = page.locator('[data-testid="stRadio"]').filter(has_text="Source")
        click_until_shown(page, source.get_by_text("torchvision", exact=True), "Will run: torchvision:resnet18/")
        search = page.get_by_label("Search names")
        search.fill("vgg")
        search.press("Enter")
        page.get_by_text("none is picked yet").wait_for(timeout=WAIT_MS)
        box = page.locator('[data-testid="stSelectbox"]').filter(has_text="Model").first
        assert re.search(r"\d+ matches: pick one", box.inner_html()), box.inner_html()
        run = page.get_by_role("button", name="Run", exact=True)
        assert run.is_disabled()
        run.click(force=True)  # what a person's click on it does: nothing
        time.sleep(1)
        assert page.get_by_text("Will run:").count() == 0
        assert page.get_by_text("Running:").count() == 0 and page.get_by_text("Queued").count() == 0
        page.screenshot(path=ARTIFACTS / "run-page-search-unpicked.png")
        page.get_by_role("combobox", name="Model").click()
        page.get_by_role("option", name="torchvision:vgg11", exact=True).click()
        page.get_by_text("Will run: torchvision:vgg11/").wait_for(timeout=WAIT_MS)
        assert page.get_by_text("none is picked yet").count() == 0
        assert not run.is_disabled()
        assert watch.problems() == []
        browser.close()


# Kept by the page on every change: whether the Run page's live panel says "Running", the queue says nothing
# is running, the runs table says a run finished, and the result is drawn (the table's cells are read from the
# grid's accessible copy of its canvas).
RECORD_STATES = """() => {
  window.__states = [];
  const texts = selector => Array.from(document.querySelectorAll(selector)).map(e => e.innerText.trim());
  const record = () => {
    const state = {running: texts('[data-testid="stHeading"]').some(t => t.startsWith('Running:')),
                   nothing: texts('[data-testid="stCaptionContainer"]').some(t => t.startsWith('Nothing is running')),
                   finished: texts('[data-testid="stDataFrame"] [role="gridcell"]').some(t => t.startsWith('finished')),
                   result: document.body.innerText.includes('Compiled output matches')};
    const last = window.__states[window.__states.length - 1];
    if (!last || JSON.stringify(last) !== JSON.stringify(state)) window.__states.push(state);
  };
  new MutationObserver(record).observe(document.body, {subtree: true, childList: true, characterData: true});
  record();
}"""


def test_a_participant_keeps_their_name_in_a_second_tab(server):
    """Named in one tab, the same person in a new tab of the same browser opened at the bare address."""
    from playwright.sync_api import sync_playwright

    from tests.helpers import wait_until
    from ui.panels.people import COOKIE

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        first = context.new_page()
        watches = [Watch(first, server)]
        first.goto(server)
        first.get_by_text("Run an experiment").wait_for(timeout=WAIT_MS)
        first.get_by_placeholder("e.g. Ada").fill("Ada")
        first.get_by_placeholder("e.g. Ada").press("Enter")
        first.wait_for_url(re.compile(r"me=ada~[0-9a-f]{4}\.[0-9a-f]{16}"), timeout=WAIT_MS)
        me = re.search(r"me=(ada~[0-9a-f]{4}\.[0-9a-f]{16})", first.url).group(1)
        wait_until(lambda: any(c["name"] == COOKIE and c["value"] == me for c in context.cookies()),
                   what="the cookie the page's script sets")

        second = context.new_page()
        watches.append(Watch(second, server))
        second.goto(server)
        second.get_by_text("Run an experiment").wait_for(timeout=WAIT_MS)
        second.wait_for_url(re.compile(f"me={me}"), timeout=WAIT_MS)
        second.locator('[data-testid="stSidebar"]').get_by_text("You: ada").wait_for(timeout=WAIT_MS)
        assert second.locator('[data-testid="stException"]').count() == 0
        assert [w.problems() for w in watches] == [[], []]
        browser.close()


def test_a_deep_link_on_a_fresh_server_opens_with_the_router(server):
    """The first session of a fresh server, landing on /system, still gets app.py's navigation and layout."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        watch = Watch(page, server)
        page.goto(f"{server}/system")
        page.get_by_role("heading", name="System").wait_for(timeout=WAIT_MS)
        nav = page.locator('[data-testid="stSidebarNav"]')
        names = [t.split()[-1] for t in nav.get_by_role("link").all_inner_texts()]  # "play_arrow\n\nRun": icon, title
        assert names == ["Run", "Diagnose", "Compare", "Sweep", "System"]
        assert page.locator('[data-testid="stException"]').count() == 0
        assert watch.problems() == []  # the page-path probes of a deep link are the exception Watch explains
        assert ({url[len(server):] for _, url in watch.refused}
                == {"/system/_stcore/health", "/system/_stcore/host-config"})
        browser.close()


def test_a_page_with_no_chart_loads_the_chart_component_once_idle(server):
    """Streamlit loads its 4.7 MB Plotly component when a page's first chart arrives, about 0.7 s of the browser here;
    the app has the browser load it while idle (ui.panels.exports.warm_charts), so the next page's charts skip that."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        watch = Watch(page, server)
        page.goto(f"{server}/system?me=ada~0001.00000000c0ffee00")
        page.get_by_role("heading", name="System").wait_for(timeout=WAIT_MS)
        page.wait_for_function("() => performance.getEntriesByType('resource')"
                               ".some(e => /static\\/js\\/PlotlyChart\\.[^/]+\\.js$/.test(e.name))", timeout=WAIT_MS)
        assert page.locator('[data-testid="stPlotlyChart"]').count() == 0  # loaded ahead: no chart asked for it
        assert watch.problems() == []
        browser.close()


def store_schedule_run(db_path: Path) -> str:
    """A finished dynamic=False run over 6 sizes that hit a recompile limit of 4, as the worker records it."""
    from tcore.experiment.spec import Experiment
    from tcore.store import RunStore
    from tests.helpers import insert_run

    sizes = [3, 5, 8, 11, 13, 16]
    events = [{"compile_id": f"0/{i}", "frame": "forward", "kind": "recompile" if i else "compile", "t_s": 0.5 * i,
               "duration_s": 0.4, "graph_ops": 115, "reason": f"0/{i - 1}: tensor 'tokens' size mismatch at index 1. "
               f"expected {sizes[i - 1]}, actual {sizes[i]}" if i else ""} for i in range(4)]
    events.append({"compile_id": "0/4", "frame": None, "kind": "limit", "t_s": 2.0, "duration_s": 0.0,
                   "reason": "0/3: tensor 'tokens' size mismatch at index 1. expected 11, actual 13"})
    result = {"device": "cpu", "variants": ["eager", "compiled"], "compile_s": 0.5, "speedup": 0.9,
              "eager_samples_per_s": 1800.0, "compiled_samples_per_s": 1600.0, "eager_steps_per_s": 900.0,
              "compiled_steps_per_s": 800.0, "graph_count": 4, "graph_break_count": 0, "graph_breaks": [],
              "recompile_count": 4, "recompiles": [], "recompile_limit_hit": True, "compile_events": events,
              "graphs": [{"compile_id": e["compile_id"], "frame": "forward", "ops": 115, "compile_s": 0.4}
                         for e in events[:4]],
              "eager_kernels_per_step": 51, "compiled_kernels_per_step": 51, "schedule_sizes": sizes,
              "schedule_dim": "caption length (tokens)", "schedule_buckets": [],
              "schedule": [{"step": i, "size": n, "padded_to": n, "eager_ms": 1.2,
                            "compiled_ms": 400.0 if 1 <= i <= 3 else 1.0,
                            "compiles": [f"0/{i}"] if 1 <= i <= 3 else [], "hit_limit": i == 4}
                           for i, n in enumerate(sizes)], "notes": [], "unavailable": {}}
    store = RunStore(db_path)
    exp = Experiment(model="captioner", device="cpu", backend="eager", dynamic=False, shape_count=6, recompile_limit=4)
    run_id = insert_run(store, exp)
    store.finish(run_id, result=result, env={"device": "cpu"})
    return run_id


def test_the_diagnose_page_in_a_real_browser(server, tmp_path):
    """Hand-made stored runs (no compiling): the recompilation timeline draws, and a deep link opens one run."""
    from playwright.sync_api import sync_playwright

    run_id = store_schedule_run(tmp_path / "runs.sqlite")  # the store the server fixture opened
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1600, "height": 2400})
        watch = Watch(page, server)
        page.goto(f"{server}/diagnose")
        page.get_by_role("heading", name="Why is it slow?").wait_for(timeout=WAIT_MS)
        page.get_by_role("tab", name="Recompilations").click()
        plots = page.locator(".js-plotly-plot")
        plots.filter(has_text="Every compilation, over the run").first.wait_for(timeout=WAIT_MS)
        plots.filter(has_text="Recompile limit hit: eager from here").first.wait_for(timeout=WAIT_MS)  # the legend
        plots.filter(has_text="Step time over the shape schedule").first.wait_for(timeout=WAIT_MS)
        settle_charts(page)
        page.screenshot(path=ARTIFACTS / "diagnose-recompilations-handmade.png")

        page.goto(f"{server}/diagnose?run={run_id}")  # as the Compare page links to it
        page.get_by_role("tab", name="One run: graphs and generated code", selected=True).wait_for(timeout=WAIT_MS)
        plots.filter(has_text="Operations per compilation").first.wait_for(timeout=WAIT_MS)
        page.get_by_text("None stored: only Inductor generates code").wait_for()
        assert page.locator('[data-testid="stException"]').count() == 0
        assert watch.problems() == []
        browser.close()


# Text cut short: a metric's label, value or delta wider than its box (Streamlit ends it with an ellipsis).
CLIPPED_METRICS = ("""() => Array.from(document.querySelectorAll(
    '[data-testid=stMetricLabel] *, [data-testid=stMetricValue], """
                   """[data-testid=stMetricValue] *, [data-testid=stMetricDelta] *'))
  .filter(e => e.innerText && e.scrollWidth > e.clientWidth + 1)
  .map(e => `${e.closest('[data-testid^=stMetric]').dataset.testid}: '${e.innerText}' """
                   """needs ${e.scrollWidth} px, has ${e.clientWidth}`)""")

# In each chart: titles, subtitles, legends, axis titles and annotations inside the figure and clear of each
# other, and no bar's label over another's.
CHART_TEXT = ("""() => {
  const found = [];
  const overlap = (a, b) => a.left < b.right - 1 && b.left < a.right - 1 && """
              """a.top < b.bottom - 1 && b.top < a.bottom - 1;
  document.querySelectorAll('.js-plotly-plot').forEach((plot, i) => {
    const svg = plot.querySelector('.main-svg');
    if (!svg) return;
    const box = svg.getBoundingClientRect();
    const name = (plot.querySelector('.gtitle') || {}).textContent || `chart ${i}`;
    const parts = [];
    for (const [selector, kind] of [['.gtitle', 'title'], ['.gtitle-subtitle', 'subtitle'], ['.legend', 'legend'],
                                    ['.g-xtitle', 'x title'], ['.g-ytitle', 'y title'], ['.annotation', 'annotation'],
                                    ['.bartext', 'bar label']])
      plot.querySelectorAll(selector).forEach(e => {
        const r = e.getBoundingClientRect();
        if (r.width > 0 && r.height > 0) parts.push({kind, text: e.textContent.slice(0, 40), r});
      });
    for (const p of parts)
      if (p.r.left < box.left - 1 || p.r.right > box.right + 1 || p.r.top < box.top - 1 || p.r.bottom > box.bottom + 1)
        found.push(`${name}: ${p.kind} '${p.text}' runs out of the chart`);
    for (let a = 0; a < parts.length; a++)
      for (let b = a + 1; b < parts.length; b++)
        if ((parts[a].kind === 'bar label') === (parts[b].kind === 'bar label') && overlap(parts[a].r, parts[b].r))
          found.push(`${name}: ${parts[a].kind} '${parts[a].text}' overlaps ${parts[b].kind} '${parts[b].text}'`);
  });
  return found;
}""")


def test_stored_runs_fit_a_laptop_screen(server, tmp_path):
    """A browser walk through the pages: at 1280 and 1440 px wide, nothing on the Run, Compare and Diagnose pages is cut
    short or printed over something else, with Flux (~200 samples/s) beside the captioner (~4,700) and a
    break-even of thousands of steps."""
    from playwright.sync_api import sync_playwright

    from tcore.store import RunStore
    from tests.helpers import store_a_labs_runs, wait_until

    owner = "ada~1a2b.00000000c0ffee00"
    made = store_a_labs_runs(RunStore(tmp_path / "runs.sqlite"), owner)
    store_schedule_run(tmp_path / "runs.sqlite")
    ARTIFACTS.mkdir(exist_ok=True)
    views = [  # address, tab to click, a chart title to wait for, screenshot name; every lazy tab's charts
        (f"/?me={owner}", None, "Step latency (ms)", "run-page"),
        (f"/?me={owner}", "Memory and energy", "Power and energy per step", "run-page-memory-energy"),
        (f"/?me={owner}", "Compile phases", "Compile time by phase", "run-page-compile-phases"),
        (f"/?me={owner}", "Power over the run", "Power over the run, by phase", "run-page-power"),
        (f"/compare?me={owner}", None, "Throughput (samples/s)", "compare-page"),
        (f"/compare?me={owner}", "Energy and trade-off", "Compile time vs speedup", "compare-page-trade-off"),
        (f"/compare?me={owner}", "Where the time goes", "eager and compiled of", "compare-page-breakdown"),
        (f"/compare?me={owner}", "Cold vs warm start", "Compile time: cold vs warm", "compare-page-cold-warm"),
        (f"/diagnose?me={owner}&run={made['flux-gpu']}", None, "Operations per compilation", "diagnose-one-run"),
        (f"/diagnose?me={owner}", "Graph breaks", "What the break costs", "diagnose-breaks"),
        (f"/diagnose?me={owner}", "Recompilations", "Step time over the shape schedule", "diagnose-recompilations"),
    ]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        # A laptop's width; tall, so one screenshot holds the page (Streamlit scrolls inside it). Each address opens
        # once: its tabs are clicked in turn, and each view is checked at both widths by resizing the window.
        page = browser.new_page(viewport={"width": 1280, "height": 4200})
        watch = Watch(page, server)
        opened = None
        for address, tab, chart, name in views:
            if address != opened:
                page.set_viewport_size({"width": 1280, "height": 4200})
                page.goto(server + address)
                opened = address
            if tab:
                page.get_by_role("tab", name=tab, exact=True).wait_for(timeout=WAIT_MS)
                page.get_by_role("tab", name=tab, exact=True).click()
            page.locator(".js-plotly-plot").filter(has_text=chart).first.wait_for(timeout=WAIT_MS)
            for width in (1280, 1440):
                if page.viewport_size["width"] != width:  # the wide layout's charts follow the window's width
                    before = page.evaluate(CHART_LAYOUT)
                    page.set_viewport_size({"width": width, "height": 4200})
                    wait_until(lambda: page.evaluate(CHART_LAYOUT) != before, WAIT_MS / 1000,
                               what=f"the charts redrawn {width} px wide")
                settle_charts(page)
                page.screenshot(path=ARTIFACTS / f"{name}-{width}.png")
                assert page.locator('[data-testid="stException"]').count() == 0, name
                assert page.evaluate(CLIPPED_METRICS) == [], (name, width)
                assert page.evaluate(CHART_TEXT) == [], (name, width)
                if name == "run-page":  # Flux's result: its five tiles, checked above
                    assert page.locator('[data-testid="stMetricValue"]').count() == 5
        assert watch.problems() == []
        browser.close()
