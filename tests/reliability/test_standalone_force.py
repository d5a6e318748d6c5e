"""Issue 16, item 8: a standalone evaluation with force=true clears eval/ only once it holds the claim,
so it never wipes the shards of the same evaluation running elsewhere."""

from __future__ import annotations

import pytest

from opsd_sweep.config import load_run_config
from opsd_sweep.evaluate.standalone import evaluate_standalone, locate_eval_dir
from opsd_sweep.run.claims import RunClaimedError, claim_run, release_run
from tests.conftest import compose


def test_force_leaves_the_shards_of_a_running_evaluation_alone(tmp_path):
    run = load_run_config(compose(["profile=tiny", f"results_root={tmp_path}", "force=true"]))
    run_dir = locate_eval_dir(run)[1]
    shard = run_dir.eval_dir / "shards" / "shard-0.json"
    shard.parent.mkdir(parents=True)
    shard.write_text("{}")
    running = claim_run(run_dir)  # the same evaluation, running in a live process
    with pytest.raises(RunClaimedError):
        evaluate_standalone(run)
    assert shard.exists()
    release_run(running)
