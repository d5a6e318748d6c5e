"""Issue 21, item 2: scores of an evaluator recorded or known to be wrong are evaluated again from the
run's checkpoint (training kept), with one line saying why; until then the summary leaves them out."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from opsd_sweep.scoring.grade import grader_identity
from opsd_sweep.summarize.collect import collect
from opsd_sweep.run.identity import EVALUATOR_VERSIONS, evaluation_problem
from tests.conftest import run_sweep
from tests.orchestration.conftest import TINY, phase_starts, run_dirs

pytestmark = pytest.mark.slow

ARGS = ["-m", *TINY, "train.max_steps=1", "seed=1", "eval.backend=hf"]
PRE_FIX = "it was scored by the hf backend before it served the unmerged adapter"


def as_before_the_hf_fix(run_dir: Path) -> None:
    """eval.json as the hf backend wrote it before 174b541: no evaluator record, other scores."""
    path = run_dir / "eval" / "eval.json"
    evaluation = json.loads(path.read_text())
    del evaluation["evaluator"], evaluation["checkpoint_identity"]
    evaluation["metrics"]["avg_at_n"] = 99.0
    path.write_text(json.dumps(evaluation))


def test_an_hf_evaluation_from_before_the_adapter_fix_is_evaluated_again_training_kept(finished, tmp_path,
                                                                                       tiny_cache):
    results = tmp_path / "results"
    shutil.copytree(finished, results)
    run_dir = run_dirs(results)[1]
    assert json.loads((run_dir / "eval" / "eval.json").read_text())["evaluator"] == {
        "backend": "hf", "serving": "hf unmerged adapter", "version": EVALUATOR_VERSIONS["hf unmerged adapter"],
        "grader": grader_identity()}
    as_before_the_hf_fix(run_dir)
    skipped = collect([str(results)]).skipped
    assert list(skipped["path"]) == [str(run_dir)] and PRE_FIX in skipped["reason"].iloc[0]  # never pooled
    proc = run_sweep(ARGS, results, tiny_cache)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    assert output.count("evaluating again from the final checkpoint (training kept)") == 1, output[-3000:]
    assert PRE_FIX in output
    assert phase_starts(run_dir, "train") == 1 and phase_starts(run_dir, "evaluate") == 2
    evaluation = json.loads((run_dir / "eval" / "eval.json").read_text())
    assert evaluation["metrics"]["avg_at_n"] != 99.0 and evaluation["evaluator"]["serving"] == "hf unmerged adapter"
    assert collect([str(results)]).skipped.empty


def test_a_recorded_evaluator_version_since_bumped_is_wrong_and_a_rewritten_checkpoint_is_stale(tmp_path):
    checkpoint = tmp_path / "checkpoint-2"
    checkpoint.mkdir()
    (checkpoint / "adapter_config.json").write_text("{}")
    (checkpoint / "adapter_model.safetensors").write_bytes(b"one")
    from opsd_sweep.run.identity import content_identity, evaluator_identity

    evaluation = {"backend": "vllm", "checkpoint": str(checkpoint), "evaluator": evaluator_identity("vllm", checkpoint, False),
                  "checkpoint_identity": content_identity(checkpoint)}
    assert evaluation_problem(evaluation, checkpoint, merge_lora=False) is None
    older = evaluation | {"evaluator": evaluation["evaluator"] | {"version": 0}}
    assert "has since been found wrong" in evaluation_problem(older, checkpoint, merge_lora=False)
    (checkpoint / "adapter_model.safetensors").write_bytes(b"two")
    assert evaluation_problem(evaluation, checkpoint, merge_lora=False) == "checkpoint-2 was rewritten since"
