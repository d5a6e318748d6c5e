"""Collapsed runs in the summary and the race report: per config, how many seeds collapsed and at which
steps, by the rule the trainer stops on (opsd_sweep.run.collapse), applied to every run's metrics.jsonl."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from opsd_sweep.run.collapse import collapse_count
from opsd_sweep.run.record import CollapseFinding, RunRecord, UnreadableRun

WITHHELD = "withheld"  # the verdict of a config judged only on its survivors

RULE = ("a run collapsed at the first of `train.collapse.patience` steps in a row whose kl_true, rollout length "
        "or truncation left the band of its first `early_steps` steps (train.collapse; src/opsd_sweep/run/collapse.py)")


def collapse_columns(finding: CollapseFinding) -> dict:
    """runs.csv's collapse_step (NaN: no collapse, or not judged), collapse_reason and collapse_judged
    (False: no training steps, or too few for the rule to fire; collapse_reason then says why)."""
    step = finding.step if finding.step is not None else math.nan
    return {"collapse_step": step, "collapse_reason": finding.reason or finding.why_not,
            "collapse_judged": finding.judged}


def collapse_of_dir(path: str) -> CollapseFinding | None:
    """The collapse finding of a run dir; None when it logged no training steps (e.g. a simulated run) or
    does not read."""
    try:
        record = RunRecord.read(Path(path))
    except (UnreadableRun, OSError):
        return None
    return record.collapse if record.steps else None


def per_config(steps: pd.DataFrame) -> list[str]:
    """One sentence per config from rows (label, collapse_step, collapse_judged, collapse_reason) of its
    trained runs: collapses over the runs the rule could judge, the others named."""
    lines = []
    for label, group in steps.groupby("label", sort=True):
        group = one_row_per_seed(group)
        judged = group[group["collapse_judged"].astype(bool)]
        not_judged = [str(why) for why in group.loc[~group["collapse_judged"].astype(bool), "collapse_reason"]]
        lines.append(f"{label}: {collapse_count(len(judged), [int(s) for s in judged['collapse_step'].dropna()], not_judged)}")
    return lines


def one_row_per_seed(group: pd.DataFrame) -> pd.DataFrame:
    """A config's seed run in two dirs (a failed copy in one group, the finished one in another) is one seed:
    the copy that counts, else the last listed."""
    if "cfg.seed" not in group or "counts" not in group:
        return group
    return group.sort_values("counts", kind="stable").drop_duplicates("cfg.seed", keep="last")


def trained_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs that logged training steps (collapsed runs stopped early included; base models are not)."""
    if "collapse_step" not in runs or "train.steps" not in runs:
        return runs.iloc[0:0]
    return runs[runs["train.steps"].notna()]


def console_line(runs: pd.DataFrame) -> str | None:
    trained = trained_runs(runs)
    return f"collapse (train.collapse): {'; '.join(per_config(trained))}" if not trained.empty else None


def summary_section(runs: pd.DataFrame, collapsed_score: float | None) -> list[str]:
    """summary.md's '## Collapse' lines over every trained run (collapsed runs stopped early included)."""
    trained = trained_runs(runs)
    if trained.empty:
        return []
    stopped = int((trained["state"] == "collapsed").sum())
    lines = ["## Collapse", "", f"By the rule the trainer can stop on: {RULE}. A config that collapses in k of n "
             "seeds is a finding about the config, not noise. A run stopped before the rule could fire is not "
             "judged either way.", "", *[f"- {x}" for x in per_config(trained)]]
    if stopped and collapsed_score is not None:
        lines += ["", f"{stopped} run(s) were stopped at their collapse (train.stop_on_collapse): each enters its "
                      f"config's statistics at the declared score {collapsed_score:g} (--collapsed-score)."]
    elif stopped:
        lines += ["", f"{stopped} run(s) were stopped at their collapse (train.stop_on_collapse) and have no score. "
                      "A config judged on the seeds that did not collapse would be judged on its survivors, so "
                      f"its verdict is {WITHHELD}: declare the score a stopped run counts with "
                      "(--collapsed-score 0), or rerun those seeds with train.stop_on_collapse=false."]
    return lines


RACE_JUDGES_COLLAPSES = (
    "The race counts a collapsed seed as one of its config's seeds and does not replace it (a collapse is a "
    "finding about the config, not a failure). It judges configs as the summary does: a run stopped at "
    "its collapse (train.stop_on_collapse) enters at hydra.sweeper.collapsed_score, and without one its "
    "config leaves the race (judged on its other seeds, it would be judged on its survivors); a collapsed run "
    "keeps its score in its config's mean but stays out of the pooled run-to-run SD (the summary's pool "
    "leaves it out too, unless --pool-include collapsed; the race has no such switch).")


def race_lines(run_dirs: dict[str, list[str]]) -> list[str]:
    """The race report's collapse lines: per config, its race runs' collapses (run dirs from race.jsonl)."""
    rows = [{"label": config} | collapse_columns(found) for config, paths in run_dirs.items() for path in paths
            if (found := collapse_of_dir(path)) is not None]
    if not rows:
        return []
    table = pd.DataFrame(rows)
    if table["collapse_step"].isna().all():
        return [f"No run of the race collapsed ({RULE})."]
    return [f"Collapses ({RULE}):", "", *[f"- {x}" for x in per_config(table)], "",
            RACE_JUDGES_COLLAPSES]

