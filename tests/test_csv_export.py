"""The Compare page's CSV opens in a spreadsheet as text: a label or preset that starts like a formula is quoted,
and figures stay numbers, negative ones included."""
import csv
import io

import pandas as pd

from tcore.store import RunStore
from tests.helpers import QUICK, insert_run
from ui.words.run_table import csv_text

FORMULAS = ["=HYPERLINK(\"http://evil\",\"x\")", "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)", "\t=1", "\r=1"]


def rows(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def test_a_cell_that_starts_like_a_formula_is_quoted_and_numbers_stay_numbers():
    frame = pd.DataFrame({"preset": FORMULAS, "label": [f"model/{f}" for f in FORMULAS],
                          "speedup": [-1.5, 0.0, 1.2, -3.0, 2.0, None],
                          "mixed": [-1, "-1.5", None, "=1", 2.5, "ok"],
                          "created_at": pd.to_datetime([0, 1, 2, 3, 4, 5], unit="s")})
    out = rows(csv_text(frame))
    assert [r["preset"] for r in out] == ["'" + f for f in FORMULAS]
    assert [r["label"] for r in out] == [f"model/{f}" for f in FORMULAS]  # not at the start: left as it is
    assert [r["speedup"] for r in out] == ["-1.5", "0.0", "1.2", "-3.0", "2.0", ""]
    assert [r["mixed"] for r in out] == ["-1", "-1.5", "", "'=1", "2.5", "ok"]
    assert out[0]["created_at"] == "1970-01-01 00:00:00"


def test_the_stored_runs_csv_quotes_a_label_that_starts_like_a_formula(tmp_path):
    store = RunStore(tmp_path / "runs.sqlite")
    run_id = insert_run(store, QUICK)
    with store._write() as db:
        db.execute("UPDATE runs SET label=? WHERE id=?", ("=WEBSERVICE(\"http://evil\")", run_id))
    (row,) = rows(csv_text(store.dataframe()))
    assert row["label"] == "'=WEBSERVICE(\"http://evil\")"
    assert row["batch_size"] == "2" and row["preset"] == "tiny"
