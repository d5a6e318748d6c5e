"""Refuse a --metric whose meaning changes with the runs' K (samples per problem) before any statistics.

Runs of one sweep may differ in K: eval.n_samples=auto plans each run's K from the earlier runs' data, even
within one config, and eval.allocation=neyman gives each problem its own count n_i. The summary compares run
scores as estimates of one quantity, so the chosen metric must mean the same at every run's K:

- avg_at_n (and an eval suite's `pooled`, the rates, mean_tokens): a mean over samples, the same estimand at
  any K. Always allowed.
- pass_at_k: unbiased for the same quantity at any K >= k, and absent (no estimate) where a problem has fewer
  than k samples. Allowed when k <= every counted run's smallest per-problem count (samples_min; K for a
  uniform eval). Otherwise refused: the runs without it would leave silently, and those kept are a subset
  selected by their K, which auto chose from earlier runs' scores.
- maj_at_n: a majority vote over the run's own samples of a problem, so its expectation grows with the number
  of votes (maj@11 > maj@4 on the same model). Allowed only when every counted run drew the same K of every
  problem. Refused when the runs used more than one K, or any run has per-problem counts (an allocated eval:
  its vote on each problem is over that problem's own n_i, set by its own pilot).

A sweep that declares K as its own axis (eval.n_samples=4,11: each config's runs at one K) is refused for
maj_at_n like any other mix: the difference of two such configs is the effect of K on the vote, not of
training, and the verdicts would call it one. The fix named is to summarise each K apart (each K in its own
group), or to compare on avg_at_n. pass_at_k over such a sweep follows the pass_at_k rule above.

Runs without a recorded K (external CSV results) are not checked: their K is unknown here.

A score over the whole eval (a metric without a `<benchmark>.` prefix) means the same only over the same
problems: runs evaluated on other problems (an eval suite's tuning + locked sets beside runs of the tuning
set alone, another eval.max_problems) are refused too, naming each problem set and where its runs are.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import pandas as pd

# The metrics of scoring/metrics.py whose expectation depends on the number of samples drawn (not just on k).
K_DEPENDENT = ("maj_at_n",)
PASS_AT = re.compile(r"pass_at_(\d+)")
FIX_AVG = "Compare on avg_at_n (the mean solve rate: the same quantity at any K and any per-problem counts)."


def check_metric_scope(runs: pd.DataFrame, metric: str) -> None:
    """Raise ValueError naming the metric, the K values found (by config), why and the fix, when `metric`
    cannot be compared over the counted runs of `runs` (collect's runs table) at their K; else return."""
    name = metric.rsplit(".", 1)[-1]  # an eval suite's `<benchmark>.<metric>` is judged by its metric
    if "." not in metric:
        check_one_problem_set(runs, metric)
    runs = counted_runs_with_k(runs)
    if runs.empty:
        return
    if name in K_DEPENDENT:
        if metric in runs.columns:
            runs = runs[runs[metric].notna()]
        check_one_k(runs, metric)
    elif match := PASS_AT.fullmatch(name):
        check_enough_samples(runs, metric, int(match.group(1)))


def problem_set(evaluation: dict) -> tuple[str, str]:
    """(a digest of the problems an eval.json scored, what they are in words: 'tiny-arith-heldout (32) +
    tiny-arith-locked (27)'). A suite names a problem '<benchmark>/<id>', a single benchmark '<id>': both
    are read as (benchmark, id)."""
    pairs, sizes = [], {}
    for index, problem in enumerate(evaluation.get("problems") or []):
        benchmark = str(problem.get("benchmark") or evaluation.get("dataset") or "")
        pairs.append((benchmark, str(problem.get("id", index)).removeprefix(f"{benchmark}/")))
        sizes[benchmark] = sizes.get(benchmark, 0) + 1
    digest = hashlib.sha1(json.dumps(sorted(pairs)).encode()).hexdigest()[:12]
    return digest, " + ".join(f"{name or 'problems'} ({count})" for name, count in sizes.items())


def problem_sets(runs: pd.DataFrame, metric: str) -> list[tuple[str, pd.DataFrame]]:
    """[(the problems in words, its counted runs)] per set of problems the counted runs with a whole-eval
    `metric` scored, in the order found; [] when the metric is a benchmark's own (`<benchmark>.<metric>`)."""
    if "." in metric or "problem_set" not in runs.columns or metric not in runs.columns:
        return []
    counted = runs[runs["counts"].astype(bool)] if "counts" in runs.columns else runs
    counted = counted[counted["problem_set"].notna() & counted[metric].notna()]
    return [(group["problem_words"].iloc[0], group) for _, group in counted.groupby("problem_set", sort=False)]


def check_one_problem_set(runs: pd.DataFrame, metric: str) -> None:
    """A whole-eval score: every counted run with it must have scored the same problems."""
    sets = problem_sets(runs, metric)
    if len(sets) < 2:
        return
    where = []
    for words, group in sets:
        folders = ", ".join(sorted(set(group["source"]))) if "source" in group.columns else "?"
        where.append(f"{words}: {len(group)} run(s) in {folders}")
    raise ValueError(
        f"--metric {metric}: the runs scored {len(where)} different sets of problems; {'; '.join(where)}. A score "
        "over other problems is another quantity, so these runs cannot be compared on it. Summarise each set "
        "apart (give the summary the folders of one set, e.g. make summary RESULTS=<folder>), or compare an "
        "eval suite's runs on one benchmark's own metric (--metric <benchmark>.avg_at_n).")


def folders_apart(sets: list[tuple[str, pd.DataFrame]]) -> list[Path] | None:
    """The folder of each problem set's runs (the deepest one holding all of them), when each holds no run of
    another set, so that each set can be summarised apart in its own folder; None when two sets share one
    (their runs sit side by side in one group, or one set's folder holds the other's)."""
    folders = [Path(os.path.commonpath([str(Path(d).parent) for d in group["run_dir"]])) for _, group in sets
               if "run_dir" in group.columns and group["run_dir"].notna().all()]
    if len(folders) < len(sets):  # runs without a run dir (external results): no folder of their own
        return None
    for i, a in enumerate(folders):
        if any(a == b or a.is_relative_to(b) or b.is_relative_to(a) for b in folders[i + 1:]):
            return None
    return folders


def counted_runs_with_k(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs that count (collect's `counts`) and recorded their K, with a `smallest` column: the count of
    their least-sampled problem (samples_min; n_samples where absent)."""
    if "n_samples" not in runs.columns:
        return runs.iloc[0:0]
    counted = runs[runs["counts"].astype(bool)] if "counts" in runs.columns else runs
    counted = counted[counted["n_samples"].notna()]
    smallest = counted["samples_min"] if "samples_min" in counted.columns else counted["n_samples"]
    return counted.assign(smallest=smallest.fillna(counted["n_samples"]).astype(int),
                          n_samples=counted["n_samples"].astype(int))


def check_one_k(runs: pd.DataFrame, metric: str) -> None:
    """maj@K: every run must have drawn one K of every problem."""
    allocated = runs[runs["smallest"] != runs["n_samples"]]
    if not allocated.empty:
        raise ValueError(
            f"--metric {metric}: {len(allocated)} of the {len(runs)} runs drew a different number of "
            f"samples of each problem (eval.allocation=neyman): {by_config(allocated, per_problem=True)}. "
            "A majority vote depends on how many samples vote, so each problem's vote is over its own "
            "count, set by that run's pilot, and the runs' maj_at_n are not one quantity. "
            f"{FIX_AVG} Or summarise runs of a uniform eval of one K (eval.allocation=uniform, a declared "
            "eval.n_samples=K).")
    ks = sorted(set(runs["n_samples"]))
    if len(ks) == 1:
        return
    raise ValueError(
        f"--metric {metric}: the runs used {len(ks)} different K (samples per problem: "
        f"{', '.join(map(str, ks))}): {by_config(runs)}. maj@K, the majority vote over K samples, "
        "depends on K (a larger vote settles each problem on its most frequent answer, so maj@K rises "
        f"with K wherever that answer is the right one); here {why_k_differs(runs)}. {FIX_AVG} "
        f"Or pass_at_k with k <= {int(runs['smallest'].min())} (the smallest K). Or summarise each K "
        "apart: declare eval.n_samples=K (not auto) and run each K in its own group (group=...).")


def why_k_differs(runs: pd.DataFrame) -> str:
    if runs.groupby(labels_of(runs))["n_samples"].nunique().max() == 1:
        return ("each config is at one K, so K is a config axis: a difference of two configs is then K's "
                "effect on the vote, not training's")
    return (f"the K differs between runs of one config{auto_clause(runs)}, so a config whose runs drew "
            "more samples looks better")


def check_enough_samples(runs: pd.DataFrame, metric: str, k: int) -> None:
    """pass@k: every run must have at least k samples of each problem."""
    short = runs[runs["smallest"] < k]
    if short.empty:
        return
    raise ValueError(
        f"--metric {metric}: {len(short)} of the {len(runs)} runs have fewer than {k} samples of some "
        f"problem: {by_config(short, per_problem=True)}. pass@k needs K >= {k} samples of every "
        f"problem (of an allocated eval, its smallest per-problem count), so these runs have no {metric}: "
        "the summary would leave them out, and the runs kept would be a subset selected by their "
        f"K{auto_clause(short)}. Compare on pass_at_k with k <= {int(runs['smallest'].min())} (the "
        "smallest count of any run), or on avg_at_n (the same quantity at any K). Or summarise only runs "
        f"with K >= {k}: declare eval.n_samples={k} or more (not auto) in their own group.")


def auto_clause(runs: pd.DataFrame) -> str:
    """Why a run's K is not neutral, when eval.n_samples=auto chose it."""
    if "k_source" in runs.columns and (runs["k_source"] == "auto").any():
        return " (eval.n_samples=auto chose each run's K from the earlier runs' scores)"
    return ""


def by_config(runs: pd.DataFrame, per_problem: bool = False) -> str:
    """'label: K 4 (2 runs), 16 (1 run); ...' (per_problem: with a run's smallest per-problem count where it
    differs from K, 'K 8 (smallest count 2) (1 run)')."""
    parts = []
    for label, group in runs.groupby(labels_of(runs), sort=True):
        counts = group.groupby(["n_samples", "smallest"]).size()
        ks = [f"{n}" + (f" (smallest count {low})" if per_problem and low != n else "")
              + f" ({size} run{'s' if size > 1 else ''})" for (n, low), size in counts.items()]
        parts.append(f"{label}: K {', '.join(ks)}")
    return "; ".join(parts)


def labels_of(runs: pd.DataFrame) -> pd.Series:
    return runs["label"] if "label" in runs.columns else runs["run_id"]
