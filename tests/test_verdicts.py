"""Verdicts between runs use the paired speedup and its interval, and say when runs cannot be told apart
(Diagnose's break pair and strategies, Compare, the Sweep matrix and its heatmap)."""
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from tcore.experiment.spec import Experiment
from ui.charts import compare_charts
from ui.words import compare_verdicts, sweep_matrix


def run(speedup, low, high, **more):
    return {"variants": ["eager", "compiled"], "speedup": speedup, "speedup_low": low, "speedup_high": high,
            "speedup_pm_pct": 100 * max(high / speedup - 1, 1 - low / speedup), "paired_rounds": 12, **more}


def test_the_break_verdict_reads_the_right_way_round_with_its_caveats():
    clean = run(2.69, 2.60, 2.80, graph_count=1, compile_s=18.2)
    broken = run(1.80, 1.74, 1.85, graph_count=6, compile_s=17.7)
    text = compare_verdicts.break_verdict(clean, broken)
    assert "**6 graphs** instead of 1" in text
    assert "compiled keeps **67%** of the speedup it has without it, beyond both runs' intervals" in text
    assert "Noisy" not in text

    # The case: noisy runs whose figures read backwards. Overlapping intervals: not told apart, and said.
    noisy_clean = run(0.47, 0.30, 2.90, graph_count=1)
    noisy_broken = run(0.85, 0.40, 1.90, graph_count=6)
    text = compare_verdicts.break_verdict(noisy_clean, noisy_broken)
    assert "**cannot tell the two apart**" in text and "181%" not in text
    assert "**Noisy**: the run without the break (the speedup's 95% interval is too wide to trust" in text

    # Faster with the break, beyond the intervals: said as unexpected, not as a cost.
    text = compare_verdicts.break_verdict(run(1.2, 1.18, 1.22, graph_count=1), run(1.5, 1.45, 1.55, graph_count=6))
    assert "measured **faster**, which a break should not do" in text


def test_the_strategies_get_a_verdict_and_a_word_when_throughput_orders_them_otherwise():
    items = [("dynamic=False", run(1.30, 1.25, 1.34, compiled_samples_per_s=1300.0, eager_samples_per_s=1000.0)),
             ("mark_dynamic", run(1.28, 1.22, 1.33, compiled_samples_per_s=1410.0, eager_samples_per_s=1100.0)),
             ("buckets", run(0.90, 0.88, 0.93, compiled_samples_per_s=950.0, eager_samples_per_s=1050.0))]
    text = compare_verdicts.ranking_verdict(items, what="strategy")
    # The two fastest overlap: neither is crowned, and the slower one beyond them is not among them.
    assert text.startswith("These runs **cannot tell apart** **dynamic=False** (1.30x (1.25–1.34)), **mark_dynamic** "
                           "(1.28x (1.22–1.33)): their speedups' intervals overlap, so none of them is named the "
                           "fastest strategy.")
    assert "Fastest" not in text and "**buckets** (" not in text
    clear = compare_verdicts.ranking_verdict([items[0], items[2]], what="strategy")
    assert clear.startswith("Fastest strategy: **dynamic=False**, 1.30x (1.25–1.34) eager.")
    assert "By compiled samples/s alone the order differs (mark_dynamic > dynamic=False > buckets)" in text
    assert "eager read 1,000–1,100 samples/s across them" in text
    other = compare_verdicts.ranking_verdict(items, what="run", same_work=False)  # different models or tasks on Compare
    assert "machine's speed" not in other and "time different work" in other
    assert compare_verdicts.ranking_verdict([("a", {"speedup": None})]) is None
    assert compare_verdicts.ranking_verdict(items[:1]) is None  # one run is not a ranking


