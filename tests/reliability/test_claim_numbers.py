"""Issue 16, item 7: claim numbers only grow, and a claim file is removed only by its owner's nonce."""

from __future__ import annotations

from opsd_sweep.run.claims import _remove_if_nonce, claim_run, current_owner, release_run
from opsd_sweep.run.rundir import RunDir


def test_a_released_claim_keeps_its_number_and_a_stalled_remover_cannot_drop_a_live_claim(tmp_path):
    run_dir = RunDir(tmp_path / "run")
    first = claim_run(run_dir)
    release_run(first)
    assert current_owner(run_dir) is None  # released: nobody holds the run
    second = claim_run(run_dir)
    assert (first.path.name, second.path.name) == ("00000001", "00000002")  # numbers never restart
    # A claimer that stalled after judging the first owner dead removes by that owner's nonce only.
    _remove_if_nonce(second.path, first.owner["nonce"])
    assert current_owner(run_dir) == second.owner
    release_run(second)
    assert claim_run(run_dir).path.name == "00000003"
