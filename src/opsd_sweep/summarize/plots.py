"""Figures of a sweep, each readable on its own: titles say what is shown, axes carry units."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never needs a display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from scipy import stats as sps  # noqa: E402

from opsd_sweep.summarize.collect import TRAINING_KNOBS, is_base_model, short_names  # noqa: E402
from opsd_sweep.summarize.config_stats import (  # noqa: E402
    MIN_SPLIT_RUNS, Analysis, advice_runs_split, noise_left_out, seed_part_note)
from opsd_sweep.summarize.races import Race  # noqa: E402
from opsd_sweep.summarize.transitions import Transitions, plot_transitions  # noqa: E402
from opsd_sweep.inference import stats  # noqa: E402

VERDICT_COLORS = {"better": "#1a9850", "worse": "#d73027", "inconclusive": "#555555", "baseline": "#762a83"}
LOG_AXES = ("cfg.learning_rate",)


def anchor_band(analysis: Analysis, level: float) -> tuple[float, float] | None:
    """The anchor's mean +- its t-interval half-width (its own uncertainty over n runs), cut at 0 and 100
    for a percent score."""
    a = analysis.anchor
    if a is None:
        return None
    half = sps.t.ppf(0.5 + level / 2, a.n - 1) * a.sd / math.sqrt(a.n) if a.n > 1 else 0.0
    band = (a.mean - half, a.mean + half)
    return stats.bounded(*band, stats.SCORE_BOUNDS) if stats.is_percent_score(a.metric) else band


def _reference_lines(ax, analysis: Analysis, level: float, vertical: bool) -> None:
    band = anchor_band(analysis, level)
    span, line = (ax.axvspan, ax.axvline) if vertical else (ax.axhspan, ax.axhline)
    if band is not None:
        a = analysis.anchor
        span(*band, color="#fdae61", alpha=0.35, zorder=0,
             label=f"anchor: {a.label} {a.mean:.2f}, {level:.0%} CI [{band[0]:.2f}, {band[1]:.2f}] (n={a.n}, other setup)")
    if analysis.baseline is not None:
        mean = analysis.table.set_index("label").loc[analysis.baseline, "mean"]
        line(mean, color=VERDICT_COLORS["baseline"], ls="--", lw=1.2, label=f"in-sweep baseline: {analysis.baseline}")


def _suffix(simulated: bool) -> str:
    return "\nincludes SIMULATED runs (marked [simulated])" if simulated else ""


def plot_configs(analysis: Analysis, metric: str, display: str, level: float, path: Path) -> None:
    """Each config: its runs (dots), mean and t-interval; the anchor band and baseline line."""
    table = analysis.table.iloc[::-1].reset_index(drop=True)  # best on top
    fig, ax = plt.subplots(layout="constrained", figsize=(9, 1.4 + 0.5 * len(table)))
    _reference_lines(ax, analysis, level, vertical=True)
    runs = analysis.usable
    rng = np.random.default_rng(0)
    for y, row in table.iterrows():
        color = VERDICT_COLORS.get(row.get("verdict"), "#555555")
        scores = runs.loc[runs["label"] == row["label"], metric].to_numpy(float)
        ax.scatter(scores, y + rng.uniform(-0.12, 0.12, scores.size), s=14, color="#999999", zorder=2)
        ax.errorbar(row["mean"], y, xerr=[[row["mean"] - row["ci_low"]], [row["ci_high"] - row["mean"]]],
                    fmt="o", color=color, ms=7, capsize=4, lw=2, zorder=3)
        verdict = row.get("verdict")
        ax.annotate(f"n={row['n']}" + (f"  {verdict}" if isinstance(verdict, str) else ""), (1.01, y),
                    xycoords=("axes fraction", "data"), va="center", fontsize=9, color=color)
    ax.set_yticks(range(len(table)), table["label"])
    ax.set_ylim(-0.7, len(table) - 0.3)
    ax.set_xlabel(f"{display} (%), grey dots = single training runs")
    reference = table["verdict_vs"].iloc[0] if "verdict_vs" in table else "no reference"
    ax.set_title(f"{display} per config: mean and {level:.0%} t-interval over training runs\n"
                 f"(colour = verdict vs {reference}, Holm-adjusted)" + _suffix(analysis.table["simulated"].any()),
                 fontsize=10)
    if ax.get_legend_handles_labels()[0]:
        fig.legend(loc="outside lower center", fontsize=8, frameon=False)
    _save(fig, path)


def on_axis(table: pd.DataFrame, column: str) -> pd.DataFrame:
    """The configs that belong on a knob's axis: an untrained base model has no learning rate or step count."""
    if column.startswith(TRAINING_KNOBS):
        return table[~table["label"].map(is_base_model)]
    return table


