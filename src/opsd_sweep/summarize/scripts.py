"""What the researcher scripts in analysis/ share: their command line, the run dirs they read, and where
they write (one PNG and one CSV each, under RESULTS/analysis/ unless --out says otherwise)."""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never needs a display
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from opsd_sweep.summarize.collect import Collection, collect  # noqa: E402
from opsd_sweep.run.rundir import RunDir


def parser(description: str) -> argparse.ArgumentParser:
    """A parser with the RESULTS root(s) and --out; each script adds its own flags."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="+", help="results roots (globs allowed), as for make summary")
    parser.add_argument("--out", help="output folder (default: RESULTS/analysis)")
    return parser


def finished_runs(args: argparse.Namespace) -> tuple[Collection, pd.DataFrame]:
    """The collection under the roots and its finished runs; exits naming the roots when there are none."""
    collection = collect(args.results)
    runs = collection.runs
    done = runs[runs["counts"].astype(bool)] if "counts" in runs else runs
    if done.empty:
        raise SystemExit(f"no finished runs under {args.results}; run a sweep first (make demo)")
    return collection, done


def output(args: argparse.Namespace, name: str) -> tuple[Path, Path]:
    """(png, csv) paths for this script's outputs; the folder is created."""
    folder = Path(args.out or Path(args.results[0]) / "analysis")
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{name}.png", folder / f"{name}.csv"


def save(args: argparse.Namespace, name: str, fig, table: pd.DataFrame) -> None:
    """Write the figure and the table as <name>.png and <name>.csv and say where."""
    png, csv = output(args, name)
    fig.savefig(png, dpi=120)
    table.to_csv(csv, index=False)
    written(png, csv)


def written(png: Path, csv: Path) -> None:
    print(f"wrote {png} and {csv}")


def config_colors(labels: pd.Series) -> dict:
    """One colour per config label, the same in every panel."""
    return {label: plt.get_cmap("tab10")(i % 10) for i, label in enumerate(sorted(labels.unique()))}


def draw_runs(ax, table: pd.DataFrame, colors: dict) -> None:
    """One line per run of a `curves` table (value against step), coloured by config."""
    for (_, label), run in table.groupby(["run_id", "label"], sort=False):
        ax.plot(run["step"], run["value"], color=colors[label], lw=1, alpha=0.8)
    ax.xaxis.get_major_locator().set_params(integer=True)  # steps are whole numbers


def curves(runs: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Long table of every run's logged value of each key at each step (runs without metrics add nothing)."""
    rows = []
    for run in runs.dropna(subset=["run_dir"]).to_dict("records"):
        for record in RunDir(Path(run["run_dir"])).training_steps():
            rows += [(run["run_id"], run["label"], run.get("cfg.seed"), record["step"], key, float(record[key]))
                     for key in keys if isinstance(record.get(key), (int, float))]
    return pd.DataFrame(rows, columns=["run_id", "label", "seed", "step", "key", "value"])
