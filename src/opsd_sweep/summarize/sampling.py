"""The summary's account of samples per problem: which K each run used and why (eval.n_samples=auto), and the
per-problem counts of an allocation (eval.allocation=neyman), from runs.csv's sampling columns (collect.py)."""

from __future__ import annotations

import math

import pandas as pd

COLUMNS = ("n_samples", "k_source", "k_reason", "allocation", "allocation_reason", "samples_min", "samples_max")


def sampling_lines(runs: pd.DataFrame) -> list[str]:
    """Markdown lines: one sentence when every counted run of the sweep drew a declared K of every problem, else a
    table of each counted run's K, allocation and reasons, and how runs of different K are analysed together. []
    without the columns or without such runs (external results only: their rows are never described here)."""
    if not set(COLUMNS) <= set(runs.columns):
        return []
    usable = runs[runs["counts"].astype(bool)] if "counts" in runs else runs
    if "external" in usable:  # an external CSV's n_samples was planned elsewhere: no K, allocation or reason here
        usable = usable[~usable["external"].astype(bool)]
    usable = usable[usable["n_samples"].notna()]
    if usable.empty:
        return []
    planned = (usable["k_source"] == "auto") | (usable["allocation"] != "uniform")
    ks = sorted({int(k) for k in usable["n_samples"]})
    if not planned.any():
        which = f"K = {ks[0]}" if len(ks) == 1 else "K = " + ", ".join(map(str, ks))
        return [f"Samples per problem: {which} of every problem, as declared (eval.n_samples)."]
    lines = ["## Samples per problem", "",
             "Each run's K was fixed before it drew a sample (eval.n_samples=auto: from the sweep's earlier runs; "
             "eval.allocation=neyman: per-problem counts from a pilot of earlier runs, at the GPU cost of K samples of "
             "every problem). A config's mean is the unweighted mean of its run scores, each run's score the mean "
             "over problems of its per-problem solve rates, and each run's eval-sampling variance is computed at its "
             "own K and counts.", "",
             "| config | seed | K | per problem | why this K | allocation |", "|---|---|---|---|---|---|"]
    for _, row in usable.iterrows():
        spread = (f"{_whole(row['samples_min'])}" if row["samples_min"] == row["samples_max"]
                  else f"{_whole(row['samples_min'])}-{_whole(row['samples_max'])}")
        allocation = row["allocation"] + (f": {row['allocation_reason']}" if isinstance(row["allocation_reason"], str)
                                          else "")
        lines.append(f"| {row.get('label', row['run_id'])} | {_whole(row.get('cfg.seed'))} | {int(row['n_samples'])} "
                     f"| {spread} | {_cell(row['k_reason'])} | {_cell(allocation)} |")
    return lines


def _whole(value) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{int(value)}"


def _cell(text: str) -> str:
    return str(text).replace("|", "/").replace("\n", " ")