def numeric_axes(analysis: Analysis) -> list[str]:
    """Swept config columns with numeric values and at least two distinct values among the configs on them."""
    axes = []
    for column in (c for c in analysis.table.columns if c.startswith("cfg.") and c != "cfg.seed"):
        table = on_axis(analysis.table, column)
        values = pd.to_numeric(table[column], errors="coerce")
        if values.notna().all() and values.nunique() >= 2 and table[column].map(type).ne(bool).all():
            axes.append(column)
    return axes


def plot_axis(analysis: Analysis, column: str, metric: str, display: str, level: float, path: Path) -> None:
    """Score against one swept numeric knob; one line per combination of the other swept knobs. An
    untrained base model is not placed on a training knob's axis (it is the baseline line, if chosen)."""
    table = on_axis(analysis.table, column).copy()
    others = [c for c in table.columns if c.startswith("cfg.") and c not in (column, "cfg.seed")]
    names = short_names([column, *others])
    log = column in LOG_AXES or (table[column].min() > 0 and table[column].max() / table[column].min() >= 20)
    fig, ax = plt.subplots(layout="constrained", figsize=(8, 5))
    _reference_lines(ax, analysis, level, vertical=False)
    runs = analysis.usable
    groups = list(table.groupby([table[c].astype(str) for c in others], sort=False)) if others else [((), table)]
    groups.sort(key=lambda item: [_sort_key(v) for v in item[1][others].iloc[0]] if others else [])
    for index, (key, group) in enumerate(groups):
        group = group.sort_values(column)
        name = ", ".join(f"{names[c]}={v}" for c, v in zip(others, np.atleast_1d(key))) or "runs"
        simulated = bool(group["simulated"].any())
        x = _dodge(group[column].to_numpy(float), index, len(groups), log, table[column])
        line = ax.errorbar(x, group["mean"], yerr=[group["mean"] - group["ci_low"], group["ci_high"] - group["mean"]],
                           fmt=axis_format(table[column].nunique(), simulated), capsize=4, lw=1.5,
                           label=f"mean ± {level:.0%} CI: {name}" + (" [simulated]" if simulated else ""))
        for xi, (_, row) in zip(x, group.iterrows()):
            scores = runs.loc[runs["label"] == row["label"], metric].to_numpy(float)
            ax.scatter(np.full(scores.size, xi), scores, s=12, alpha=0.5, color=line[0].get_color())
    if log:
        ax.set_xscale("log")
    ax.set_xticks(sorted(table[column].unique()), [f"{v:g}" for v in sorted(table[column].unique())])
    ax.minorticks_off()
    full = column.removeprefix("cfg.")
    ax.set_xlabel((names[column] if names[column] == full else f"{names[column]} ({full})") + (", log scale" if log else ""))
    ax.set_ylabel(f"{display} (%), small dots = single runs")
    ax.set_title(f"{display} against {names[column]}: mean and {level:.0%} t-interval per config, dots = runs"
                 + _suffix(analysis.table["simulated"].any()), fontsize=10)
    fig.legend(loc="outside lower center", fontsize=8, frameon=False, ncol=2)
    _save(fig, path)


def axis_format(values: int, simulated: bool) -> str:
    """Markers joined by a line only over three or more values of the knob: a line through two draws a
    trend that two points cannot show."""
    if values < 3:
        return "o"
    return "o--" if simulated else "o-"


