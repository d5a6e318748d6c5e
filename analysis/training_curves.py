"""Training curves of several runs side by side: one panel per metrics.jsonl key, one line per run.

    python analysis/training_curves.py results/lr_sweep [--keys loss kl_true grad_norm] [--out DIR]

Writes training_curves.png and training_curves.csv (run_id, label, seed, step, key, value, collapse_step).
Runs stopped at their collapse are drawn too; a cross marks each run's collapse step (train.collapse).
"""

from __future__ import annotations

import matplotlib.pyplot as plt

from opsd_sweep.summarize import scripts


def main(argv: list[str] | None = None) -> None:
    parser = scripts.parser(__doc__)
    parser.add_argument("--keys", nargs="+", default=["loss", "kl_true", "grad_norm"],
                        help="metrics.jsonl keys to draw, one panel each")
    args = parser.parse_args(argv)
    collection, _ = scripts.finished_runs(args)
    runs = collection.runs[collection.runs["state"].isin(["done", "collapsed"])]
    table = scripts.curves(runs, args.keys).merge(runs[["run_id", "collapse_step"]], on="run_id", how="left")
    if table.empty:
        raise SystemExit(f"no run under {args.results} logged any of {args.keys} in train/metrics.jsonl")
    keys = [k for k in args.keys if k in set(table["key"])]
    fig, axes = plt.subplots(len(keys), 1, figsize=(9, 2.8 * len(keys)), sharex=True, layout="constrained",
                             squeeze=False)
    colors = scripts.config_colors(table["label"])
    for ax, key in zip(axes[:, 0], keys):
        scripts.draw_runs(ax, table[table["key"] == key], colors)
        at = table[(table["key"] == key) & (table["step"] == table["collapse_step"])]
        ax.scatter(at["step"], at["value"], c=[colors[label] for label in at["label"]], marker="X", s=60, zorder=3)
        ax.set_ylabel(key)
    for label, color in colors.items():
        axes[0, 0].plot([], [], color=color, label=label)
    if table["collapse_step"].notna().any():
        axes[0, 0].scatter([], [], c="grey", marker="X", s=60, label="collapse (train.collapse rule)")
    axes[0, 0].legend(fontsize=8, ncol=2)
    axes[-1, 0].set_xlabel("optimizer step")
    axes[0, 0].set_title(f"Training curves of {table['run_id'].nunique()} runs (one line per run, colour = config)",
                         fontsize=10)
    scripts.save(args, "training_curves", fig, table)


if __name__ == "__main__":
    main()
