"""Collapsed runs in the summary and the race report: per config, how many seeds collapsed and at which
steps, by the rule the trainer stops on (opsd_sweep.collapse), applied to every run's metrics.jsonl."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
from omegaconf.errors import OmegaConfBaseException

from opsd_sweep.collapse import collapse_count, find_collapse, rule_of
from opsd_sweep.run.rundir import RunDir

RULE = ("a run collapsed at the first of `train.collapse.patience` steps in a row whose kl_true, rollout length "
        "or truncation left the band of its first `early_steps` steps (train.collapse; src/opsd_sweep/collapse.py)")


def collapse_columns(config: dict, steps: list[dict]) -> dict:
    """runs.csv's collapse_step (NaN: no collapse, or no training) and collapse_reason of one run."""
    if not steps:
        return {"collapse_step": math.nan, "collapse_reason": None}
    try:
        rule = rule_of(config)
    except (KeyError, TypeError, OmegaConfBaseException) as err:  # a hand-edited config.yaml: judge nothing, say why
        return {"collapse_step": math.nan, "collapse_reason": f"no usable train.collapse in config.yaml ({err!r})"[:200]}
    found = find_collapse(steps, rule)
    return {"collapse_step": found.step if found else math.nan, "collapse_reason": found.reason if found else None}


def collapse_of_dir(path: str) -> float | None:
    """The collapse step of a run dir (NaN: it trained and did not collapse; None: no training steps to
    judge, e.g. a simulated run, or a dir that does not read)."""
    from opsd_sweep.summarize.collect import UnreadableRun, read_config

    run_dir = RunDir(Path(path))
    try:
        steps = run_dir.training_steps()
        return collapse_columns(read_config(run_dir), steps)["collapse_step"] if steps else None
    except (UnreadableRun, OSError, KeyError):
        return None


def per_config(steps: pd.DataFrame) -> list[str]:
    """One sentence per config from rows (label, collapse_step) of its trained runs."""
    return [f"{label}: {collapse_count(len(group), [int(s) for s in group['collapse_step'].dropna()])}"
            for label, group in steps.groupby("label", sort=True)]


def trained_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs that logged training steps (collapsed runs stopped early included; base models are not)."""
    if "collapse_step" not in runs or "train.steps" not in runs:
        return runs.iloc[0:0]
    return runs[runs["train.steps"].notna()]


def console_line(runs: pd.DataFrame) -> str | None:
    trained = trained_runs(runs)
    return f"collapse (train.collapse): {'; '.join(per_config(trained))}" if not trained.empty else None


def summary_section(runs: pd.DataFrame) -> list[str]:
    """summary.md's '## Collapse' lines over every trained run (collapsed runs stopped early included)."""
    trained = trained_runs(runs)
    if trained.empty:
        return []
    stopped = int((trained["state"] == "collapsed").sum())
    lines = ["## Collapse", "", f"By the rule the trainer can stop on: {RULE}. A config that collapses in k of n "
             "seeds is a finding about the config, not noise.", "", *[f"- {x}" for x in per_config(trained)]]
    if stopped:
        lines += ["", f"{stopped} run(s) were stopped at their collapse (train.stop_on_collapse) and have no score: "
                      "the verdicts above use only the seeds of their config that did not collapse."]
    return lines


RACE_JUDGES_COLLAPSES = (
    "The race counts a collapsed seed as one of its config's seeds and does not replace it (a collapse is a "
    "finding about the config, not a failure). It judges configs as the summary does: a run stopped at "
    "its collapse (train.stop_on_collapse) has no score, so its config is judged on its other seeds (and "
    "leaves the race when every seed collapsed); a collapsed run that trained on keeps its score in its "
    "config's mean but stays out of the pooled run-to-run SD (the summary's pool leaves it out too, unless "
    "--pool-include collapsed; the race has no such switch).")


def race_lines(run_dirs: dict[str, list[str]]) -> list[str]:
    """The race report's collapse lines: per config, its race runs' collapses (run dirs from race.jsonl)."""
    rows = [{"label": config, "collapse_step": step} for config, paths in run_dirs.items() for path in paths
            if (step := collapse_of_dir(path)) is not None]
    if not rows:
        return []
    table = pd.DataFrame(rows)
    if table["collapse_step"].isna().all():
        return [f"No run of the race collapsed ({RULE})."]
    return [f"Collapses ({RULE}):", "", *[f"- {x}" for x in per_config(table)], "",
            RACE_JUDGES_COLLAPSES]