def _sort_key(value) -> tuple:
    """Numbers in numeric order, then everything else as text."""
    try:
        return (0, float(value), "")
    except (TypeError, ValueError):
        return (1, 0.0, str(value))


def _dodge(x: np.ndarray, index: int, count: int, log: bool, values: pd.Series) -> np.ndarray:
    """Shift line `index` of `count` sideways a little so that error bars at the same x stay apart."""
    offset = (index - (count - 1) / 2) * 0.03
    if log:
        return x * 10 ** (offset * np.log10(values.max() / values.min()) / 2)
    return x + offset * (values.max() - values.min()) / 2


MIN_FIT_CONFIGS = 3  # a line through two configs' clouds only joins two means
KL_COLUMN = "train.kl_true.tail"  # runs.csv: mean kl_true over the last 10% of training steps


def plot_kl(usable: pd.DataFrame, metric: str, display: str, kl_column: str, path: Path) -> bool:
    """Score against the final training kl_true of each finished run (`usable`: runs.csv rows). A
    least-squares line per data kind (real and simulated runs apart) only over at least MIN_FIT_CONFIGS
    configs, labelled descriptive: runs of one config are not independent points, so its slope is no
    test. False when there is nothing to show."""
    runs = usable.dropna(subset=[kl_column, metric]) if kl_column in usable else None
    if runs is None or len(runs) < 2 or runs[kl_column].nunique() < 2:
        return False
    fig, ax = plt.subplots(layout="constrained", figsize=(8, 5))
    for label, group in runs.groupby("label", sort=False):
        ax.scatter(group[kl_column], group[metric], s=26, label=label,
                   marker="x" if group["simulated"].any() else "o")
    for simulated, kind in runs.groupby("simulated"):
        if kind["label"].nunique() < MIN_FIT_CONFIGS or kind[kl_column].nunique() < 2:
            continue
        fit = sps.linregress(kind[kl_column], kind[metric])
        xs = np.linspace(kind[kl_column].min(), kind[kl_column].max(), 50)
        ax.plot(xs, fit.intercept + fit.slope * xs, color="black", lw=1.2, ls="--" if simulated else "-",
                label=f"descriptive least-squares line ({'simulated' if simulated else 'real'} runs, not a test): "
                      f"slope {fit.slope:.3g}, r = {fit.rvalue:.2f}")
    ax.set_xlabel("final kl_true: mean forward KL(teacher || student) per token over the last 10% of steps")
    ax.set_ylabel(f"{display} (%)")
    ax.set_title(f"{display} against the final training KL, one mark per run" + _suffix(runs["simulated"].any()),
                 fontsize=10)
    ax.legend(fontsize=8, loc="best")
    _save(fig, path)
    return True


def plot_variance(analysis: Analysis, display: str, level: float, path: Path) -> bool:
    """Per config with >= MIN_SPLIT_RUNS runs: eval-sampling SD, training-seed SD with its interval, and
    the observed run-to-run SD, in points (SDs, not variances: the intervals of 3-5 runs span decades
    of variance). False if no config has the data."""
    table = analysis.table.dropna(subset=["eval_sd"]) if "eval_sd" in analysis.table else pd.DataFrame()
    if table.empty or not (table["sd"] ** 2 + table["eval_sd"] ** 2).max() > 0:
        return False  # nothing to split (no per-sample data, or every run scored the same)
    table = table.iloc[::-1].reset_index(drop=True)
    fig, ax = plt.subplots(layout="constrained", figsize=(9, 1.8 + 0.6 * len(table)))
    y = np.arange(len(table))
    seed = table["train_sd"].fillna(0.0)
    ax.scatter(table["eval_sd"], y + 0.15, marker="s", s=40, color="#4393c3", zorder=3,
               label="eval-sampling SD (more samples per problem reduce it)")
    ax.errorbar(seed, y - 0.15, xerr=[seed - table["train_sd_low"], table["train_sd_high"] - seed], fmt="o",
                color="#d6604d", capsize=4, lw=1.5, zorder=3,
                label=f"training-seed SD and its {level:.0%} CI (only more seeds reduce it; for an untrained "
                      f"base model the same remainder has no training behind it: expected 0)")
    ax.scatter(table["sd"], y, marker="|", s=500, color="black", zorder=4, label="observed run-to-run SD")
    for i, row in table.iterrows():
        note = seed_part_note(row)
        ax.annotate(f"n={row['n']}: {note} [{row['train_sd_low']:.2f}, {row['train_sd_high']:.2f}]",
                    (table["train_sd_high"].max(), i), xytext=(10, 0), textcoords="offset points", va="center",
                    fontsize=8)
    ax.set_yticks(y, table["label"])
    ax.set_xlim(0, 1.45 * table["train_sd_high"].max())
    ax.set_xlabel(f"SD of one run's {display} (points)")
    left = noise_left_out(analysis.table)  # a config left out says why, here as in summary.md's Noise section
    ax.set_title(f"Where the run-to-run noise of {display} comes from (configs with ≥ {MIN_SPLIT_RUNS} runs)"
                 + "".join(f"\nnot shown: {label} ({why})" for label, why in left.items())
                 + _suffix(analysis.table["simulated"].any()), fontsize=10)
    fig.legend(loc="outside lower center", fontsize=8, frameon=False)
    _save(fig, path)
    return True


