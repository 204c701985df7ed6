""""Where the time goes" never contradicts the headline: a CPU run reported 2.25x faster while its
bars showed compiled at 889 ms per step against eager at 486 ms, the profiler's overhead (+318%) said only in a
caption. Bars a little off the timed steps are scaled to them; far off, they are withheld; either is said first."""
from tcore.figures.breakdown import as_timed
from ui.charts import compare_charts
from ui.charts import run_charts as charts
from ui.words import run_words


def _bd(step_ms: float, ops_ms: float) -> dict:
    return {"step_ms": step_ms, "steps": 3, "source": "cpu ops", "overlap_ms": 0.0, "top": [],
            "ms": {"matmul": ops_ms * 0.6, "pointwise": ops_ms * 0.4, "idle": step_ms - ops_ms}}


def result(compiled_profiled_ms: float) -> dict:
    return {"variants": ["eager", "compiled"], "speedup": 2.25, "eager_latency_ms_p50": 480.0,
            "compiled_latency_ms_p50": 213.0,
            "breakdown": {"eager": _bd(486.0, 450.0), "compiled": _bd(compiled_profiled_ms, compiled_profiled_ms - 20)}}


def test_bars_far_off_the_timed_steps_are_withheld_and_the_page_says_so_first():
    r = result(889.0)  # the run: +318% against the timed compiled step
    fig = charts.variant_breakdown_chart(r)
    assert fig.data == ()  # no bars: a chart of 889 ms against 486 ms would say compiled is slower
    assert "withheld: the profiler slowed the compiled steps by +317%" in fig.layout.annotations[0].text
    words = run_words.breakdown_words(r)
    assert words[0].startswith("**No bars: the profiled steps ran far off the timed ones** (compiled +317%)")
    assert not any(w.startswith("Biggest changes") for w in words)


def test_bars_somewhat_off_are_scaled_to_the_timed_steps_and_keep_their_shares():
    r = result(260.0)  # +22%
    shown = as_timed(r)
    assert shown["eager"]["shown"] == "profiled" and shown["compiled"]["shown"] == "scaled"
    assert abs(sum(shown["compiled"]["ms"].values()) - 213.0) < 1e-6
    assert abs(shown["compiled"]["ms"]["matmul"] / shown["compiled"]["ms"]["pointwise"] - 1.5) < 1e-9
    fig = charts.variant_breakdown_chart(r)
    compiled_total = sum(bar.x[1] for bar in fig.data)  # rows: eager, compiled
    eager_total = sum(bar.x[0] for bar in fig.data)
    assert compiled_total < eager_total  # the bars agree with the headline now
    assert "scaled" in fig.layout.title.subtitle.text
    assert run_words.breakdown_words(r)[0].startswith("**The bars are scaled to the timed steps.** The profiled steps "
                                                    "ran off the timed ones (compiled +22%")


def test_bars_close_to_the_timed_steps_are_drawn_as_profiled():
    r = result(220.0)  # +3%
    assert {s["shown"] for s in as_timed(r).values()} == {"profiled"}
    assert not run_words.breakdown_words(r)[0].startswith("**")
    both = compare_charts.runs_breakdown_chart([("a run", "run-aaaaaa", r),
                                                ("the issue's run", "run-bbbbbb", result(889.0))])
    assert "1 run(s) left out" in both.layout.title.subtitle.text and len(both.data[0].y) == 2  # a run's two rows


def with_columns(r: dict) -> dict:
    """The record as stored: each category's ms and the profiled step as columns too (what the tables read)."""
    r = dict(r)
    for v, bd in r["breakdown"].items():
        r.update({f"{v}_{k}_ms": ms for k, ms in bd["ms"].items()}, **{f"{v}_profiled_step_ms": bd["step_ms"]})
    return r


def test_the_command_line_withholds_the_split_the_page_withholds_with_the_same_reason():
    """The command line printed the profiled split (compiled 521 ms of matmuls) that the page withholds."""
    from tcore.analysis import report
    from tcore.figures.breakdown import withheld_words

    r = with_columns(result(889.0))
    reason = withheld_words(as_timed(r))
    page = charts.variant_breakdown_chart(r).layout.annotations[0].text.replace("<br>", " ")
    assert reason in page  # the page's words are this one definition's
    table = report.text_table(r)
    assert f"where the time went: {reason}" in table
    rows = {title: (eager, compiled) for title, eager, compiled in report.variant_rows(r)}
    assert rows["Matmuls and convolutions (ms)"] == ("withheld", "withheld")  # the page's All figures reads these too
    assert rows["Profiled step (ms)"] == ("486.00", "889.00")  # the profiled step itself is what the reason quotes
    assert "521.40" not in table and "where the time went, eager -> compiled" not in table
    # bars scaled to the timed steps: the command line names the changes the page names, at the bars' lengths
    scaled = with_columns(result(260.0))
    page_words = next(w for w in run_words.breakdown_words(scaled) if w.startswith("Biggest changes"))
    changed = page_words.removeprefix("Biggest changes, eager → compiled: ").removesuffix(".")
    assert f"where the time went, eager -> compiled: {changed}" in report.text_table(scaled)


def test_profiled_steps_faster_than_the_timed_ones_are_not_blamed_on_the_profiler():
    """A profiled step can run faster than the timed one (eager -93% beside compiled +144% was seen, all of it put
    down to the profiler's overhead, which only slows a step): the words go by sign; and the kernel count does not
    point at bars the page withholds."""
    from ui.words import graph_words

    r = {**result(889.0), "eager_latency_ms_p50": 4000.0, "device": "cpu",  # eager -88%, compiled +317%
         "eager_kernels_per_step": 40, "compiled_kernels_per_step": 40}
    words = run_words.breakdown_words(r)
    assert words[0].startswith("**No bars") and "eager -88%, compiled +317%" in words[0]
    assert "the profiler's own overhead slowed the compiled steps" in words[0]
    assert "the eager steps ran faster under the profiler, which its overhead cannot do" in words[0]
    kernels = next(w for w in graph_words.graph_words(r) if w.startswith("Kernels launched"))
    assert "the bars below" not in kernels and "shows no bars" in kernels
    shown = {**r, "compiled_latency_ms_p50": 880.0, "eager_latency_ms_p50": 480.0}  # both within 10%: bars drawn
    assert "the bars below" in next(w for w in graph_words.graph_words(shown) if w.startswith("Kernels launched"))
