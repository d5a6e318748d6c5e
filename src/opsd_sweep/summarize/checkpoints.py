"""Every checkpoint of a run evaluated (eval.checkpoints=all): score vs step, honestly summarised.

Per config (unit of replication: the training run, intervals are t-intervals over runs):
  final     the last checkpoint's score, what the main table tests;
  last-k    each run's mean over its last `eval.average_last` checkpoints (averaging cuts eval noise);
  best      the step with the top mean is a maximum over steps, biased upward: by eval sampling and by
            each run's own ups and downs from step to step (training noise). So the choice is crossed
            over runs: each run is scored at the step the *other* runs' mean picks (leave one run out),
            and nothing of that run took part in its step's choice. The mean of these scores estimates
            the expected score of a run whose checkpoint step is chosen by this rule from other runs
            (needs >= 2 runs). Its interval is not a plain t-interval over the runs: each run's data also
            chose the other runs' steps, which correlates their scores (most when the steps are alike);
            crossover_interval prices that in. The naive maximum is shown next to it; their
            gap is the selection effect. (Choosing on even eval samples and scoring on odd ones of the
            same runs, as before, left the training noise in both halves: +1.9 points of bias at 2.8
            points of run x step noise, benchmarks/bench_checkpoint_choice.py.)
With eval.checkpoints=race (evaluate/race_rule.py) the checkpoints of a run got unequal samples, and
how many depended on that run's own draws: a checkpoint stopped early stopped because its first samples
were low, so its score (and, diluted, a survivor's) is biased by the race. The cross-run rule then
chooses each run's step on the other runs' scores over all their samples (that is what the race's extra
samples are for) but scores the held-out run on its first-round samples only (`first_round`: the same
first_samples per problem at every checkpoint, drawn before the race dropped any, so nothing selected
them). last k, the naive best and the plot use the first-round scores too; *final* is the final
checkpoint's full evaluation, which the race never shortens.
Input: the runs table of analysis.collect; each run's eval/eval.json (final checkpoint) and
eval/checkpoint-<step>/eval.json (the earlier ones).
"""

from __future__ import annotations

import dataclasses
import math
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
from opsd_sweep.evaluate.checkpoint_race import correct_counts
from opsd_sweep.scoring.metrics import per_problem_mean
from opsd_sweep.inference import stats
from opsd_sweep.run.rundir import RunDir, read_json


def step_of(evaluation: dict) -> int | None:
    """The training step of the checkpoint an eval.json evaluated (None: not a training checkpoint)."""
    name = Path(evaluation.get("checkpoint") or "").name
    step = name.removeprefix("checkpoint-")
    return int(step) if name.startswith("checkpoint-") and step.isdigit() else None


def checkpoint_score(evaluation: dict) -> float:
    """avg@n in percent from the raw samples, as eval.json's metrics score it: the mean over problems of each
    problem's solve rate, so an allocated evaluation (eval.allocation=neyman, each problem its own count) weighs
    every problem the same, not the problems it drew more of."""
    return 100 * per_problem_mean([np.array([s["correct"] for s in p["samples"]], dtype=float)
                                   for p in evaluation["problems"]])


COLUMNS = ["run_id", "label", "checkpoint_step", "mode", "average_last", "samples", "score", "first_round"]


