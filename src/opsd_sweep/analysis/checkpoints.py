"""Every checkpoint of a run evaluated (eval.checkpoints=all): score vs step, honestly summarised.

Per config (unit of replication: the training run, intervals are t-intervals over runs):
  final     the last checkpoint's score, what the main table tests;
  last-k    each run's mean over its last `eval.average_last` checkpoints (averaging cuts eval noise);
  best      the step with the top mean is a maximum over steps, biased upward. So the step is chosen
            on one half of each problem's eval samples (even sample indices) and scored on the other
            half (odd ones), which did not take part in the choice: an unbiased score of the chosen
            step. The naive maximum is shown next to it; their gap is the selection effect.
Input: the runs table of analysis.collect; each run's eval/eval.json (final checkpoint) and
eval/checkpoint-<step>/eval.json (the earlier ones).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from omegaconf import OmegaConf

from opsd_sweep.analysis import stats
from opsd_sweep.run.rundir import RunDir, read_json


def step_of(evaluation: dict) -> int | None:
    """The training step of the checkpoint an eval.json evaluated (None: not a training checkpoint)."""
    name = Path(evaluation.get("checkpoint") or "").name
    step = name.removeprefix("checkpoint-")
    return int(step) if name.startswith("checkpoint-") and step.isdigit() else None


def checkpoint_scores(evaluation: dict) -> dict:
    """avg@n in percent over all samples, and over the even / odd sample indices of every problem."""
    correct = np.array([[s["correct"] for s in p["samples"]] for p in evaluation["problems"]], dtype=float)
    return {"score": 100 * correct.mean(), "half_a": 100 * correct[:, 0::2].mean(),
            "half_b": 100 * correct[:, 1::2].mean() if correct.shape[1] >= 2 else math.nan}


def collect_checkpoints(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per finished run and evaluated checkpoint: run_id, label, checkpoint_step, average_last,
    score, half_a, half_b. Only runs with more than one evaluated checkpoint appear (external results,
    which have no run dir, never do)."""
    rows = []
    for run in runs.loc[(runs["state"] == "done") & runs["run_dir"].notna()].itertuples():
        run_dir = RunDir(Path(run.run_dir))
        files = sorted(run_dir.eval_dir.glob("checkpoint-*/eval.json"))
        if not files or not run_dir.eval_json.exists():
            continue
        average_last = OmegaConf.load(run_dir.config).eval.average_last
        for path in [*files, run_dir.eval_json]:
            evaluation = read_json(path)
            rows.append({"run_id": run.run_id, "label": run.label, "checkpoint_step": step_of(evaluation),
                         "average_last": average_last, **checkpoint_scores(evaluation)})
    return pd.DataFrame(rows, columns=["run_id", "label", "checkpoint_step", "average_last", "score", "half_a",
                                       "half_b"])


def summarise_checkpoints(checkpoints: pd.DataFrame, level: float) -> pd.DataFrame:
    """One row per config: final, last-k and split-half best (with the naive best and the gap)."""
    rows = []
    for label, group in checkpoints.groupby("label", sort=False):
        scores = group.pivot(index="run_id", columns="checkpoint_step", values="score").dropna(axis=1)
        half_a = group.pivot(index="run_id", columns="checkpoint_step", values="half_a")[scores.columns]
        half_b = group.pivot(index="run_id", columns="checkpoint_step", values="half_b")[scores.columns]
        k = int(group["average_last"].iloc[0])
        final = stats.t_interval(scores.iloc[:, -1].to_numpy(), level)
        last = stats.t_interval(scores.iloc[:, -k:].mean(axis=1).to_numpy(), level)
        naive_step = scores.mean().idxmax()
        chosen = half_a.mean().idxmax()
        held_out = stats.t_interval(half_b[chosen].to_numpy(), level)
        rows.append({"label": label, "runs": len(scores), "steps": len(scores.columns),
                     "final_step": int(scores.columns[-1]), "final": final.estimate, "final_low": final.low,
                     "final_high": final.high, "average_last": k, "last_k": last.estimate, "last_k_low": last.low,
                     "last_k_high": last.high, "best_step_naive": int(naive_step),
                     "best_naive": float(scores[naive_step].mean()), "best_step": int(chosen),
                     "best_held_out": held_out.estimate, "best_low": held_out.low, "best_high": held_out.high,
                     "selection_gap": float(scores[naive_step].mean()) - held_out.estimate})
    return pd.DataFrame(rows)


def markdown_section(table: pd.DataFrame, level: float) -> str:
    pct = f"{100 * level:g}%"
    lines = ["## Checkpoints (eval.checkpoints=all)", "",
             f"Per config, means over training runs with {pct} t-intervals. *last k*: each run's mean over its "
             "last k checkpoints. *best (held out)*: the step is chosen on the even-indexed eval samples of every "
             "problem and scored on the odd-indexed ones, so the choice does not inflate the score; *best (naive)* "
             "is the plain maximum over steps, and *gap* = naive - held out is the selection effect it carries.",
             "", "| config | runs | final (step) | last k | best (held out) | best (naive) | gap |",
             "|---|---|---|---|---|---|---|"]
    for r in table.itertuples():
        lines.append(f"| {r.label} | {r.runs} | {_ci(r.final, r.final_low, r.final_high)} ({r.final_step}) | "
                     f"{_ci(r.last_k, r.last_k_low, r.last_k_high)} (k={r.average_last}) | "
                     f"{_ci(r.best_held_out, r.best_low, r.best_high)} (step {r.best_step}) | "
                     f"{r.best_naive:.2f} (step {r.best_step_naive}) | {r.selection_gap:+.2f} |")
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
        by_step = [(step, stats.t_interval(g["score"].to_numpy(), level)) for step, g in group.groupby("checkpoint_step")]
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