def plot_decision_cost(analysis: Analysis, display: str, path: Path) -> bool:
    """GPU-hours per config that the seeds needed for the target effect cost, by samples per problem K,
    with the runs' K, larger_k and the cost-optimal K marked. False without per-phase GPU-hours, or where the
    seeds advice gives no split of the noise (the curve rests on one)."""
    p = analysis.power
    rows = [r for r in p.get("cost_by_k", []) if r["gpu_h"] is not None]
    if not rows or not advice_runs_split(analysis):
        return False
    fig, ax = plt.subplots(layout="constrained", figsize=(8, 4.5))
    ks, hours = [r["k"] for r in rows], [r["gpu_h"] for r in rows]
    ax.plot(ks, hours, "o-", color="#2166ac", ms=4, label="seeds needed x (training + K samples' evaluation)")
    marks = {p["k"]: ("the runs' K", "black"), p["larger_k"]: ("larger_k", "#777777")}
    for k, (name, color) in marks.items():
        if k in ks:
            ax.scatter([k], [hours[ks.index(k)]], s=90, facecolors="none", edgecolors=color, lw=1.8, zorder=4,
                       label=f"{name}: K = {k}, {hours[ks.index(k)]:.1f} GPU-h")
    optimum = p.get("k_optimal")
    if optimum is not None and min(ks) <= optimum <= max(ks):
        ax.axvline(optimum, color="#b2182b", ls="--", lw=1,
                   label=f"K ≈ {optimum:.0f}: most precision per GPU-hour (two-stage optimum)")
    elif optimum is not None:  # said, not drawn: a line far outside would stretch the axis
        ax.plot([], [], " ", label=f"most precision per GPU-hour at K ≈ {optimum:.0f}, outside this range")
    ax.set_xscale("log", base=2)
    ticks = [2**i for i in range(int(math.log2(max(ks))) + 1)]
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.set_ylim(bottom=0)
    ax.set_xlabel("samples per problem K (log scale)")
    ax.set_ylabel("GPU-hours per config")
    ax.set_title(f"Cost of detecting +{p['target_effect']:g} points of {display} with {p['power']:.0%} power, by K\n"
                 f"(pooled SD {p['sd']:.2f} split: eval SD {p['eval_sd']:.2f} at K = {p['k']}, shrinking as 1/√K; "
                 f"a run: {p['train_gpu_h']:.2f} GPU-h training + {p['eval_gpu_h']:.2f} eval, eval taken ∝ K)"
                 + _suffix(analysis.table["simulated"].any()), fontsize=9)
    ax.legend(fontsize=8, frameon=False)
    _save(fig, path)
    return True


