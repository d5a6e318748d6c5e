"""The grader in every run's identity (issue 51): eval.json names the grader that graded it; a run graded by another
grader (faked here by editing its record) enters no statistic, and the summary names both graders and the fix;
`python -m opsd_sweep.evaluate regrade` grades its stored completions again on CPU and keeps the old scores.
Runs are hand-built (opsd_sweep/testing/rundirs.py, tests/premises.fix_outcomes): every grade is fixed by construction."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from opsd_sweep.testing.rundirs import draw_correct, write_run
from opsd_sweep.scoring.grade import grader_identity
from opsd_sweep.scoring.metrics import compute_metrics
from opsd_sweep.evaluate.regrade import main as regrade_main
from opsd_sweep.evaluate.standalone import evaluate_standalone, locate_eval_dir
from opsd_sweep.run.identity import grader_label
from opsd_sweep.run.record import RunRecord
from opsd_sweep.run.rundir import read_json
from opsd_sweep.summary import main as summary_main
from tests.evaluate.conftest import eval_run, evaluate_cli
from tests.premises import fix_outcomes

OLD_GRADER = {"math_verify": "0.7.0", "rules": 1}
DIFFICULTY = np.random.default_rng(0).normal(0.0, 1.5, 30)


def graded_by_an_older_grader(run_dir, grader=OLD_GRADER) -> dict:
    """Give a built run the grades an older grader gave: every sample right (avg@n 100), its record naming that
    grader (or none: grader=None). Its completions.jsonl holds what fix_outcomes wrote: the truth is in there."""
    evaluation = read_json(run_dir.eval_json)
    for problem in evaluation["problems"]:
        for sample in problem["samples"]:
            sample["correct"] = True
    evaluation["metrics"] = compute_metrics(evaluation["problems"])
    if grader is None:
        del evaluation["evaluator"]
    else:
        evaluation["evaluator"]["grader"] = grader
    run_dir.eval_json.write_text(json.dumps(evaluation))
    return evaluation


def summary_of(root, out) -> pd.DataFrame:
    summary_main([str(root), "--out", str(out), "--anchor", "none", "--no-plots", "--baseline", "lr=1e-05"])
    return pd.read_csv(out / "summary.csv").set_index("label")


def test_a_tiny_evaluation_records_todays_grader_and_a_rerun_grades_again_without_drawing(tiny_world, tmp_path):
    run = eval_run(tiny_world, tmp_path / "results")
    first = evaluate_standalone(run)
    assert first["evaluator"]["grader"] == grader_identity()
    assert set(grader_identity()) == {"math_verify", "rules"}
    _, run_dir = locate_eval_dir(run)
    texts = (run_dir.eval_dir / "completions.jsonl").read_text()
    graded_by_an_older_grader(run_dir)
    again = evaluate_standalone(run)  # same plan: its samples are graded again, none is drawn
    assert again["evaluator"]["grader"] == grader_identity()
    assert again["problems"] == first["problems"] and again["metrics"] == first["metrics"]
    assert again["regraded_from"][-1]["grader"] == OLD_GRADER
    assert (run_dir.eval_dir / "completions.jsonl").read_text() == texts
    assert again["timing"] == first["timing"]


def test_a_run_graded_by_another_grader_is_kept_out_until_regrade_restores_it(tmp_path, capsys):
    rng = np.random.default_rng(1)
    root = tmp_path / "results"
    for lr in (1e-5, 2e-5):
        for seed in (1, 2, 3):
            write_run(root / "g", learning_rate=lr, seed=seed, correct=draw_correct(rng, DIFFICULTY, 0.0, 4), rng=rng)
    before = summary_of(root, tmp_path / "before")
    other = write_run(root / "g", learning_rate=2e-5, seed=4, correct=draw_correct(rng, DIFFICULTY, 0.0, 4), rng=rng)
    solved = [int(s) for s in rng.integers(0, 5, 30)]
    truth = fix_outcomes(other.eval_json, solved)  # its completions box the right answer in solved[i] samples
    graded_by_an_older_grader(other)

    assert RunRecord.read(other.path).counts is False
    after = summary_of(root, tmp_path / "after")
    assert after.loc["lr=2e-05", "n"] == 3  # its avg@n of 100 is in no statistic
    assert after.loc["lr=2e-05", "mean"] == pytest.approx(before.loc["lr=2e-05", "mean"])
    today, old = grader_label(grader_identity()), grader_label(OLD_GRADER)
    report = (tmp_path / "after" / "summary.md").read_text()
    for said in (report, capsys.readouterr().out):  # both graders and the fix, in summary.md and on the console
        assert f"1 by {old}" in said and f"today's ({today})" in said
        assert f"python -m opsd_sweep.evaluate regrade {root}" in said
    runs = pd.read_csv(tmp_path / "after" / "runs.csv")
    mine = runs[runs["run_dir"] == str(other.path)].iloc[0]
    assert not mine["counts"] and old in mine["left_out"] and mine["grader"] == old

    regrade = evaluate_cli(["regrade", str(root)])
    output, _ = regrade.communicate(timeout=300)
    assert regrade.returncode == 0, output
    assert f"1 eval.json graded again by {today}" in output and "6 left as they are" in output
    regraded = read_json(other.eval_json)
    assert regraded["evaluator"]["grader"] == grader_identity()
    assert regraded["metrics"] == truth["metrics"] and regraded["problems"] == truth["problems"]
    kept = regraded["regraded_from"][-1]  # the old scores, beside the new ones
    assert kept["grader"] == OLD_GRADER and kept["metrics"]["avg_at_n"] == 100.0
    assert len(kept["changed_samples"]) == 30 * 4 - sum(solved)
    assert all(change["was"]["correct"] is True for change in kept["changed_samples"])
    restored = summary_of(root, tmp_path / "restored")
    assert restored.loc["lr=2e-05", "n"] == 4
    assert "graded by another grader" not in (tmp_path / "restored" / "summary.md").read_text()


def test_an_eval_json_without_a_grader_is_unrecorded_and_regrade_fixes_it(tmp_path, capsys):
    run_dir = write_run(tmp_path / "g", learning_rate=1e-5, seed=1, correct=np.zeros((30, 2), dtype=bool))
    fix_outcomes(run_dir.eval_json, [1] * 30)
    graded_by_an_older_grader(run_dir, grader=None)  # written before graders were recorded
    record = RunRecord.read(run_dir.path)
    assert not record.counts and "graded by unrecorded (graded before graders were recorded)" in record.left_out
    regrade_main([str(run_dir.path)])
    regraded = read_json(run_dir.eval_json)
    assert regraded["evaluator"] == {"grader": grader_identity()}  # its grader alone: no serving is guessed
    assert regraded["regraded_from"][-1]["grader"] == "unrecorded" and regraded["metrics"]["avg_at_n"] == 50.0
    assert RunRecord.read(run_dir.path).counts
    regrade_main([str(run_dir.path)])  # graded by today's grader now: left as it is
    assert len(read_json(run_dir.eval_json)["regraded_from"]) == 1
    assert "0 eval.json graded again" in capsys.readouterr().out


def test_regrade_without_stored_completions_names_the_file_and_exits_1(tmp_path, capsys):
    run_dir = write_run(tmp_path / "g", learning_rate=1e-5, seed=1, correct=np.ones((30, 2), dtype=bool))
    graded_by_an_older_grader(run_dir)
    with pytest.raises(SystemExit) as exit:
        regrade_main([str(tmp_path)])
    assert exit.value.code == 1
    out = capsys.readouterr().out
    assert f"cannot regrade: {run_dir.eval_json}: no completions.jsonl beside it" in out
    assert read_json(run_dir.eval_json)["evaluator"]["grader"] == OLD_GRADER  # untouched
