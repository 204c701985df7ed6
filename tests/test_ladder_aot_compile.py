"""The start-up ladder's aot_compile rung (torch.compile(...).aot_compile saved with save_compiled_function, loaded
in a fresh process) for real on a tiny model, after eager: a part of the ladder in a file of its own, so that it
climbs beside the others (tests/ladder_rungs.py says why)."""
import pytest

from tests.ladder_rungs import (
    PARTS,
    assert_rung_reached_a_first_result_that_matches_eager,
    climb,
)


@pytest.fixture(scope="module")
def climbed(tmp_path_factory):
    return climb(PARTS["test_ladder_aot_compile.py"], tmp_path_factory.mktemp("ladder") / "runs.sqlite")


@pytest.mark.compile
@pytest.mark.parametrize("rung", ["eager", *PARTS["test_ladder_aot_compile.py"]])
def test_the_rung_reaches_a_first_result_that_matches_eager(climbed, rung):
    assert_rung_reached_a_first_result_that_matches_eager(climbed, rung)
