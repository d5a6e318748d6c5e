"""Which grader graded the runs. A run graded by another grader than today's (another math-verify, other grading
rules of scoring/grade.py, or none recorded) enters no statistic (run.identity.grader_problem, through
run.record.RunRecord.left_out), so no metric pools scores graded two ways; summary.md and the console name those
runs' graders beside today's, and the command that grades their stored completions again on CPU."""

from __future__ import annotations

import pandas as pd

from opsd_sweep.scoring.grade import grader_identity
from opsd_sweep.run.identity import grader_label

COMMAND = "python -m opsd_sweep.evaluate regrade"


def graded_apart(runs: pd.DataFrame) -> dict[str, int]:
    """Runs graded by another grader than today's: their grader (in words) -> how many."""
    if "grader_problem" not in runs or "grader" not in runs:
        return {}
    apart = runs[runs["grader_problem"].notna() & runs["grader_problem"].astype(bool)]
    return {str(grader): len(group) for grader, group in apart.groupby("grader", sort=True)}


def statement(runs: pd.DataFrame, roots: list[str]) -> str | None:
    """The sentence naming the runs graded another way, by grader, today's grader and the fix; None: none."""
    apart = graded_apart(runs)
    if not apart:
        return None
    total = sum(apart.values())
    which = "; ".join(f"{n} by {grader}" for grader, n in apart.items())
    were, enter = ("runs were", "enter") if total != 1 else ("run was", "enters")
    return (f"{total} {were} graded by another grader than today's ({grader_label(grader_identity())}) and "
            f"{enter} no statistic, so no metric pools scores graded two "
            f"ways: {which}. Grade their stored completions again (CPU, nothing generated; the old scores are kept "
            f"in eval.json under regraded_from): {COMMAND} {' '.join(roots)}")