def collect_checkpoints(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per run that counts (collect's `counts`) and evaluated checkpoint: run_id, label, checkpoint_step, mode
    (eval.checkpoints), average_last, samples (per problem), score (over them) and first_round (over the
    race's first-round samples; = score unless raced). Only runs with more than one evaluated checkpoint
    appear (external results, which have no run dir, never do)."""
    rows = []
    for run in runs.loc[runs["counts"].astype(bool) & runs["run_dir"].notna()].itertuples():
        run_dir = RunDir(Path(run.run_dir))
        files = sorted(run_dir.eval_dir.glob("checkpoint-*/eval.json"))
        if not files or not run_dir.eval_json.exists():
            continue
        settings = run_dir.read_config_dict()["eval"]
        first = settings["checkpoint_race"]["first_samples"] if settings["checkpoints"] == "race" else None
        for path in [*files, run_dir.eval_json]:
            evaluation = read_json(path)
            score = checkpoint_score(evaluation)
            first_round = score if first is None else 100 * correct_counts(evaluation, first).mean() / first
            rows.append({"run_id": run.run_id, "label": run.label, "checkpoint_step": step_of(evaluation),
                         "mode": settings["checkpoints"], "average_last": settings["average_last"],
                         "samples": evaluation["n_samples"], "score": score, "first_round": first_round})
    return pd.DataFrame(rows, columns=COLUMNS)


MIN_CROSS_RUNS = 2  # each run's step is chosen on the others: one run has no others


def cross_run_choice(scores: np.ndarray, choose: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Leave-one-run-out choice of the best step.

    Args:
        scores: shape (..., R, S), R >= 2 runs x S checkpoint steps of one config (leading axes: e.g.
            replicates of a simulation).
        choose: the scores the step is chosen on, same shape (None: `scores`); with eval.checkpoints=race
            every sample drawn, while `scores` holds the first round's.
    Returns:
        (held_out, chosen), both shape (..., R): each run's score at the step with the top mean of
        `choose` over the other R - 1 runs, and that step's index (ties: the earliest step).
    """
    runs = scores.shape[-2]
    if runs < MIN_CROSS_RUNS:
        raise ValueError(f"cross_run_choice needs >= {MIN_CROSS_RUNS} runs, got {runs}")
    choose = scores if choose is None else choose
    others = (choose.sum(axis=-2, keepdims=True) - choose) / (runs - 1)
    chosen = others.argmax(axis=-1)
    return np.take_along_axis(scores, chosen[..., None], axis=-1)[..., 0], chosen


@lru_cache(maxsize=None)
def crossover_correlation(runs: int, steps: int) -> float:
    """Correlation of two runs' cross-run scores when every step has the same true score and the run x step
    noise is Gaussian (then it depends on runs and steps only): the largest over 2..steps steps, since a
    config's steps may tie at the top among fewer. A fixed-seed Monte Carlo (SE ~0.005)."""
    rng = np.random.default_rng(0)
    worst = 0.0
    for tied in range(2, steps + 1):
        held_out, _ = cross_run_choice(rng.standard_normal((40_000, runs, tied)))
        worst = max(worst, float(np.mean(held_out[:, 0] * held_out[:, 1])))
    return worst


def crossover_interval(scores: np.ndarray, level: float, choose: np.ndarray | None = None) -> stats.Interval:
    """Mean of the cross-run scores y_r of a config, scores shape (R, S), R >= 2, with its interval; the
    steps chosen on `choose` (cross_run_choice; None: on `scores`).

    Each run's data also chose the other runs' steps, so the y_r share a covariance and their plain
    t-interval under-covers (91% at 95%, benchmarks/bench_checkpoint_choice.py). The variance of the mean
    comes instead from a two-way model of the scores, score_rs = step_s + run_r + b_rs: the run means'
    sample variance (R - 1 df) estimates Var(run_r) + Var(b) / S, the two-way residual mean square
    ((R - 1)(S - 1) df) estimates Var(b) (training noise between checkpoints plus eval sampling), and
    Var(mean y) = Var(run_r) / R + Var(b) (1 + (R - 1) rho) / R with rho = crossover_correlation(R, S), its
    worst case. df by Satterthwaite over the two estimates. One checkpoint: the t-interval of its scores.
    Chosen on other samples of the same runs (the race), the y_r share less than when chosen on the scores
    themselves, so that rho stays a worst case (benchmarks/bench_checkpoint_race.py measures coverage).
    """
    runs, steps = scores.shape
    if steps < 2:
        return stats.t_interval(scores[:, 0], level)
    held_out, _ = cross_run_choice(scores, choose)
    run_means = scores.mean(axis=1)
    residual = scores - scores.mean(axis=0) - run_means[:, None] + scores.mean()
    residual_var = float((residual**2).sum()) / ((runs - 1) * (steps - 1))
    weight = (1 + (runs - 1) * crossover_correlation(runs, steps)) / runs - 1 / (steps * runs)
    comparison = stats.difference(float(held_out.mean()), [(float(run_means.var(ddof=1)) / runs, runs - 1),
                                                            (weight * residual_var, (runs - 1) * (steps - 1))], level)
    return stats.Interval(comparison.delta, comparison.se, comparison.df, comparison.low, comparison.high, level)


def summarise_checkpoints(checkpoints: pd.DataFrame, level: float) -> pd.DataFrame:
    """One row per config: final, last-k, the cross-run best (nan below MIN_CROSS_RUNS runs) and the naive
    best with the gap; intervals cut at 0 and 100. `fold_steps`: the step each run was scored at, e.g. "20, 20, 30"."""
    rows = []
    for label, group in checkpoints.groupby("label", sort=False):
        choose = group.pivot(index="run_id", columns="checkpoint_step", values="score").dropna(axis=1)
        scores = group.pivot(index="run_id", columns="checkpoint_step", values="first_round")[choose.columns]
        k = int(group["average_last"].iloc[0])
        final = _bounded(stats.t_interval(choose.iloc[:, -1].to_numpy(), level))
        last = _bounded(stats.t_interval(scores.iloc[:, -k:].mean(axis=1).to_numpy(), level))
        naive_step = scores.mean().idxmax()
        row = {"label": label, "runs": len(scores), "steps": len(scores.columns),
               "final_step": int(scores.columns[-1]), "final": final.estimate, "final_low": final.low,
               "final_high": final.high, "average_last": k, "last_k": last.estimate, "last_k_low": last.low,
               "last_k_high": last.high, "best_step_naive": int(naive_step),
               "best_naive": float(scores[naive_step].mean()), "best_cross": math.nan, "best_low": math.nan,
               "best_high": math.nan, "fold_steps": "", "selection_gap": math.nan,
               "raced": bool((group["mode"] == "race").any()), "samples": _mean_samples(group)}
        if len(scores) >= MIN_CROSS_RUNS:
            _, chosen = cross_run_choice(scores.to_numpy(), choose.to_numpy())
            cross = _bounded(crossover_interval(scores.to_numpy(), level, choose.to_numpy()))
            row |= {"best_cross": cross.estimate, "best_low": cross.low, "best_high": cross.high,
                    "fold_steps": ", ".join(str(int(scores.columns[i])) for i in chosen),
                    "selection_gap": row["best_naive"] - cross.estimate}
        rows.append(row)
    return pd.DataFrame(rows)


def _mean_samples(group: pd.DataFrame) -> str:
    """Samples per problem each step got, mean over runs, e.g. "2: 1.5, 4: 4" (unequal only when raced)."""
    means = group.groupby("checkpoint_step")["samples"].mean()
    return ", ".join(f"{int(step)}: {mean:g}" for step, mean in means.items())


def _bounded(interval: stats.Interval) -> stats.Interval:
    """The interval cut at 0 and 100: a checkpoint's score is a percentage."""
    return dataclasses.replace(interval, **dict(zip(("low", "high"), stats.bounded(interval.low, interval.high,
                                                                               stats.SCORE_BOUNDS))))


def markdown_section(table: pd.DataFrame, level: float) -> str:
    pct = f"{100 * level:g}%"
    modes = "all or race" if table["raced"].any() else "all"
    lines = [f"## Checkpoints (eval.checkpoints={modes})", "",
             f"Per config, means over training runs with {pct} t-intervals (cut at 0 and 100, the bounds of the score). *last k*: each run's mean over its "
             "last k checkpoints. *best (cross-run)*: each run is scored at the step with the top mean over the "
             "other runs (leave one run out; the steps used are listed), so neither its eval samples nor its own "
             "step-to-step training noise took part in the choice. It estimates the expected score of a run "
             "whose checkpoint step is chosen by this rule from other runs, and needs "
             f"{MIN_CROSS_RUNS} or more runs. *best (naive)* is the plain maximum over steps of the mean, and "
             "*gap* = naive - cross-run is the selection effect it carries.",
             "", "| config | runs | final (step) | last k | best (cross-run) | best (naive) | gap |",
             "|---|---|---|---|---|---|---|"]
    for r in table.itertuples():
        best = (f"{_ci(r.best_cross, r.best_low, r.best_high)} (steps {r.fold_steps})" if r.fold_steps
                else f"needs >= {MIN_CROSS_RUNS} runs")
        gap = "" if math.isnan(r.selection_gap) else f"{r.selection_gap:+.2f}"
        lines.append(f"| {r.label} | {r.runs} | {_ci(r.final, r.final_low, r.final_high)} ({r.final_step}) | "
                     f"{_ci(r.last_k, r.last_k_low, r.last_k_high)} (k={r.average_last}) | {best} | "
                     f"{r.best_naive:.2f} (step {r.best_step_naive}) | {gap} |")
    raced = table.loc[table["raced"]]
    if not raced.empty:
        lines += ["", "*eval.checkpoints=race*: the checkpoints of each run got samples in rounds, more only to "
                  "those still plausibly best in that run. Each run's step is chosen on the other runs' scores over "
                  "all their samples; last k, best (cross-run), best (naive) and the plot use each checkpoint's "
                  "first-round samples only (the same number at every step, drawn before the race dropped any), "
                  "so the race's choices do not bias them. Samples per problem, by step (mean over runs):"]
        lines += [f"- {r.label}: {r.samples}" for r in raced.itertuples()]
    return "\n".join(lines) + "\n"


def _ci(mean: float, low: float, high: float) -> str:
    return f"{mean:.2f}" + ("" if math.isnan(low) else f" [{low:.2f}, {high:.2f}]")


def write_checkpoint_report(runs: pd.DataFrame, level: float, plots: bool, out: Path) -> list[Path]:
    """checkpoints.csv, a "## Checkpoints" section appended to summary.md and plots/checkpoints.png, when
    some run evaluated every checkpoint; returns the files written (none: no run did)."""
    checkpoints = collect_checkpoints(runs)
    if checkpoints.empty:
        return []
    written = [out / "checkpoints.csv"]
    checkpoints.to_csv(written[0], index=False)
    section = markdown_section(summarise_checkpoints(checkpoints, level), level)
    if plots:
        written.append(out / "plots" / "checkpoints.png")
        written[-1].parent.mkdir(exist_ok=True)
        plot_checkpoints(checkpoints, level, written[-1])
        section += "\n![checkpoints](plots/checkpoints.png)\n"
    with open(out / "summary.md", "a") as handle:
        handle.write("\n" + section)
    return written


def plot_checkpoints(checkpoints: pd.DataFrame, level: float, path: Path) -> None:
    """Score vs checkpoint step per config, with t-intervals over runs (drawn within 0-100: a t-interval of
    3 runs can pass the bounds of a percentage, the score cannot). Configs are set slightly apart on the
    step axis so that their bars do not hide each other."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    groups = list(checkpoints.groupby("label", sort=False))
    span = np.ptp(checkpoints["checkpoint_step"].to_numpy(dtype=float)) or 1.0
    for i, (label, group) in enumerate(groups):
        by_step = [(step, stats.t_interval(g["first_round"].to_numpy(), level))  # = score unless raced
                   for step, g in group.groupby("checkpoint_step")]
        steps = np.array([s for s, _ in by_step], dtype=float) + (i - (len(groups) - 1) / 2) * 0.01 * span
        means = np.array([ci.estimate for _, ci in by_step])
        lows = np.clip([ci.low for _, ci in by_step], 0, 100)
        highs = np.clip([ci.high for _, ci in by_step], 0, 100)
        errors = np.nan_to_num(np.array([means - lows, highs - means]))  # one run: no interval, a bare mark
        n_runs = group["run_id"].nunique()
        ax.errorbar(steps, means, yerr=errors, marker="o", capsize=3, label=f"{label} ({n_runs} runs)")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_xlabel("checkpoint step")
    ax.set_ylabel("avg@n over all eval samples (%)")
    ax.set_title(f"score vs step: mean and {100 * level:g}% t-interval over runs (cut at 0 and 100)", fontsize=10)
    ax.legend(fontsize=7)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