def write_plots(analysis: Analysis, metric: str, display: str, level: float, out: Path,
                transitions: Transitions | None = None) -> list[Path]:
    """All figures under out/plots/ (transitions.png with the per-problem transitions); returns the files written."""
    folder = out / "plots"
    folder.mkdir(parents=True, exist_ok=True)
    written = [folder / "score_per_config.png"]
    plot_configs(analysis, metric, display, level, written[0])
    names = short_names(numeric_axes(analysis))
    for column in numeric_axes(analysis):
        path = folder / f"score_vs_{names[column].replace('.', '_')}.png"
        plot_axis(analysis, column, metric, display, level, path)
        written.append(path)
    if plot_kl(analysis.usable, metric, display, KL_COLUMN, folder / "score_vs_kl_true.png"):
        written.append(folder / "score_vs_kl_true.png")
    if plot_variance(analysis, display, level, folder / "variance_decomposition.png"):
        written.append(folder / "variance_decomposition.png")
    if plot_decision_cost(analysis, display, folder / "decision_cost_by_k.png"):
        written.append(folder / "decision_cost_by_k.png")
    if transitions is not None and plot_transitions(transitions, folder / "transitions.png"):
        written.append(folder / "transitions.png")
    return written


def plot_race(race: Race, path: Path) -> bool:
    """Per config: mean and CI band against the race round; eliminations marked where they happened;
    the final verdict rows and the winner's fresh-seed confirmation right of the last round. False
    when the race has no assessed round yet."""
    timeline = race.timeline
    if timeline.empty:
        return False
    settings = race.header.get("settings", {})
    level = 1 - settings.get("alpha", 0.05)
    last = int(timeline["round"].max())
    every = math.ceil((last + 1) / 12)  # at most ~12 labelled rounds: more would overprint each other
    final_x = last + every  # as far right of the last round as labelled rounds are apart
    count = len(race.header["configs"])
    dodge = 0.12 * every  # final rows side by side; their labels go right of the rightmost
    label_x = final_x + (count - 1) / 2 * dodge + 0.1
    fig, ax = plt.subplots(layout="constrained", figsize=(10, 6))
    colors = iter(plt.get_cmap("tab10").colors)
    final_labels = []  # (mean, text, colour) of each final row: placed once the y-range is known
    for index, config in enumerate(race.header["configs"]):
        rows = timeline[timeline["config"] == config].sort_values("round")
        final = race.final[race.final["config"] == config]
        is_baseline = config == race.header.get("baseline")
        color = VERDICT_COLORS["baseline"] if is_baseline else next(colors)
        if rows.empty:
            continue
        name = config + (" (in-sweep baseline)" if is_baseline else "") + (" (winner)" if config == race.winner else "")
        x = rows["round"].to_numpy(float)
        ax.fill_between(x, rows["ci_low"], rows["ci_high"], color=color, alpha=0.12 if not is_baseline else 0.08,
                        hatch="//" if is_baseline else None, edgecolor=color if is_baseline else None, lw=0)
        ax.plot(x, rows["mean"], "--" if is_baseline else "-", marker="o", ms=4, color=color,
                lw=2.2 if is_baseline else 1.6, label=name)
        gone = race.eliminations[race.eliminations["config"] == config]
        if not gone.empty:
            end = rows.iloc[-1]
            what = {"eliminate": "eliminated", "futile": "futile"}.get(gone["action"].iloc[0], "dropped")
            ax.scatter(end["round"], end["mean"], marker="X", s=140, color=color, edgecolor="black", zorder=4)
            ax.annotate(f"{what} r{int(gone['round'].iloc[0])}", (end["round"], end["mean"]), xytext=(6, -12),
                        textcoords="offset points", fontsize=8, color=color)
        if not final.empty:
            row = final.iloc[0]
            dx = final_x + (index - (count - 1) / 2) * dodge
            ax.plot([x[-1], dx], [rows["mean"].iloc[-1], row["mean"]], ":", color=color, lw=1)
            ax.errorbar(dx, row["mean"], yerr=[[row["mean"] - row["ci_low"]], [row["ci_high"] - row["mean"]]],
                        fmt="s", color=color, ms=6, capsize=4, lw=2, zorder=3)
            final_labels.append((row["mean"], f"n={row['n']} {row['action']}", color))
            if pd.notna(row["confirm_n"]):
                ax.scatter(dx - dodge / 2, row["confirm_mean"], marker="*", s=260, color=color, edgecolor="black", zorder=5,
                           label=f"winner's confirmation: mean of {int(row['confirm_n'])} fresh seeds alone")
    anchor = race.header.get("anchor")
    if anchor:
        ax.axhline(anchor["mean"], color="#fdae61", lw=1.5, ls="-.", zorder=0,
                   label=f"published anchor {anchor['mean']:.2f} (reported only)")
    if race.stop is not None:
        ax.axvline(race.stop["round"] + 0.5, color="#999999", lw=1, ls=":")
        ax.annotate(f"stop: {race.stop['reason']}", (race.stop["round"] + 0.5, 1.0), xycoords=("data", "axes fraction"),
                    xytext=(-4, -4), textcoords="offset points", ha="right", va="top", fontsize=8, color="#555555")
    low, high = ax.get_ylim()
    for y, (_, text, color) in zip(spread([m for m, _, _ in final_labels], 0.035 * (high - low)), final_labels):
        ax.annotate(text, (label_x, y), fontsize=8, va="center", color=color)
    ns = timeline.groupby("round")["n"].max()
    # counted back from the last round, so that it is labelled and the spacing stays even
    ticks = {r: f"{r}\nn={ns.get(r, '–')}" if (last - r) % every == 0 else "" for r in range(last + 1)}
    if not race.final.empty:
        ticks[final_x] = "final\n(all runs)"
    ax.set_xticks(list(ticks), list(ticks.values()))
    right = final_x + 0.7 * every + count * dodge / 2 if not race.final.empty else last + 0.7
    ax.set_xlim(-0.4 * every, right)
    ax.set_xlabel("race round (n = runs per live config)")
    ax.set_ylabel(f"{race.header.get('metric')} (%)")
    outcome = f"stopped after round {race.stop['round']}, winner {race.winner}" if race.stop else "not finished"
    simulated = "\nincludes SIMULATED runs" if race.totals["simulated"] else ""
    ax.set_title(f"Race progress ({race.path}): mean and {level:.0%} CI per config by round "
                 f"(SD pooled across live configs)\n{outcome}; X = left the race" + simulated, fontsize=10)
    fig.legend(loc="outside lower center", fontsize=8, frameon=False, ncol=2)
    _save(fig, path)
    return True


