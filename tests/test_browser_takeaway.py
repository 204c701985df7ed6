"""A run taken out of the app, in a real browser: its settings as code, its tlparse report opened in a
new tab from the app's own server, and the Compare page's HTML export opened offline as a file."""
import re

import pytest

from tests.browser_harness import (
    ARTIFACTS,
    CHROMIUM,
    CHROMIUM_ARGS,
    VIEWPORT,
    WAIT_MS,
    Watch,
    server,  # noqa: F401 (fixture)
    settle_charts,
)

pytestmark = pytest.mark.browser


def test_a_run_as_code_its_tlparse_report_and_the_html_export(server, tmp_path):  # noqa: F811
    from playwright.sync_api import sync_playwright

    from tcore.experiment.spec import Experiment
    from tcore.lab.outputs import tlparse
    from tcore.lab.run import runs
    from tcore.store import RunStore

    store = RunStore(tmp_path / "runs.sqlite")  # the store the server fixture opened
    exp = Experiment(model="captioner", preset="tiny", batch_size=2, device="cpu", backend="aot_eager",
                     graph_break=True, warmup_steps=1, timed_steps=2, rounds=1)
    record = runs.execute(exp, store)
    assert record.status == "finished", record.error
    ARTIFACTS.mkdir(exist_ok=True)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            context = browser.new_context(viewport=VIEWPORT, accept_downloads=True)
            page = context.new_page()
            app_page = Watch(page, server)
            page.goto(f"{server}/compare")
            page.get_by_text("One run in detail").wait_for(timeout=WAIT_MS)

            page.get_by_text("Copy as code: this run's settings in your program").click()
            code = page.locator('[data-testid="stCode"]').filter(has_text="# Compile Lab run")
            code.wait_for(timeout=WAIT_MS)
            assert "graph_break=True" in code.inner_text()
            assert "torch.compile(model, backend='aot_eager')" in code.inner_text()
            page.screenshot(path=ARTIFACTS / "take-away.png")

            with context.expect_page() as opened:
                page.get_by_role("link", name="Open the tlparse report").click()
            report = opened.value
            in_report = Watch(report, server)
            report.wait_for_load_state()
            # on the store's own shelf (reports live beside the store, not in the app's folder),
            # with a query so tlparse's script logs no ReferenceError
            assert re.search(rf"/app/static/tlparse/\w+/{record.id}/index\.html\?run={record.id}$",
                             report.url), report.url
            report.get_by_text("Stack trie").first.wait_for(timeout=WAIT_MS)  # tlparse's index: the compile stack
            assert report.locator("a", has_text="dynamo_output_graph").count() >= 1
            report.locator("a", has_text="dynamo_output_graph").first.click()  # a page inside the report, served too
            report.wait_for_load_state()
            assert "graph" in report.content().lower()
            report.screenshot(path=ARTIFACTS / "tlparse-report.png")

            with page.expect_download() as got:
                page.get_by_role("button", name="Download this comparison (HTML)").click()
            saved = tmp_path / "comparison.html"
            got.value.save_as(saved)
            offline = context.new_page()
            exported = Watch(offline, "file://")
            offline.goto(saved.as_uri())
            offline.locator(".js-plotly-plot").nth(5).wait_for(timeout=WAIT_MS)  # all six charts drawn
            settle_charts(offline)
            offline.screenshot(path=ARTIFACTS / "comparison-export.png", full_page=True)
            assert offline.locator("table").count() == 1
            browser.close()
        # no console errors or refused requests, and nothing fetched from outside: not by the app, not by
        # tlparse's report, not by the exported file
        assert app_page.problems() == [] and in_report.problems() == [] and exported.problems() == []
    finally:
        tlparse.forget(record.id)
