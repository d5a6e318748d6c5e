"""`python -m opsd_sweep.summary [RESULTS_ROOT ...]`: runs.csv and summary.csv (n, mean, sd per config)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd
from rich.console import Console
from rich.table import Table

from opsd_sweep.analysis.collect import collect_runs, varying_columns


def summarize(runs: pd.DataFrame, metric: str = "avg_at_n") -> pd.DataFrame:
    done = runs[(runs["state"] == "done") & runs.get(metric, pd.Series(dtype=float)).notna()]
    axes = varying_columns(runs)
    if done.empty:
        return pd.DataFrame(columns=[*axes, "n", "mean", "sd"])
    grouped = done.groupby(axes, dropna=False)[metric] if axes else done.assign(_all="all").groupby("_all")[metric]
    table = grouped.agg(n="count", mean="mean", sd="std").reset_index()
    return table.sort_values("mean", ascending=False)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("roots", nargs="*", default=["results"], help="results roots (globs allowed)")
    parser.add_argument("--out", default=None, help="output folder (default: the first root)")
    parser.add_argument("--metric", default="avg_at_n")
    args = parser.parse_args(argv)
    out = Path(args.out or args.roots[0])
    out.mkdir(parents=True, exist_ok=True)
    runs = collect_runs(args.roots)
    if runs.empty:
        raise SystemExit(f"no run directories under {args.roots}; run a sweep first (make demo)")
    runs.to_csv(out / "runs.csv", index=False)
    summary = summarize(runs, args.metric)
    summary.to_csv(out / "summary.csv", index=False)
    table = Table(title=f"{args.metric} per config ({len(runs)} runs)")
    for column in summary.columns:
        table.add_column(column)
    for _, row in summary.iterrows():
        table.add_row(*[f"{v:.4g}" if isinstance(v, float) else str(v) for v in row])
    Console().print(table)
    print(f"wrote {out / 'runs.csv'} and {out / 'summary.csv'}")


if __name__ == "__main__":
    main()