def spread(values: list[float], gap: float) -> list[float]:
    """Label heights near `values` (same order) at least `gap` apart: labels that would overlap form a
    block centred on their marks' mean; labels clear of the others stay at their marks."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    blocks: list[list[int]] = []  # runs of indices (in `order`) laid out `gap` apart around their mean

    def bottom(block: list[int]) -> float:
        return sum(values[i] for i in block) / len(block) - gap * (len(block) - 1) / 2

    for i in order:
        blocks.append([i])
        while len(blocks) > 1 and bottom(blocks[-1]) < bottom(blocks[-2]) + gap * len(blocks[-2]):
            blocks[-2:] = [blocks[-2] + blocks[-1]]  # overlaps the block below: merge and re-centre
    out = [0.0] * len(values)
    for block in blocks:
        for rank, i in enumerate(block):
            out[i] = bottom(block) + rank * gap
    return out


def write_race_plots(races: list[Race], out: Path) -> list[Path | None]:
    """plots/race_progress.png (one race) or race_progress_<folder>.png (several); None where no plot."""
    folder = out / "plots"
    folder.mkdir(parents=True, exist_ok=True)
    written: list[Path | None] = []
    for index, race in enumerate(races):
        suffix = "" if len(races) == 1 else f"_{race.path.parent.name or index}"
        path = folder / f"race_progress{suffix}.png"
        if path in written:  # two roots with the same group name
            path = folder / f"race_progress{suffix}_{index}.png"
        written.append(path if plot_race(race, path) else None)
    return written


def _save(fig, path: Path) -> None:
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
