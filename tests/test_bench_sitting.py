"""The sitting runner (bench/sitting.py): a list of commands in, results named after what and where, one archive out."""
import json
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import sitting  # noqa: E402

LIST = """\
# a comment, then a blank line

writes-json: {python} -c "import json, sys; json.dump(json.loads(sys.argv[1]), open(sys.argv[2], 'w'))" RECORD {result}
fails: echo "it went wrong" && exit 3
writes-a-folder: {python} -c "import sys; open(sys.argv[1] + '/a.txt', 'w').write('x')" {dir} && echo folder written
""".replace("RECORD", "'" + json.dumps({"status": "finished", "result": {"speedup": 1.5, "compile_s": 2.0}}) + "'")


def _sitting(tmp_path, *extra):
    listed = tmp_path / "list.txt"
    listed.write_text(LIST)
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "sitting.py"), "run", str(listed), "--out", str(out),
                           "--machine", "h100", "--pack", str(tmp_path / "sitting.tgz"), *extra],
                          capture_output=True, text=True, cwd=tmp_path)
    return proc, out


def test_a_sitting_files_each_result_under_its_name_and_machine_and_packs_them(tmp_path):
    proc, out = _sitting(tmp_path)
    assert proc.returncode == 1  # one benchmark failed
    lines = proc.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["writes-json", "fails", "writes-a-folder"]
    assert "exit 0" in lines[0] and "finished, speedup 1.50x, compile 2.0 s" in lines[0]
    assert "exit 3" in lines[1] and "it went wrong" in lines[1]
    assert lines[2].endswith("folder written")
    assert json.loads((out / "writes-json-h100.json").read_text())["result"]["speedup"] == 1.5
    assert (out / "writes-a-folder-h100" / "a.txt").read_text() == "x"
    assert (out / "summary.txt").read_text().splitlines() == lines
    assert "commit" in json.loads((out / "machine-h100.json").read_text())
    with tarfile.open(tmp_path / "sitting.tgz") as tar:
        names = set(tar.getnames())
    assert {"out/summary.txt", "out/writes-json-h100.json", "out/fails-h100.log", "out/machine-h100.json",
            "out/writes-a-folder-h100/a.txt"} <= names


def test_a_sitting_run_again_skips_what_finished_and_only_runs_what_is_named(tmp_path):
    _sitting(tmp_path, "--only", "writes-json")
    assert not (tmp_path / "out" / "fails-h100.log").exists()
    proc, _ = _sitting(tmp_path)
    assert proc.stdout.splitlines()[0] == "writes-json: finished in an earlier run of this sitting, skipped"
    assert len((tmp_path / "out" / "summary.txt").read_text().splitlines()) == 3


def test_the_machine_is_named_after_its_gpu():
    assert sitting.machine_name(["NVIDIA H100 80GB HBM3, 580.159.04, 700.00 W, 81559 MiB"]) == "h100"
    assert sitting.machine_name(["NVIDIA H200, 580.159.04, 700.00 W, 143771 MiB"]) == "h200"
    assert sitting.machine_name(["NVIDIA A100-SXM4-80GB, 535.1, 400 W, 81920 MiB"]) == "a100"
    assert sitting.machine_name([]) == "cpu"


def test_a_malformed_list_says_which_line(tmp_path):
    listed = tmp_path / "bad.txt"
    listed.write_text("fine: echo ok\nNo Colon Here\n")
    with pytest.raises(SystemExit, match="bad.txt:2: expected `name: command`"):
        sitting.read_list(listed)


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "bench" / "sittings").glob("*.txt")))
def test_every_list_in_bench_parses_and_names_scripts_that_exist(name):
    entries = sitting.read_list(ROOT / "bench" / "sittings" / name)
    assert entries
    for _, command in entries:
        for word in command.split():
            if word.startswith("bench/") or word.startswith("tests/"):
                assert (ROOT / word).exists(), word



ROUND = re.compile(r"edition|issue|trust|headline|sitting-\d|-final|-rest\b|-before|-after", re.I)


def test_bench_readme_lists_every_file_in_bench_and_nothing_is_named_after_a_round():
    readme = (ROOT / "bench" / "README.md").read_text()
    bench = ROOT / "bench"
    files = [p for p in bench.iterdir() if p.name not in {"__pycache__", "sittings"}]
    files += list((bench / "sittings").iterdir())
    unlisted = [str(p.relative_to(bench)) for p in files
                if f"`{p.relative_to(bench)}`" not in readme and f"`{p.name}/`" not in readme]
    assert unlisted == [], "add a row to bench/README.md for each"
    named_after_a_round = [str(p.relative_to(bench)) for p in bench.rglob("*")
                           if "__pycache__" not in p.parts and ROUND.search(p.name)]
    assert named_after_a_round == []
