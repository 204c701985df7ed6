"""bench/fresh_lab_spread.py's table and checks, on made-up runs: what the GPU check of a fresh lab counts."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import fresh_lab_spread as bench  # noqa: E402


def run(setting, speedup, pm, noisy=False):
    return {"setting": setting, "speedup": speedup, "low": speedup * (1 - pm / 100),
            "high": speedup * (1 + pm / 100), "pm_pct": pm, "noisy": noisy}


def test_the_table_counts_held_medians_widths_within_allowance_and_noisy_where_reruns_agree():
    rows = [run("gpt2", 2.495, 2.5), run("gpt2", 2.501, 2.5), run("gpt2", 2.499, 2.5),
            run("resnet50", 1.649, 4.0), run("resnet50", 1.680, 4.0), run("resnet50", 1.696, 6.0)]
    per, checks = bench.table(rows)
    gpt2, resnet50 = per
    assert gpt2["allowed_pct"] == 3.0 and gpt2["within_allowed"] == 3 and gpt2["agree_within_2pct"]
    assert round(resnet50["half_range_pct"], 2) == 1.40 and resnet50["within_allowed"] == 2  # ±6% > 3 x 1.4%
    assert checks["hold_ok"] and not checks["within_allowed_ok"] and checks["no_noisy_where_reruns_agree"]
    rows[0]["noisy"] = True  # a setting whose reruns agree within ± 2% flagged Noisy
    rows.append({"setting": "gpt2", "speedup": None, "low": None, "high": None, "pm_pct": None, "noisy": False})
    assert not bench.table(rows)[1]["no_noisy_where_reruns_agree"]
    missed = [run("x", 1.0, 0.5), run("x", 1.2, 0.5), run("x", 1.1, 0.5)]  # narrow, and reruns fall outside
    assert bench.table(missed)[1]["hold_share"] < 0.9 and not bench.table(missed)[1]["hold_ok"]
