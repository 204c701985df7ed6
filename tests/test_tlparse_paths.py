"""A run id is joined into the report shelf's paths (tcore.lab.outputs.tlparse): one that is not a plain name
renders nothing and deletes nothing outside its shelf."""
from types import SimpleNamespace

from tcore.lab.outputs import tlparse


def test_an_id_that_climbs_out_of_the_shelf_is_refused(tmp_path):
    reports = tmp_path / "static" / "tlparse"
    (reports / "store1" / "20260101-120000-abc123").mkdir(parents=True)
    victim = tmp_path / "victim"
    (victim / "index.html").parent.mkdir()
    (victim / "index.html").write_text("someone else's")
    no_trace = SimpleNamespace(torch_trace=lambda run_id, size_only=False: None)
    store = SimpleNamespace(store_id="store1", artifacts=no_trace)

    bad_ids = ("../../../victim", str(victim), "..", ".", "", "a/../../../../victim", "ok\n")
    for bad in bad_ids:
        tlparse.forget(bad, reports=reports)
    assert (victim / "index.html").read_text() == "someone else's"
    for bad in bad_ids:
        report = tlparse.report(bad, store, reports=reports)
        assert report.folder is None and "not a run id" in report.reason
    assert (reports / "store1" / "20260101-120000-abc123").is_dir()

    tlparse.forget("20260101-120000-abc123", reports=reports)  # a real id still goes
    assert not (reports / "store1").exists()
