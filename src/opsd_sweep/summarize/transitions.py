"""Per-problem transitions of each config against the in-sweep baseline: which problems it solves that the
baseline does not, and the reverse.

Per problem, an arm's solve rate is its share of correct samples over all its counted runs and samples
(collect's samples table; only runs that count are in it). At a declared threshold t a problem is
improved (baseline < t <= config), degraded (config < t <= baseline), both correct (both >= t) or both
wrong (both < t). The exact paired test on the discordant problems is McNemar's exact test: a two-sided
binomial test of improved against degraded at 1/2.

What this estimates: where a change acts on these problems, given the runs at hand. The test treats the
problems as the unit and the runs as fixed, so it ignores training-seed variation (one lucky seed lifts
many problems at once) and is no verdict: the verdict remains the run-level test of config_stats.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats as sps

from opsd_sweep.inference import stats

CLASSES = ("improved", "degraded", "both correct", "both wrong")
COUNT_COLUMNS = tuple(kind.replace(" ", "_") for kind in CLASSES)  # improved, degraded, both_correct, both_wrong
CLASS_COLORS = {"improved": "#1a9850", "degraded": "#d73027", "both correct": "#4393c3", "both wrong": "#999999"}
MAX_PANELS = 6  # configs drawn in plots/transitions.png (the best by mean when there are more)
MIN_STACK_LABEL = 3  # problems at one point of the plot from which the point is labelled with their number
TABLE_COLUMNS = ["config", "baseline", "problem", "problem_index", "baseline_rate", "config_rate",
                 "baseline_samples", "config_samples", "class"]


@dataclass
class Transitions:
    baseline: str
    threshold: float
    table: pd.DataFrame  # one row per config x problem (TABLE_COLUMNS): the content of transitions.csv
    counts: pd.DataFrame  # one row per config (order of the summary table): runs, the four counts, p, p_holm
    without_samples: list[str] = field(default_factory=list)  # configs with no per-sample data (external)
    without_common: list[str] = field(default_factory=list)  # configs sharing no problem with the baseline


# --- the table -----------------------------------------------------------------------------------

def problem_rates(samples: pd.DataFrame, labels: pd.DataFrame) -> pd.DataFrame:
    """Per config x problem: runs, samples, correct and the solve rate (correct / samples).

    Args:
        samples: collect's samples table, one row per run x problem x sample (run_id, problem,
            problem_index, correct).
        labels: one row per run that counts: run_id, label.
    """
    joined = samples.merge(labels[["run_id", "label"]], on="run_id", how="inner")
    grouped = joined.groupby(["label", "problem"], sort=False)
    rates = grouped.agg(problem_index=("problem_index", "min"), runs=("run_id", "nunique"),
                        samples=("correct", "size"), correct=("correct", "sum")).reset_index()
    rates["rate"] = rates["correct"] / rates["samples"]
    return rates


def classify(baseline_rate: np.ndarray, config_rate: np.ndarray, threshold: float) -> np.ndarray:
    """Per problem: improved (baseline < t <= config), degraded (config < t <= baseline), both correct,
    both wrong. A rate equal to t (within float rounding) counts as solved."""
    def solved(rate: np.ndarray) -> np.ndarray:
        rate = np.asarray(rate, float)
        return (rate >= threshold) | np.isclose(rate, threshold, rtol=0.0, atol=1e-12)
    base, config = solved(baseline_rate), solved(config_rate)
    return np.select([~base & config, base & ~config, base & config], CLASSES[:3], CLASSES[3]).astype(object)


def mcnemar_exact(improved: int, degraded: int) -> float:
    """Two-sided exact McNemar p: the binomial test of `improved` of the discordant problems at 1/2
    (1 when there are none: nothing discordant is no evidence either way)."""
    discordant = improved + degraded
    return 1.0 if discordant == 0 else float(sps.binomtest(improved, discordant, 0.5).pvalue)


def transitions(samples: pd.DataFrame, runs: pd.DataFrame, configs: list[str], baseline: str,
                threshold: float) -> Transitions:
    """Every config in `configs` (in that order) against `baseline`, on the problems both evaluated.

    Args:
        samples: collect's samples table (only runs that count are in it).
        runs: the runs that entered the statistics (analysis.usable): run_id, label.
        configs: the configs' labels, e.g. the summary table's order (best mean first); the baseline's
            own label is skipped.
        baseline: the in-sweep baseline's label.
        threshold: t in (0, 1] on per-problem solve rates.
    """
    rates = problem_rates(samples, runs)
    listed = runs.groupby("label").size()  # runs in the statistics; a run stopped at its collapse has no samples
    base = rates[rates["label"] == baseline].set_index("problem")
    rows, counts, without_samples, without_common = [], [], [], []
    for label in configs:
        if label == baseline:
            continue
        own = rates[rates["label"] == label].set_index("problem")
        if own.empty or base.empty:
            without_samples.append(label)
            continue
        common = own.index.intersection(base.index, sort=False)
        if common.empty:
            without_common.append(label)
            continue
        b, c = base.loc[common], own.loc[common]
        table = pd.DataFrame({"config": label, "baseline": baseline, "problem": common,
                              "problem_index": c["problem_index"].to_numpy(), "baseline_rate": b["rate"].to_numpy(),
                              "config_rate": c["rate"].to_numpy(), "baseline_samples": b["samples"].to_numpy(),
                              "config_samples": c["samples"].to_numpy()})
        table["class"] = classify(table["baseline_rate"], table["config_rate"], threshold)
        table = table.sort_values("problem_index", kind="stable")
        rows.append(table)
        tally = table["class"].value_counts()
        count = {column: int(tally.get(kind, 0)) for kind, column in zip(CLASSES, COUNT_COLUMNS)}
        runs_here, base_runs = int(own["runs"].max()), int(base["runs"].max())
        counts.append({"config": label, "runs": runs_here, "baseline_runs": base_runs,
                       "runs_without_samples": int(listed.get(label, runs_here)) - runs_here
                       + int(listed.get(baseline, base_runs)) - base_runs,
                       "problems": len(table), **count, "p": mcnemar_exact(count["improved"], count["degraded"])})
    table = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=TABLE_COLUMNS)
    counts = pd.DataFrame(counts, columns=["config", "runs", "baseline_runs", "runs_without_samples", "problems",
                                          *COUNT_COLUMNS, "p"])
    counts["p_holm"] = stats.holm(counts["p"].to_numpy(float)) if len(counts) else []
    return Transitions(baseline, threshold, table[TABLE_COLUMNS], counts, without_samples, without_common)


# --- summary.md ----------------------------------------------------------------------------------

def _p(value: float) -> str:
    return "<0.001" if value < 1e-3 else f"{value:.3f}"


def _runs(n: int) -> str:
    return f"{n} run" + ("" if n == 1 else "s")


def _ids(table: pd.DataFrame, config: str, kind: str) -> str:
    ids = table.loc[(table["config"] == config) & (table["class"] == kind), "problem"]
    return ", ".join(map(str, ids)) if len(ids) else "none"


def markdown_lines(result: Transitions, plot: Path | None = None) -> list[str]:
    """The '## Per-problem transitions vs the baseline' section: what is counted and what it estimates,
    then per config a line of counts and p and the improved / degraded problem ids."""
    t, counts = result.threshold, result.counts
    family = len(counts)
    lines = ["## Per-problem transitions vs the baseline", "",
             f"Per problem, the solve rate of each config and of the in-sweep baseline {result.baseline} (its share "
             f"of correct samples over all its counted runs and samples), classified at threshold t = {t:g}: "
             "improved = baseline < t ≤ config, degraded = config < t ≤ baseline, both correct = both ≥ t, both "
             "wrong = both < t (--transition-threshold). p: exact McNemar test, the two-sided binomial test of "
             "improved against degraded problems at 1/2"
             + (f", Holm-adjusted over {family} configs." if family > 1 else ".")
             + " What this estimates: where the change acts on these problems, with these runs. The test takes the "
             "problems as the unit and the runs as given, so it ignores training-seed variation (one lucky seed lifts "
             "many problems at once): it is no verdict, the verdict remains the run-level test of the Verdicts table. "
             "One row per config × problem: transitions.csv"
             + (f"; plot: plots/{plot.name}." if plot is not None else "."), ""]
    for row in counts.itertuples(index=False):
        holm = f" (Holm {_p(row.p_holm)})" if family > 1 else ""
        lines.append(f"- **{row.config}** ({row.runs} runs vs the baseline's {row.baseline_runs}, {row.problems} "
                     f"problems): {row.improved} improved, {row.degraded} degraded, {row.both_correct} both correct, "
                     f"{row.both_wrong} both wrong; exact McNemar p {_p(row.p)}{holm}."
                     + (f" {row.runs_without_samples} run(s) of the two arms in the Verdicts table have no per-sample "
                        "data (e.g. stopped at a collapse, scored by --collapsed-score) and are not in these rates."
                        if row.runs_without_samples else ""))
        lines.append(f"  - improved: {_ids(result.table, row.config, 'improved')}")
        lines.append(f"  - degraded: {_ids(result.table, row.config, 'degraded')}")
    if result.without_samples:
        lines.append(f"- No per-sample data (external results, or a baseline without it), so no transitions: "
                     f"{', '.join(result.without_samples)}.")
    if result.without_common:
        lines.append(f"- No problem in common with the baseline: {', '.join(result.without_common)}.")
    return lines


# --- plots/transitions.png -----------------------------------------------------------------------

def jitter(values: np.ndarray, threshold: float, width: float, rng: np.random.Generator) -> np.ndarray:
    """Values moved by at most `width`, never across `threshold` (a move that would cross is mirrored), so
    a jittered point stays on its class's side of the threshold line."""
    values = np.asarray(values, float)
    moved = values + rng.uniform(-width, width, values.size)
    solved = values >= threshold - 1e-12
    crossed = solved != (moved >= threshold - 1e-12)
    moved[crossed] = 2 * values[crossed] - moved[crossed]
    return moved


