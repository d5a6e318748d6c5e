"""Per-problem agreement of two configs: each problem's solve rate under config A against config B.

    python analysis/problem_agreement.py results/lr_sweep --a "lr=5e-06" --b "lr=1e-05" [--out DIR]

A and B are labels as in summary.csv, or key=value selectors as --baseline takes (opsd_sweep.selector). Writes
problem_agreement.png (one dot per problem, the diagonal = no change) and problem_agreement.csv
(problem, solve rate of A and of B over all their runs and samples, B - A). Descriptive: which problems
a config gains and loses; the summary's verdicts are about the net effect on all of them.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from scipy import stats as sps

from opsd_sweep.summarize import scripts
from opsd_sweep.summarize.config_stats import configs_of
from opsd_sweep.selector import SelectorError, select_config


def solve_rates(collection, runs: pd.DataFrame, label: str) -> pd.Series:
    """Percent correct per problem over every sample of every finished run of one config."""
    ids = runs.loc[runs["label"] == label, "run_id"]
    samples = collection.samples[collection.samples["run_id"].isin(ids)]
    if samples.empty:
        raise SystemExit(f"config {label!r} has no per-sample data (eval/eval.json problems)")
    return samples.groupby("problem")["correct"].mean().mul(100)


def main(argv: list[str] | None = None) -> None:
    parser = scripts.parser(__doc__)
    parser.add_argument("--a", required=True, help="config A: a label or column=value selector")
    parser.add_argument("--b", required=True, help="config B: a label or column=value selector")
    args = parser.parse_args(argv)
    collection, runs = scripts.finished_runs(args)
    configs = configs_of(runs.drop_duplicates("label"))
    try:
        a, b = select_config(args.a, configs, "--a"), select_config(args.b, configs, "--b")
    except SelectorError as err:
        raise SystemExit(str(err)) from None
    table = pd.concat({"rate_a": solve_rates(collection, runs, a), "rate_b": solve_rates(collection, runs, b)},
                      axis=1).dropna()
    table["b_minus_a"] = table["rate_b"] - table["rate_a"]
    rho = sps.spearmanr(table["rate_a"], table["rate_b"]).statistic if len(table) > 2 else float("nan")
    fig, ax = plt.subplots(figsize=(6, 6), layout="constrained")
    ax.plot([0, 100], [0, 100], color="#999999", lw=1, ls="--", label="no change")
    ax.scatter(table["rate_a"], table["rate_b"], s=30, alpha=0.7)
    ax.set_xlabel(f"A: solve rate under {a} (%)", fontsize=9)
    ax.set_ylabel(f"B: solve rate under {b} (%)", fontsize=9)
    gained, lost = int((table["b_minus_a"] > 0).sum()), int((table["b_minus_a"] < 0).sum())
    ax.set_title(f"Per-problem agreement over {len(table)} problems: B gains {gained}, loses {lost}\n"
                 f"Spearman rank correlation {rho:.2f} (descriptive)", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    scripts.save(args, "problem_agreement", fig, table.rename_axis("problem").reset_index())


if __name__ == "__main__":
    main()