def test_strategies_without_intervals_or_compiled_code_crown_none():
    """The walk's case: four aot_eager strategies of 1-2 rounds, one reading 1.73x eager. Nothing was compiled to code,
    and no run has an interval: no strategy is named the fastest, by the rule Compare and the Sweep use."""
    aot = {"backend": "aot_eager", "compile": "whole"}
    bare = [("dynamic=False", 1.21), ("dynamic=None (default)", 0.95), ("dynamic=True", 1.05), ("mark_dynamic", 1.73)]
    said = compare_verdicts.strategy_verdict([(n, aot, {"speedup": s, "paired_rounds": 2}) for n, s in bare])
    assert "Fastest" not in said and "None of these strategies compiled code (backend aot_eager" in said
    ind = {"backend": "inductor", "compile": "whole"}
    said = compare_verdicts.strategy_verdict([(n, ind, {"speedup": s, "paired_rounds": 2}) for n, s in bare])
    assert "Fastest" not in said and said.startswith("These runs **cannot tell apart** **mark_dynamic** (1.73x)")
    assert "or a run has none of its own" in said
    # One interval-less run beside clearly separated ones still stops the crown; inductor runs with intervals rank,
    # and an aot_eager one among them is named but not ranked.
    told = [("dynamic=False", ind, run(1.30, 1.25, 1.34)), ("buckets", ind, run(0.90, 0.88, 0.93))]
    assert compare_verdicts.strategy_verdict(told).startswith("Fastest strategy: **dynamic=False**")
    assert "Fastest" not in compare_verdicts.strategy_verdict(told + [("mark_dynamic", ind, {"speedup": 1.1})])
    mixed = compare_verdicts.strategy_verdict(told + [("dynamic=True", aot, run(1.9, 1.8, 2.0))])
    assert mixed.startswith("Fastest strategy: **dynamic=False**")
    assert "Not ranked, as they compiled nothing: **dynamic=True** (backend aot_eager, 1.90x (1.80–2.00))" in mixed


def test_sweep_names_what_it_cannot_tell_apart_by_the_intervals_and_the_heatmap_shows_them():
    matrix = pd.DataFrame([
        {"row": "whole · default", "col": "as set", "setting": "whole · default", "speedup": 1.50,
         "speedup_low": 1.45, "speedup_high": 1.56, "speedup_min": 1.0, "speedup_max": 2.0, "compile_s": 20.0,
         "breakeven_steps": 900.0},
        {"row": "regional · default", "col": "as set", "setting": "regional · default", "speedup": 1.47,
         "speedup_low": 1.44, "speedup_high": 1.49, "speedup_min": 1.4, "speedup_max": 1.5, "compile_s": 8.0,
         "breakeven_steps": 400.0},
        {"row": "whole · lite", "col": "as set", "setting": "whole · lite", "speedup": 1.05, "speedup_low": 1.0,
         "speedup_high": 1.10, "speedup_min": 0.9, "speedup_max": 1.6, "compile_s": 6.0, "breakeven_steps": None},
    ])
    text = sweep_matrix.best_setting(matrix)
    # Two settings the runs cannot tell apart: neither is crowned. whole · lite's rounds reach 1.6 but its interval
    # stops at 1.10: the interval, not the rounds, decides.
    assert text.startswith("These runs **cannot tell apart** **whole · default** (1.50x, 1.45–1.56x), **regional · "
                           "default** (1.47x, 1.44–1.49x): their intervals overlap, so none of them is named the "
                           "fastest.")
    assert "Fastest" not in text and "whole · lite**" not in text
    assert sweep_matrix.best_setting(matrix.drop(index=1)).startswith(
        "Fastest: **whole · default**, 1.50x eager (95% interval 1.45–1.56x)")
    # a best of one round, with no interval (37.9x where its setting's reruns read 0.6x): its rounds' range is a
    # point, which reaches no rival; it is not crowned over the rest
    lone = pd.concat([matrix.drop(index=1), pd.DataFrame([
        {"row": "regional · default", "col": "as set", "setting": "regional · default", "speedup": 37.94,
         "speedup_low": None, "speedup_high": None, "speedup_min": 37.94, "speedup_max": 37.94, "compile_s": 8.0,
         "breakeven_steps": 2.0}])], ignore_index=True)
    text = sweep_matrix.best_setting(lone)
    assert "Fastest" not in text and "cannot tell apart" in text and "a run has none of its own" in text
    # the sweep page's own matrix: paired intervals (none here, too few rounds) and no rounds' range columns
    walked = pd.DataFrame([{"setting": "whole · default", "speedup": 0.75, "speedup_low": None, "speedup_high": None,
                            "compile_s": 41.0, "breakeven_steps": None},
                           {"setting": "regional · default", "speedup": 2.97, "speedup_low": None,
                            "speedup_high": None, "compile_s": 40.8, "breakeven_steps": 30.0}])
    text = sweep_matrix.best_setting(walked)
    assert "Fastest" not in text and "cannot tell apart" in text and "a run has none of its own" in text
    assert sweep_matrix.interval_cells(walked) == ["none: too few rounds"] * 2  # the table said "None"
    assert sweep_matrix.interval_cells(matrix.iloc[:1]) == ["1.45–1.56x"]
    cells = compare_charts.sweep_heatmap(matrix).data[1].text
    assert cells[0][0] == "1.50x ± 4.0%<br>20.0 s"  # as every page writes an interval's reach


