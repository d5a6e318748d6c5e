"""Length caps in the summary: per config, the share of its training rollouts cut at rollout.max_new_tokens and of
its eval samples cut at eval.max_new_tokens (runs.csv's rollout_cap_frac and eval_cap_frac), and a warning naming
the knob when most were cut. A cut rollout trains the student on a completion without its end: in a
thinking-enabled reproduction nearly every rollout hit the 1,024-token cap and OPSD lost points (issue 41)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

MOST = 0.5  # a config whose mean share of cut generations is above this is warned about


@dataclass(frozen=True)
class Phase:
    """One kind of generation that a cap cuts: its runs.csv columns (summarize.collect.cap_columns) and knobs."""
    what: str      # what is cut, in the sentence
    fraction: str  # runs.csv: the run's share cut
    cap: str       # runs.csv: the run's cap
    thinking: str  # runs.csv: the run's thinking switch for this generation
    knob: str      # the config key of the cap
    switch: str    # the config key of the thinking switch
    thinker: str   # whose thinking the switch turns off, in the sentence
    harm: str      # what a cut generation does
    raise_also: str = ""  # what else to raise with the cap


ROLLOUT = Phase("rollouts", "rollout_cap_frac", "rollout_max_new_tokens", "student_thinking", "rollout.max_new_tokens",
                "train.student_thinking", "student", "the student learns from cut-off completions")
EVAL = Phase("eval samples", "eval_cap_frac", "eval_max_new_tokens", "eval_thinking", "eval.max_new_tokens",
             "eval.thinking", "eval", "a cut-off sample seldom holds its final answer, so the score measures the "
                                      "cap as much as the model", " (and eval.max_model_len on vllm)")
PHASES = (ROLLOUT, EVAL)


@dataclass(frozen=True)
class ConfigCap:
    """One config's share of one phase's generations cut at its cap: the mean over its runs that have one."""
    label: str
    fraction: float
    runs: int
    cap: str             # the cap, or its values joined by '/' when the runs differ
    thinking: bool | None  # None when unknown or mixed


def config_caps(runs: pd.DataFrame, phase: Phase) -> list[ConfigCap]:
    """Per config (label, sorted), the mean of its run-dir runs' share cut; configs without one are left out."""
    if phase.fraction not in runs or "label" not in runs:
        return []
    own = runs[~runs["external"].astype(bool)] if "external" in runs else runs
    measured = own[own[phase.fraction].notna()]
    caps = []
    for label, group in measured.groupby("label", sort=True):
        thinking = {bool(v) for v in group.get(phase.thinking, ()) if isinstance(v, (bool, np.bool_))}
        values = sorted({_number(v) for v in group.get(phase.cap, ()) if _known(v)})
        caps.append(ConfigCap(str(label), float(group[phase.fraction].mean()), len(group),
                              "/".join(str(v) for v in values) or "?",
                              thinking.pop() if len(thinking) == 1 else None))
    return caps


def warning(cap: ConfigCap, phase: Phase) -> str:
    """The sentence for a config most of whose generations hit the cap; the thinking switch is named unless the
    config already has it off."""
    fix = f"raise {phase.knob}{phase.raise_also}"
    if cap.thinking is not False:
        fix += f" or turn off {phase.thinker} thinking ({phase.switch})"
    return f"most {phase.what} of {cap.label} ({cap.fraction:.0%}) hit {phase.knob}={cap.cap}: {phase.harm}; {fix}"


def warnings(runs: pd.DataFrame) -> list[str]:
    """One warning per config and phase whose mean share cut is above MOST."""
    return [warning(cap, phase) for phase in PHASES for cap in config_caps(runs, phase) if cap.fraction > MOST]


def console_line(runs: pd.DataFrame) -> str | None:
    """The console's cap warnings in one line; None when no config hit its caps most of the time."""
    found = warnings(runs)
    return f"length caps: {'; '.join(found)}" if found else None


def summary_section(runs: pd.DataFrame) -> list[str]:
    """summary.md's '## Length caps' lines: per config, the share of its rollouts and eval samples cut at their
    caps, with the cap and thinking switch, then the warnings; [] when no run measured either."""
    per_phase = {phase: {cap.label: cap for cap in config_caps(runs, phase)} for phase in PHASES}
    labels = sorted(set().union(*(caps.keys() for caps in per_phase.values())))
    if not labels:
        return []
    lines = ["## Length caps", "",
             f"The share of each config's {ROLLOUT.what} cut at {ROLLOUT.knob} (per run, the mean over its training "
             f"steps) and of its {EVAL.what} cut at {EVAL.knob} (finish_reason 'length'), averaged over its runs; "
             f"runs.csv has each run's ({ROLLOUT.fraction}, {EVAL.fraction}). Above {MOST:.0%} a config is warned "
             "about; configs whose caps cut different shares are compared on their caps as well as their knobs.",
             ""]
    for label in labels:
        parts = [_describe(per_phase[phase][label], phase) for phase in PHASES if label in per_phase[phase]]
        lines.append(f"- {label}: {'; '.join(parts)}")
    if found := warnings(runs):
        lines += ["", *[f"- **Warning**: {x}" for x in found]]
    return lines


def _describe(cap: ConfigCap, phase: Phase) -> str:
    thinking = {True: "on", False: "off", None: "mixed or unknown"}[cap.thinking]
    return (f"{phase.what} {cap.fraction:.0%} cut at {phase.knob}={cap.cap} ({phase.switch}: {thinking}; "
            f"{cap.runs} run{'s' if cap.runs != 1 else ''})")


def _known(value) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def _number(value):
    """1024.0 (a cap in a column that also holds NaN) -> 1024."""
    return int(value) if isinstance(value, float) and value.is_integer() else value
