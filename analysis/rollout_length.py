"""Rollout-length drift during training: the mean rollout length per step of every run, and how far it
moved from the first to the last 10% of steps.

    python analysis/rollout_length.py results/lr_sweep [--key rollout_len] [--out DIR]

Writes rollout_length.png (one line per run, colour = config) and rollout_length.csv (run_id, label,
seed, steps, first and last 10% means, drift = last - first, drift in percent).
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pandas as pd

from opsd_sweep.summarize import scripts
from opsd_sweep.summarize.collect import TAIL_FRACTION


def drift(table: pd.DataFrame) -> pd.DataFrame:
    """One row per run: the mean length over its first and last TAIL_FRACTION of steps and the change."""
    rows = []
    for (run_id, label, seed), run in table.groupby(["run_id", "label", "seed"], sort=False, dropna=False):
        values = run.sort_values("step")["value"].to_numpy()
        edge = max(1, math.ceil(TAIL_FRACTION * values.size))
        first, last = float(values[:edge].mean()), float(values[-edge:].mean())
        rows.append({"run_id": run_id, "label": label, "seed": seed, "steps": values.size, "first": first,
                     "last": last, "drift": last - first, "drift_percent": 100 * (last - first) / first if first else
                     math.nan})
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> None:
    parser = scripts.parser(__doc__)
    parser.add_argument("--key", default="rollout_len", help="metrics.jsonl key of the mean rollout length")
    args = parser.parse_args(argv)
    _, runs = scripts.finished_runs(args)
    table = scripts.curves(runs, [args.key])
    if table.empty:
        raise SystemExit(f"no run under {args.results} logged {args.key!r} in train/metrics.jsonl (--key)")
    summary = drift(table)
    fig, ax = plt.subplots(figsize=(9, 5), layout="constrained")
    colors = scripts.config_colors(table["label"])
    scripts.draw_runs(ax, table, colors)
    for label, color in colors.items():
        moved = summary.loc[summary["label"] == label, "drift_percent"].mean()
        ax.plot([], [], color=color, label=f"{label}: {moved:+.0f}% first -> last 10% of steps (mean over runs)")
    ax.legend(fontsize=8)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel(f"{args.key} (tokens)")
    ax.set_title(f"Rollout length during training, {len(summary)} runs (one line per run)", fontsize=10)
    scripts.save(args, "rollout_length", fig, summary)


if __name__ == "__main__":
    main()