def test_compare_scatter_draws_each_runs_interval():
    frame = pd.DataFrame([{"id": "run-aaaaaa", "label": "a", "compile_s": 10.0, "speedup": 1.4, "speedup_low": 1.3,
                           "speedup_high": 1.6, "breakeven_steps": 100.0},
                          {"id": "run-bbbbbb", "label": "b", "compile_s": 5.0, "speedup": 1.1,
                           "breakeven_steps": None}])
    err = compare_charts.tradeoff_scatter(frame).data[0].error_y
    assert list(err.array) == pytest.approx([0.2, 0.0]) and list(err.arrayminus) == pytest.approx([0.1, 0.0])


def test_diagnose_backend_picker_opens_at_the_backend_of_the_runs_it_shows(tmp_path, monkeypatch):
    from tcore.store import RunStore
    from tests.helpers import insert_run

    monkeypatch.setenv("COMPILE_LAB_DB", str(tmp_path / "runs.sqlite"))
    db = RunStore()
    exp = Experiment(model="captioner", device="cpu", backend="aot_eager")
    for broken in (False, True):
        run_id = insert_run(db, exp.replace(graph_break=broken))
        db.finish(run_id, result={"device": "cpu", "variants": ["eager", "compiled"], **run(1.1, 1.0, 1.2),
                                  "graph_count": 1 + 2 * broken, "compile_s": 1.0}, env={})
    at = AppTest.from_file("../app.py", default_timeout=300).run()
    at.switch_page("app_pages/diagnose.py").run()
    assert not at.exception
    assert at.selectbox(key="diag_break_backend").value == "aot_eager"  # as the charts below it
    assert "cannot tell the two apart" in " ".join(m.value for m in at.markdown)


def test_a_runs_page_shows_the_paired_headline_its_interval_and_a_launch_bound_word(tmp_path, monkeypatch):
    from tcore.store import RunStore
    from tests.helpers import gpu_like_result, insert_run

    monkeypatch.setenv("COMPILE_LAB_DB", str(tmp_path / "runs.sqlite"))
    db = RunStore()
    r = gpu_like_result(samples_per_s=4700.0, speedup=1.38, compile_s=9.8, batch=32)
    r.update(run(1.38, 1.34, 1.43), speedup_confidence_pct=97.9, paired_rounds=14, speedup_of_medians=1.71,
             compiled_gpu_busy_pct=48.0, compiled_spread_pct=38.0,
             timed_stop_words="Timing used its 4 s per variant over 14 rounds; the speedup's interval stayed at ± 3.6% "
                              "against the ± 3% target.")
    exp = Experiment(model="captioner", device="cuda", preset="small", batch_size=32, precision="bf16")
    for earlier in (1.52, 1.31):  # the history panel shows the earlier runs of the same setting on the same machine
        db.finish(insert_run(db, exp), result={"device": "cuda", "speedup": earlier}, env={"device": "cuda"})
    db.finish(insert_run(db, exp.replace(batch_size=64)), result={"device": "cuda", "speedup": 3.0}, env={})
    run_id = insert_run(db, exp)
    db.finish(run_id, result=r, env={"device": "cuda"})
    at = AppTest.from_file("../app.py", default_timeout=300).run()
    at.switch_page("app_pages/compare.py").run()
    at.selectbox(key="compare_detail").set_value(run_id).run()
    assert not at.exception
    speedup = next(m for m in at.metric if m.label == "Speedup")
    assert speedup.value == "1.38 x" and speedup.proto.delta == "95%: 1.34–1.43 x"  # the one level named, not its 98%
    captions = " ".join(str(c.value) for c in at.caption)
    assert "the median of 14 paired rounds' ratios" in captions and "stayed at ± 3.6%" in captions
    info = " ".join(str(i.value) for i in at.info)
    # the two median throughputs give 1.71x, 24% off the headline: one figure on the card, the other explained
    assert "**The two throughputs give 1.71x; the speedup is 1.38x.**" in info
    # the tiles' two throughputs give the Speedup's own figure here, so the tile says it (one number per question)
    assert next(m for m in at.metric if m.label == "Compiled samples/s").proto.delta == "+38% vs eager"
    assert "**Compiled is host-bound**" in info and "NVML saw it busy 48%" in info and "mode=reduce-overhead" in info
    assert ("2 earlier runs of this setting on this machine: 1.31–1.52x, median 1.42x (σ 11.1%); this run 1.38x"
            in captions)
    assert "Earlier runs of this setting" in " ".join(m.value for m in at.markdown)