def plot_transitions(result: Transitions, path: Path, rng: np.random.Generator | None = None) -> list[str]:
    """Per config (at most MAX_PANELS, in counts order: the best by mean first): each problem's baseline
    solve rate (x) against the config's (y), coloured by class, with the diagonal and the threshold lines.
    Problems that share both rates are jittered (never across a threshold line) and a stack of
    MIN_STACK_LABEL or more is labelled with its count. Returns the configs drawn (none: no file)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    counts = result.counts
    if counts.empty:
        return []
    shown = counts.head(MAX_PANELS)
    rng = rng or np.random.default_rng(0)
    points = result.table[result.table["config"].isin(shown["config"])]
    shared = points.duplicated(["config", "baseline_rate", "config_rate"], keep=False)
    # less than half the finest step between two rates, so a jittered point stays nearest its own rate
    step = 1 / max(1, int(points[["baseline_samples", "config_samples"]].to_numpy().max()))
    width = min(0.02, 0.4 * step) if shared.any() else 0.0
    columns = min(3, len(shown))
    rows = math.ceil(len(shown) / columns)
    t = result.threshold
    more = (f"; the {len(shown)} best by mean of {len(counts)} configs" if len(counts) > len(shown) else "")
    moved = (f"\nproblems sharing both rates jittered by up to ±{width:.3f} (never across a threshold line); "
             f"a number = problems at that point" if width else "")
    title = (f"Per-problem solve rate (share of correct samples over all counted runs): each config (y) vs the "
             f"in-sweep baseline {result.baseline} (x){more}\none dot per problem, colour = class at t = {t:g}; "
             f"descriptive, the verdict is the run-level test{moved}")
    wide = max(8.0, 4.4 * columns)  # inches; a lone panel gets room for the title and the legend
    title = "\n".join(textwrap.fill(line, int(13 * wide)) for line in title.split("\n"))
    fig, axes = plt.subplots(rows, columns, figsize=(wide, 5.3 * rows + 0.2 * title.count("\n") + 0.8),
                             squeeze=False, layout="constrained")
    family = len(counts)
    for ax, row in zip(axes.flat, shown.itertuples(index=False)):
        own = points[points["config"] == row.config]
        x, y = own["baseline_rate"].to_numpy(float, copy=True), own["config_rate"].to_numpy(float, copy=True)
        moved = shared[own.index].to_numpy()
        if moved.any():
            x[moved], y[moved] = jitter(x[moved], t, width, rng), jitter(y[moved], t, width, rng)
        stacks = own.groupby(["baseline_rate", "config_rate"]).size()
        for (bx, cy), size in stacks[stacks >= MIN_STACK_LABEL].items():
            ax.annotate(f"{size}", (bx, cy), xytext=(6 if bx < 0.5 else -14, 5 if cy < 0.5 else -13),
                        textcoords="offset points", fontsize=7, color="#333333")
        ax.plot([0, 1], [0, 1], color="#bbbbbb", lw=1, zorder=0)
        ax.axvline(t, color="black", ls=":", lw=1, zorder=0)
        ax.axhline(t, color="black", ls=":", lw=1, zorder=0)
        for kind in CLASSES:
            mask = (own["class"] == kind).to_numpy()
            ax.scatter(x[mask], y[mask], s=22, alpha=0.8, color=CLASS_COLORS[kind], edgecolor="white", lw=0.4,
                       zorder=2)
        ax.set_xlim(-0.05, 1.05)
        ax.set_ylim(-0.05, 1.05)
        ax.set_box_aspect(1)  # equal scales (same limits on both axes); keeps constrained layout in charge
        ax.set_xticks(np.linspace(0, 1, 6))
        ax.set_yticks(np.linspace(0, 1, 6))
        ax.set_xlabel(f"baseline solve rate ({_runs(row.baseline_runs)})", fontsize=9)
        ax.set_ylabel(f"config solve rate ({_runs(row.runs)})", fontsize=9)
        holm = f" (Holm {_p(row.p_holm)})" if family > 1 else ""
        ax.set_title(f"{row.config}\n{row.improved} improved, {row.degraded} degraded, {row.both_correct} both "
                     f"correct, {row.both_wrong} both wrong\nexact McNemar p {_p(row.p)}{holm}", fontsize=9)
    handles = [plt.Line2D([], [], ls="", marker="o", color=CLASS_COLORS[kind], label=kind) for kind in CLASSES]
    handles += [plt.Line2D([], [], color="#bbbbbb", label="y = x (no change)"),
                plt.Line2D([], [], color="black", ls=":", label=f"threshold t = {t:g} on both axes")]
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 3 * columns), fontsize=8,
               frameon=False)
    for ax in list(axes.flat)[len(shown):]:
        ax.set_visible(False)
    fig.suptitle(title, fontsize=10)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return list(shown["config"])
