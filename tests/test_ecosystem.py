"""The run in other tools: its TORCH_TRACE kept and rendered by tlparse, two runs' generated code compared by
kernel, and the Compare page's selection as one HTML report. (Copy as code: tests/test_snippet.py.)"""
import gzip
import html.parser
import io
import zipfile

import pytest

from tcore.analysis import codediff
from tcore.experiment.spec import Experiment
from tcore.lab.outputs import tlparse
from tcore.lab.run import runs
from tcore.store import RunStore

TRACED = Experiment(model="captioner", preset="tiny", batch_size=2, device="cpu", warmup_steps=1, timed_steps=2,
                    rounds=1, backend="aot_eager", graph_break=True)


@pytest.fixture(scope="module")
def traced_run(tmp_path_factory):
    """One real aot_eager run with a graph break (seconds on the CPU), and one with its trace switched off."""
    store = RunStore(tmp_path_factory.mktemp("store") / "runs.sqlite")
    on = runs.execute(TRACED, store)
    off = runs.execute(TRACED.replace(torch_trace=False), store)
    assert on.status == off.status == "finished", (on.error, off.error)
    return store, on, off


def test_a_run_keeps_its_compile_trace_and_tlparse_renders_it(traced_run, tmp_path):
    store, on, _ = traced_run
    log = gzip.decompress(store.artifacts.torch_trace(on.id)).decode()
    assert '"dynamo_start"' in log and '"compilation_metrics"' in log  # TORCH_TRACE's structured records

    report = tlparse.report(on.id, store, reports=tmp_path)
    assert report.reason is None, report.reason
    index = report.index.read_text()
    assert "dynamo_output_graph" in index  # a link per compilation's graph
    assert "graph break" in index.lower() or "dynamo_graph_break_reason" in index  # the deliberate break, listed
    assert report.folder == tmp_path / store.store_id / on.id  # on its store's own shelf
    with zipfile.ZipFile(io.BytesIO(report.zipped())) as z:
        assert f"tlparse-{on.id}/index.html" in z.namelist()
    assert tlparse.report(on.id, store, reports=tmp_path).folder == report.folder  # rendered once, then reused
    tlparse.forget(on.id, reports=tmp_path)
    assert not report.folder.exists()


def test_a_run_with_the_trace_off_keeps_none_and_says_why(traced_run, tmp_path):
    store, _, off = traced_run
    assert store.artifacts.torch_trace(off.id) is None
    report = tlparse.report(off.id, store, reports=tmp_path)
    assert report.folder is None and "torch_trace off" in report.reason


def test_without_tlparse_the_report_is_na_with_the_reason(traced_run, tmp_path, monkeypatch):
    store, on, _ = traced_run
    monkeypatch.setattr(tlparse, "executable", lambda: None)
    report = tlparse.report(on.id, store, reports=tmp_path)
    assert report.folder is None and "pip install tlparse" in report.reason


TRITON_CODE = '''
triton_poi_fused_add_0 = async_compile.triton('triton_poi_fused_add_0', """...""")
triton_red_fused_sum_1 = async_compile.triton('triton_red_fused_sum_1', """...""")
triton_per_fused_softmax_2 = async_compile.triton('triton_per_fused_softmax_2', """...""")
def call(args):
    extern_kernels.mm(buf0, arg1_1, out=buf1)
    buf2 = torch.ops.aten._scaled_dot_product_flash_attention.default(q, k, v)
    triton_poi_fused_add_0.run(buf1, grid=grid(64))
'''
FUSED_CODE = '''
triton_per_fused_add_softmax_0 = async_compile.triton('triton_per_fused_add_softmax_0', """...""")
def call(args):
    extern_kernels.mm(buf0, arg1_1, out=buf1)
'''


def test_kernels_are_counted_by_kind_and_the_change_is_said():
    a, b = codediff.kernels([TRITON_CODE]), codediff.kernels([FUSED_CODE])
    assert a.total == 3 and a.library_calls == 2
    assert a.by_kind == {"pointwise": 1, "reduction": 1, "persistent reduction": 1}
    assert codediff.kernels(["cpp_fused_gelu_0 = async_compile.cpp_pybinding(['float*'], '''...''')"]).by_kind == {
        "C++ loop nest": 1}
    assert codediff.kernel_words(a, b) == ("Generated kernels 3 → 1 (-2): pointwise 1 → 0, reduction 1 → 0; "
                                           "library calls 2 → 1.")
    assert codediff.kernel_words(a, a).startswith("The same kernels by kind in both: 3 generated")


class _Tags(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.text = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def test_the_html_report_is_one_offline_page_with_its_charts_and_table():
    import pandas as pd
    import plotly.graph_objects as go

    from ui.panels import exports

    figs = [go.Figure(go.Bar(x=["a"], y=[1]), layout_title_text=f"Chart {i}") for i in range(3)]
    page = exports.html_report("Two runs", pd.DataFrame({"Run": ["x", "y"], "Speedup": [1.5, None]}), figs)
    parsed = _Tags()
    parsed.feed(page)
    scripts = [a for t, a in parsed.tags if t == "script"]
    assert not any(a.get("src") for a in scripts)  # nothing fetched: plotly.js is inside the page
    assert page.count("Chart 0") == 1 and "Chart 2" in page
    assert page.count("plotly.js v") <= 2  # the library once (its banner), not once per chart
    assert "<table" in page and "n/a" in "".join(parsed.text)  # a missing figure reads n/a


def test_rendered_reports_are_a_cache_that_keeps_under_its_size(tmp_path):
    """Streamlit stops serving static/ past 1 GB: the least recently rendered reports go first, never the new one."""
    import os

    for age, (store, name) in enumerate([("store-a", "old"), ("store-b", "middle"), ("store-a", "new")]):
        (tmp_path / store / name).mkdir(parents=True)  # each store's reports on its own shelf, evicted as one cache
        (tmp_path / store / name / "index.html").write_bytes(b"x" * 1000)
        os.utime(tmp_path / store / name, (1_000 + age, 1_000 + age))
    (tmp_path / "store-a" / ".render-abc").mkdir()  # a render in progress is not a report
    tlparse._evict(tmp_path, keep=tmp_path / "store-a" / "old", limit=2000)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.glob("*/*")) == [
        "store-a/.render-abc", "store-a/new", "store-a/old"]


def test_a_report_that_failed_to_render_says_why_without_rendering_again(traced_run, tmp_path, monkeypatch):
    """The page reruns every second or two: a failed render is remembered, not retried on each."""
    store, on, _ = traced_run
    monkeypatch.setattr(tlparse, "executable", lambda: "/bin/false")
    first = tlparse.report(on.id, store, reports=tmp_path)
    assert first.folder is None and first.reason.startswith("tlparse failed (exit 1)")
    monkeypatch.setattr(tlparse, "_render", lambda *a: pytest.fail("rendered again"))
    assert tlparse.report(on.id, store, reports=tmp_path).reason == first.reason
    tlparse.forget(on.id, reports=tmp_path)
    assert list(tmp_path.iterdir()) == []