def test_reruns_of_one_setting_are_said_as_reruns_not_ranked():
    a = {"speedup": 2.54, "speedup_low": 2.40, "speedup_high": 2.70}
    b = {"speedup": 2.50, "speedup_low": 2.36, "speedup_high": 2.66}
    said = compare_verdicts.ranking_verdict([("x · f83988", a), ("x · 74e593", b)], what="run", reruns=True)
    assert said.startswith("These 2 runs are reruns of **one setting**, so none of them is a faster setting: their "
                           "headlines read 2.50–2.54x, 1.6% apart")
    assert "Fastest" not in said and "inside the others' intervals" in said
    far = {"speedup": 3.5, "speedup_low": 3.4, "speedup_high": 3.6}
    assert "lie outside each other's intervals" in compare_verdicts.ranking_verdict([("a", a), ("c", far)], reruns=True)


def test_the_history_axis_holds_the_points_and_cuts_a_runaway_whisker():
    from tcore.analysis.history import Point
    from ui.panels.earlier_runs import axis_range

    steady = [Point("a", 0.0, 1.51, 1.45, 1.57), Point("b", 1.0, 1.49, 1.43, 1.55)]
    low, high, cut = axis_range(steady)
    assert low <= 1.43 and high >= 1.57 and not cut  # whiskers this short are drawn whole
    runaway = [*steady, Point("c", 2.0, 2.54, 0.01, 121.5)]
    low, high, cut = axis_range(runaway)
    assert cut and high < 10 and low <= 1.49  # the points are readable, and the page says the whisker is cut


def record(run_id, speedup, low, high, **spec):
    from tcore.store import RunRecord

    exp = Experiment(model="captioner", device="cpu", **spec)
    return RunRecord(id=run_id, status="finished", created_at=0.0, label=exp.label, spec=exp.to_dict(), device="cpu",
                     result={"device": "cpu", **run(speedup, low, high)})


def test_compare_crowns_only_a_run_that_compiled_code_of_the_selections_task_and_names_reruns():
    eager = record("run-eager1", 4.15, 0.5, 30.0, backend="eager")  # compiled nothing, however fast it read
    eager_again = record("run-eager2", 0.13, 0.11, 0.16, backend="eager")
    inductor = record("run-induct", 1.30, 1.25, 1.35)
    generate = record("run-genera", 2.00, 1.90, 2.10, task="generate")
    text = compare_verdicts.compare_verdict([eager, eager_again, inductor, generate])
    assert "Fastest" not in text  # one run of this task compiled code: nothing to rank it against
    assert text.startswith(f"Of the runs of one task here, only **{inductor.label} · induct** compiled code: 1.30x")
    assert f"**{eager.label} · eager1** (backend eager, 4.15x (0.50–30.00))" in text  # not ranked, and why
    assert (f"**{eager.label} · eager1** and **{eager_again.label} · eager2** are reruns of one setting: their "
            "headlines read 0.13–4.15x, about 32 times apart") in text
    assert f"Left out of the ranking, as another task times other work: **{generate.label} · genera** (generate)" \
        in text

    # Two runs that compiled code: the faster one is crowned, the eager-backend run still is not.
    regional = record("run-region", 1.60, 1.55, 1.65, compile="regional")
    text = compare_verdicts.compare_verdict([eager, regional, inductor])
    assert text.startswith(f"Fastest run: **{regional.label} · region**, 1.60x (1.55–1.65) eager.")
    # Nothing compiled in any of them, over two settings: no crown at all.
    text = compare_verdicts.compare_verdict([eager, record("run-offoff", 1.01, 0.9, 1.1, compile="off")])
    assert "none is crowned the fastest" in text and "Fastest" not in text


def test_the_verdict_as_text_keeps_each_label_as_typed_asterisks_and_all():
    import dataclasses

    fast = dataclasses.replace(record("run-fast01", 1.60, 1.55, 1.65, compile="regional"), label="**mine**, a/b")
    slow = record("run-slow01", 1.30, 1.25, 1.35)
    text = compare_verdicts.compare_verdict_text([fast, slow])
    assert text.startswith("Fastest run: **mine**, a/b · fast01, 1.60x (1.55–1.65) eager.")
    assert text.count("**") == 2  # the label's own; the verdict's bold marks are gone
