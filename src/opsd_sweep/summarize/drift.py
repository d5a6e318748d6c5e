"""The reasoning-style drift signal: how often a run's stored eval completions say "wait", "hmm", "let me check"
and the other uncertainty and self-check markers of conf/drift_markers.yaml, per 1,000 generated tokens, beside
its mean completion length (eval.json's mean_tokens) and its share of samples cut at the length cap
(eval_cap_frac, summarize/caps.py). Self-distillation is reported to suppress these markers (arXiv 2603.24472)
before accuracy shows it. summary.md compares each config with the in-sweep baseline; no verdict and not the
collapse rule use it (nothing yet shows that it predicts a collapse).

Training rollouts are not counted: the trainer logs their lengths and cap hits (metrics.jsonl), not their text."""

from __future__ import annotations

import functools
import json
import math
import re
from pathlib import Path

import pandas as pd
from omegaconf import OmegaConf

from opsd_sweep import CONF_DIR

MARKERS_FILE = CONF_DIR / "drift_markers.yaml"
RATE = "eval_markers_per_1k"  # runs.csv: markers per 1,000 eval tokens
LENGTH = "mean_tokens"        # runs.csv: the evaluator's mean completion length (scoring/metrics.py)
CAP = "eval_cap_frac"         # runs.csv: the share of eval samples cut at eval.max_new_tokens (summarize/caps.py)


@functools.lru_cache(maxsize=4)
def marker_pattern(path: Path = MARKERS_FILE) -> re.Pattern:
    """One pattern matching any marker of `path` between word boundaries, for lowercased text. Raises ValueError
    naming the file and the entry that is not a lowercase regular expression."""
    entries = OmegaConf.to_container(OmegaConf.load(path)).get("markers")
    if not isinstance(entries, list) or not entries:
        raise ValueError(f"{path}: `markers` must be a non-empty list of lowercase regular expressions")
    for entry in entries:
        if not isinstance(entry, str) or not entry.strip() or entry != entry.lower():
            raise ValueError(f"{path}: marker {entry!r} must be a non-empty lowercase regular expression (text is "
                             "lowercased before matching)")
        try:
            re.compile(entry)
        except re.error as err:
            raise ValueError(f"{path}: marker {entry!r} is not a regular expression ({err})") from None
    return re.compile(r"\b(?:" + "|".join(f"(?:{entry})" for entry in entries) + r")\b")


def count_markers(text: str, pattern: re.Pattern | None = None) -> int:
    """How many markers one completion holds (case-insensitive, whole words)."""
    return sum(1 for _ in (pattern or marker_pattern()).finditer(text.lower()))


def markers_per_1k(eval_dir: Path, evaluation: dict) -> float:
    """Markers per 1,000 generated tokens over the eval's samples whose text completions.jsonl stores (tokens:
    each sample's n_tokens); nan without completions.jsonl or tokens."""
    path = eval_dir / "completions.jsonl"
    if not path.is_file():
        return math.nan
    tokens = {(str(p.get("id")), s): sample.get("n_tokens") for p in evaluation.get("problems") or []
              for s, sample in enumerate(p.get("samples") or [])}
    pattern, markers, counted = marker_pattern(), 0, 0
    with path.open() as lines:
        for line in lines:
            row = json.loads(line)
            n_tokens = tokens.get((str(row.get("id")), row.get("sample")))
            if isinstance(n_tokens, int) and n_tokens > 0:
                markers += count_markers(str(row.get("text", "")), pattern)
                counted += n_tokens
    return 1000 * markers / counted if counted else math.nan


def drift_columns(eval_dir: Path, evaluation: dict | None) -> dict:
    """runs.csv's drift column beside mean_tokens and eval_cap_frac (which collect writes already)."""
    return {RATE: markers_per_1k(eval_dir, evaluation) if evaluation is not None else math.nan}


def config_drift(runs: pd.DataFrame) -> pd.DataFrame:
    """Per config (label) of the run-dir runs that count: runs, mean length, cap-hit share, markers per 1k tokens
    (each the mean over its runs that have it)."""
    if RATE not in runs or "label" not in runs:
        return pd.DataFrame()
    own = runs[runs["counts"].astype(bool) & ~runs["external"].astype(bool) & runs[RATE].notna()]
    columns = [c for c in (LENGTH, CAP, RATE) if c in own]
    return own.groupby("label", sort=True).agg(runs=(RATE, "size"), **{c: (c, "mean") for c in columns})


def summary_section(runs: pd.DataFrame, baseline: str | None) -> list[str]:
    """summary.md's '## Reasoning-style drift' lines: a table of each config's mean length, cap-hit share and
    markers per 1k tokens, each against the in-sweep baseline's; [] when no counted run stored its completions."""
    table = config_drift(runs)
    if table.empty:
        return []
    base = table.loc[baseline] if baseline in table.index else None
    rows = []
    for label, row in table.iterrows():
        versus = "(the baseline)" if label == baseline else _versus(row, base) if base is not None else "no baseline"
        rows.append(f"| {label} | {int(row['runs'])} | {_num(row.get(LENGTH), 0)} | {_share(row.get(CAP))} | "
                    f"{_num(row[RATE], 2)} | {versus} |")
    why = ("no in-sweep baseline to compare with (--baseline names one)" if base is None else
           f"each config against the in-sweep baseline {baseline}")
    return ["## Reasoning-style drift", "",
            f"Per config, the mean over its counted runs of: eval completion length (tokens), the share of eval samples "
            f"cut at eval.max_new_tokens, and uncertainty / self-check markers (\"wait\", \"hmm\", \"let me check\", "
            f"...: {MARKERS_FILE.name}) per 1,000 eval tokens; {why}. Self-distillation is reported to suppress these "
            "markers before accuracy shows it (arXiv 2603.24472): a config far below its baseline's rate may be "
            "turning into a short-answer model. A signal to read, not a verdict: no test and not the collapse rule "
            f"use it. runs.csv has each run's ({LENGTH}, {CAP}, {RATE}); training rollouts are not counted (their "
            "text is not logged).", "",
            "| config | runs | mean length | cap-hit | markers / 1k tokens | vs baseline |",
            "|---|---|---|---|---|---|", *rows]


def _versus(row: pd.Series, base: pd.Series) -> str:
    """'length x0.62, cap-hit -3 pts, markers x0.05' against the baseline's row; '?' where either lacks a figure."""
    parts = [f"length {_ratio(row.get(LENGTH), base.get(LENGTH))}",
             f"cap-hit {_points(row.get(CAP), base.get(CAP))}",
             f"markers {_ratio(row[RATE], base[RATE])}"]
    return ", ".join(parts)


def _known(value) -> bool:
    return isinstance(value, (int, float)) and not math.isnan(value)


def _ratio(value, reference) -> str:
    """value / reference, or the difference where the baseline has none of it (no ratio to a zero rate)."""
    if not (_known(value) and _known(reference)):
        return "?"
    return f"x{value / reference:.2f}" if reference > 0 else f"{value - reference:+.2f} (the baseline has none)"


def _points(value, reference) -> str:
    return f"{100 * (value - reference):+.0f} pts" if _known(value) and _known(reference) else "?"


def _num(value, digits: int) -> str:
    return f"{value:,.{digits}f}" if _known(value) else "?"


def _share(value) -> str:
    return f"{value:.0%}" if _known(value) else "?"
