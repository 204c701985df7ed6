"""Stored speedups no worker writes (NaN, the infinities, ±1e308, 0, the smallest float), as a store written by hand
or by a broken version can hold them: every page still draws, Compare shows each run in detail, and the command line
shows each run. One such run broke the Compare page for the whole room (the log of a speedup of -1e308) and `tcore
show` (a dot placed at NaN): a speedup that cannot be a ratio of two rates is left out of a setting's history."""
from tcore import cli
from tests.app_harness import app, db, stored_run  # noqa: F401 (db: the fixture)
from tests.helpers import QUICK

VALUES = [float("nan"), float("inf"), -float("inf"), 1e308, -1e308, 0.0, 5e-324]
FIELDS = ("speedup", "speedup_low", "speedup_high", "speedup_within_pct")


def odd_runs(db) -> list[str]:
    """One finished run of the one setting for each odd value, in each of its speedup's figures: each is the others'
    history."""
    return [stored_run(db, QUICK, compile_s=2.0, **{f: v for f in FIELDS}) for v in VALUES]


def test_every_page_draws_stored_runs_with_odd_figures_and_compare_shows_each(db):
    ids = odd_runs(db)
    at = app()
    for page in ("app_pages/run.py", "app_pages/compare.py", "app_pages/system.py", "app_pages/sweep.py",
                 "app_pages/diagnose.py"):
        at.switch_page(page).run()
        assert not at.exception, (page, at.exception)
    at.switch_page("app_pages/compare.py").run()
    for run_id in ids:
        at.selectbox(key="compare_detail").set_value(run_id).run()
        assert not at.exception, (run_id, at.exception)


def test_the_command_line_shows_each_stored_run_with_odd_figures(db, capsys):
    ids = odd_runs(db)
    assert cli.main(["list", "--db", str(db.path)]) == 0
    for run_id in ids:
        assert cli.main(["show", run_id, "--db", str(db.path)]) == 0, run_id
    assert "Traceback" not in capsys.readouterr().err
