"""The Run page's note before a run whose headline may move by more than ± 5% between reruns, in a real browser:
shown for the CPU setting with the store's earlier runs of it, gone when nothing is compiled, back when it is, and
no Streamlit error on the way."""
import socket

import pytest

from tests.browser_harness import (
    ARTIFACTS,
    WAIT_MS,
    open_run_page,
    server,  # noqa: F401 (fixture)
)

pytestmark = pytest.mark.browser
NOTE = "The headline may move by more than ± 5% between reruns of this setting"


def test_the_rerun_note_follows_the_settings_in_a_real_browser(server, tmp_path):  # noqa: F811
    from playwright.sync_api import sync_playwright

    from tcore.experiment.spec import Experiment
    from tcore.host import machine
    from tcore.store import RunStore
    from tests.helpers import insert_run

    store = RunStore(tmp_path / "runs.sqlite")  # the store the server fixture opened
    setting = Experiment(model="captioner", preset="tiny", batch_size=8, precision="fp32", device="cpu")
    for speedup in (1.93, 1.30, 1.52):  # the CPU's reruns of one setting, as tried on this machine
        run_id = insert_run(store, setting)
        store.finish(run_id, result={"device": "cpu", "speedup": speedup, "speedup_low": 0.9 * speedup},
                     env={"hostname": socket.gethostname(), "cpu": machine.cpu_model()})
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser, page, watch = open_run_page(p, server)
        device = page.locator('[data-testid="stRadio"]').filter(has_text="Device")
        device.get_by_text("cpu", exact=True).click()
        page.get_by_text("Will run: captioner/tiny bs8 fp32 inference, whole default").wait_for(timeout=WAIT_MS)
        note = page.locator('[data-testid="stAlert"]').filter(has_text=NOTE)
        note.wait_for(timeout=WAIT_MS)
        assert "its 3 earlier runs on this machine read 1.30–1.93x" in note.inner_text()
        # The note stands above the Run button.
        assert note.bounding_box()["y"] < page.get_by_role("button", name="Run", exact=True).bounding_box()["y"]
        page.screenshot(path=ARTIFACTS / "run-page-rerun-note.png")

        scope = page.locator('[data-testid="stRadio"]').filter(has_text="Compile")
        scope.get_by_text("off (eager)", exact=True).click()
        page.get_by_text("Will run: captioner/tiny bs8 fp32 inference, eager").wait_for(timeout=WAIT_MS)
        assert page.locator('[data-testid="stAlert"]').filter(has_text=NOTE).count() == 0
        scope.get_by_text("regional (blocks)", exact=True).click()
        note.wait_for(timeout=WAIT_MS)  # another setting, no earlier runs: the CPU's own spread
        assert "on the CPU the run shares the machine's cores" in note.inner_text()
        assert "earlier runs on this machine" not in note.inner_text()
        assert page.locator('[data-testid="stException"]').count() == 0
        assert watch.problems() == []
        browser.close()
