"""A stored run whose breakdown shows the bert case (compiled left cuDNN's fused attention for a softmax between
batched matmuls, one of them fp32), walked headless: the Run page's result and Compare's run in detail say which class
grew and why, beside the headline, with the per-class chart."""
from streamlit.testing.v1 import AppTest

from tcore.experiment.spec import Experiment
from tests.app_harness import db, figure  # noqa: F401 (the db fixture)
from tests.helpers import gpu_like_result, insert_run
from tests.kernel_profiles import bert_result

OWNER = "ada~abcd.00000000c0ffee00"


def put_bert_run(store) -> str:
    exp = Experiment(model="hf:bert", preset="tiny", device="cuda", batch_size=8, precision="bf16")
    result = {**gpu_like_result(samples_per_s=900.0, speedup=0.78, compile_s=20.0, batch=8), **bert_result()}
    run_id = insert_run(store, exp)
    with store._write() as conn:
        conn.execute("UPDATE runs SET owner=? WHERE id=?", (OWNER, run_id))
    store.finish(run_id, result=result, env={"device": "cuda", "gpu": "NVIDIA H100 80GB HBM3"})
    return run_id


def said(at) -> str:
    return "\n".join(str(e.value) for kind in ("markdown", "caption", "info") for e in at.get(kind))


def test_the_bert_case_is_named_on_the_run_page_and_in_compare(db):
    run_id = put_bert_run(db)
    at = AppTest.from_file("../app.py", default_timeout=120)
    at.query_params["me"] = OWNER
    at.run()
    at.session_state["run_shown"] = run_id
    at.run()
    assert not at.exception, at.exception
    for where in ("Run", "Compare"):
        text = said(at)
        assert "Why compiled is slower (0.78x), from the kernels" in text, where
        assert "**fused kernel lost**: eager ran cuDNN's fused attention" in text, where
        assert "**precision raised**" in text and "sm80_xmma_gemm_f32f32_f32f32" in text, where
        assert "**The encoder case**" in text and "skip_full_mask" in text, where
        chart = next(f for f in map(figure, at.get("plotly_chart"))
                     if f["layout"]["title"]["text"].startswith("Each class, eager vs compiled"))
        assert [t["name"] for t in chart["data"]] == ["Eager", "Compiled"]
        assert "Attention ▲" in chart["data"][0]["x"]
        at.switch_page("app_pages/compare.py").run()
        assert not at.exception, at.exception
