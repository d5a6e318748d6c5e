"""Per-config statistics table: intervals, variance split, tests vs baseline and anchor, verdicts, power.

Input: the runs table of `collect` (one row per run) and its samples table. Output: one row per
config (= one label: all varying columns except the seed), the content of summary.csv.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from opsd_sweep.analysis import stats
from opsd_sweep.analysis.collect import short_names
from opsd_sweep.analysis.settings import Anchor, SummarySettings


@dataclass
class Analysis:
    table: pd.DataFrame  # one row per config, sorted by mean (best first)
    usable: pd.DataFrame  # the runs that entered the statistics
    baseline: str | None  # label of the in-sweep baseline
    anchor: Anchor | None  # the anchor actually compared (None when absent or another metric)
    pooled_sd: float
    pooled_df: int
    notes: list[str] = field(default_factory=list)  # plain-language statements for the report
    power: dict = field(default_factory=dict)  # sweep-level seeds-needed advice


# --- inputs --------------------------------------------------------------------------------------

def usable_runs(runs: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Finished runs with a value of the metric; raises naming the available metrics when it is absent."""
    if metric not in runs.columns:
        known = [c for c in runs.columns if c.startswith(("avg_at", "pass_at", "maj_at")) or c.endswith("_rate")]
        raise ValueError(f"metric {metric!r} is in no run; use one of {known} (--metric)")
    return runs[(runs["state"] == "done") & runs[metric].notna()].copy()


def problem_matrices(usable: pd.DataFrame, samples: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """label -> (runs x problems) mean correctness in percent, for configs whose every run has samples."""
    if samples.empty:
        return {}
    per_problem = (samples[samples["run_id"].isin(usable["run_id"])]
                   .groupby(["run_id", "problem"])["correct"].mean().mul(100).unstack("problem"))
    out = {}
    for label, group in usable.groupby("label", sort=False):
        ids = group["run_id"].tolist()
        if all(i in per_problem.index for i in ids):
            matrix = per_problem.loc[ids].dropna(axis=1)
            if matrix.shape[1] >= 2:
                out[label] = matrix
    return out


def select_baseline(table: pd.DataFrame, selector: str | None) -> str | None:
    """The label of the in-sweep baseline: `selector` is a label, or `col=value[,col=value]` terms.

    Columns may be named as in the labels (`lr`, `clip`) or without the `cfg.` prefix; values compare as
    numbers when both sides are numbers. Raises naming the configs when it matches none or several.
    """
    if selector is None:
        return None
    if selector in set(table["label"]):
        return selector
    config_columns = [c for c in table.columns if c.startswith("cfg.")]
    by_name = {name: column for column, name in short_names(config_columns).items()}
    by_name |= {c.removeprefix("cfg."): c for c in config_columns} | {c: c for c in config_columns}
    mask = pd.Series(True, index=table.index)
    for term in selector.split(","):
        name, sep, value = term.strip().partition("=")
        column = by_name.get(name.strip())
        if not sep or column is None:
            raise ValueError(f"baseline selector {selector!r}: {term.strip()!r} is not a label or a column=value "
                             f"term; configs: {list(table['label'])}")
        mask &= table[column].map(lambda v, want=value.strip(): _same_value(v, want))
    matched = table.loc[mask, "label"].tolist()
    if len(matched) != 1:
        raise ValueError(f"baseline selector {selector!r} matches {len(matched)} configs {matched}; it must match "
                         f"exactly one of {list(table['label'])}")
    return matched[0]


def _same_value(value, wanted: str) -> bool:
    if wanted.lower() in ("none", "null"):  # an unset knob (loss_top_k=null) is a missing value in the table
        return value is None or (isinstance(value, float) and math.isnan(value))
    try:
        return math.isclose(float(value), float(wanted), rel_tol=1e-9)
    except (TypeError, ValueError):
        return str(value) == wanted


# The mean correctness over every problem x sample in samples.parquet: paired by problem, bootstrapped,
# split into noise parts. `pooled` is an eval suite's avg@n over the union of its benchmarks' problems.
PER_PROBLEM_METRICS = ("avg_at_n", "pooled")


# --- per config ----------------------------------------------------------------------------------

def describe_configs(usable: pd.DataFrame, metric: str, s: SummarySettings, matrices: dict,
                     rng: np.random.Generator) -> tuple[pd.DataFrame, float, int]:
    """n, mean, sd, the SD used (sample / pooled / assumed), t-interval, bootstrap, variance split."""
    axes = [c for c in usable.columns if c.startswith("cfg.") and c != "cfg.seed"]
    groups = list(usable.groupby("label", sort=False))
    sp, sp_df = stats.pooled_sd([g[metric].to_numpy(float) for _, g in groups])
    rows = []
    for label, group in groups:
        scores = group[metric].to_numpy(float)
        n = scores.size
        if s.pool_sd and sp_df:
            sd_used, df_used, source = sp, sp_df, "pooled"
        elif n >= 2:
            sd_used, df_used, source = float(scores.std(ddof=1)), n - 1, "sample"
        elif sp_df:
            sd_used, df_used, source = sp, sp_df, "pooled (1 run)"
        else:
            sd_used, df_used, source = s.assumed_sd, math.inf, "assumed (1 run)"
        ci = stats.t_interval(scores, s.level, sd=sd_used, df=df_used)
        row = {"label": label, **{c: group[c].iloc[0] for c in axes},
               "external": bool(group["external"].any()), "simulated": bool(group["simulated"].any()),
               "n": n, "mean": ci.estimate, "sd": float(scores.std(ddof=1)) if n > 1 else math.nan,
               "se": ci.se, "sd_used": sd_used, "sd_df": df_used, "sd_source": source,
               "ci_low": ci.low, "ci_high": ci.high}
        if label in matrices and n >= 2 and s.bootstrap_reps > 0:
            boot = stats.hierarchical_bootstrap_ci(matrices[label].to_numpy(), rng, level=s.level,
                                                   n_boot=s.bootstrap_reps)
            row |= {"boot_low": boot.low, "boot_high": boot.high}
        per_problem = metric in PER_PROBLEM_METRICS and "eval_var" in group
        if per_problem and group["eval_var"].notna().all() and n >= 2:
            split = stats.variance_decomposition(scores, group["eval_var"].to_numpy(float))
            row |= {"eval_sd": math.sqrt(split.eval_var), "train_sd": math.sqrt(split.train_var),
                    "eval_share": split.eval_share}
        if "n_samples" in group:
            row["k"] = group["n_samples"].iloc[0]
        if "gpu_hours.total" in group:
            row["gpu_hours"] = float(group["gpu_hours.total"].sum())
        rows.append(row)
    return pd.DataFrame(rows), sp, sp_df


def compare_to_baseline(table: pd.DataFrame, baseline: str, matrices: dict, s: SummarySettings,
                        pooled: tuple[float, int], rng: np.random.Generator) -> pd.DataFrame:
    """delta vs the in-sweep baseline: paired by problem when both arms have >= 2 runs with samples,
    else Welch on run scores (with the SD each arm uses); pooled t when pool_sd is on. With samples,
    also the hierarchical bootstrap interval of the difference (same problem draws in both arms)."""
    base = table.set_index("label").loc[baseline]
    out = []
    for _, row in table.iterrows():
        if row["label"] == baseline:
            out.append({"vs_baseline": "is baseline"})
            continue
        label = row["label"]
        common = (matrices[label].columns.intersection(matrices[baseline].columns)
                  if label in matrices and baseline in matrices else [])
        if s.pool_sd and pooled[1]:
            var = pooled[0] ** 2 * (1 / row["n"] + 1 / base["n"])
            comp, method = stats.welch_difference(row["mean"], var, pooled[1], base["mean"], 0.0, math.inf,
                                                  s.level), "pooled t (runs)"
        elif len(common) >= 2 and row["n"] >= 2 and base["n"] >= 2:
            comp = stats.paired_by_problem(matrices[label][common].to_numpy(), matrices[baseline][common].to_numpy(),
                                           s.level)
            method = "paired by problem"
        else:
            comp = stats.welch_difference(row["mean"], row["sd_used"] ** 2 / row["n"], row["sd_df"], base["mean"],
                                          base["sd_used"] ** 2 / base["n"], base["sd_df"], s.level)
            method = "Welch (runs)"
        cells = {"vs_baseline": method, "delta_baseline": comp.delta, "baseline_low": comp.low,
                 "baseline_high": comp.high, "p_baseline": comp.p}
        if len(common) >= 2 and row["n"] >= 2 and base["n"] >= 2 and s.bootstrap_reps > 0:
            boot = stats.hierarchical_bootstrap_ci(matrices[label][common].to_numpy(), rng, level=s.level,
                                                   baseline=matrices[baseline][common].to_numpy(),
                                                   n_boot=s.bootstrap_reps)
            cells |= {"boot_delta_low": boot.low, "boot_delta_high": boot.high}
        out.append(cells)
    return pd.DataFrame(out, index=table.index)


def compare_to_anchor(table: pd.DataFrame, usable: pd.DataFrame, metric: str, anchor: Anchor,
                      s: SummarySettings) -> pd.DataFrame:
    """delta vs the published anchor: Welch with the anchor's mean, SD and n."""
    out = []
    for _, row in table.iterrows():
        scores = usable.loc[usable["label"] == row["label"], metric].to_numpy(float)
        comp = stats.welch_vs_anchor(scores, anchor.mean, anchor.sd, anchor.n, s.level,
                                     sd=row["sd_used"], df=row["sd_df"])
        out.append({"delta_anchor": comp.delta, "anchor_low": comp.low, "anchor_high": comp.high,
                    "p_anchor": comp.p})
    return pd.DataFrame(out, index=table.index)


def adjust(table: pd.DataFrame, prefix: str) -> None:
    """Holm (claims) and BH (screening) across the configs compared to one reference, in place."""
    p = table[f"p_{prefix}"].to_numpy(float)
    table[f"p_{prefix}_holm"] = stats.holm(p)
    table[f"q_{prefix}_bh"] = stats.benjamini_hochberg(p)


# --- power ---------------------------------------------------------------------------------------

def larger_k_sd(sd: float, eval_sd: float, k: float, larger_k: int) -> float:
    """Run-to-run SD if each run were evaluated with larger_k samples per problem instead of k.

    Eval-sampling variance scales as 1/K; the training-seed part stays.
    """
    train_var = max(0.0, sd**2 - eval_sd**2)
    return math.sqrt(train_var + eval_sd**2 * k / larger_k)


def power_columns(table: pd.DataFrame, s: SummarySettings, baseline: str | None, anchor: Anchor | None,
                  family: int) -> pd.DataFrame:
    """MDE at the current n (vs the baseline's runs, or the anchor), and seeds per config for
    target_effect vs the same reference (in-sweep: both arms get that many seeds), single test and Holm."""
    if baseline is not None:
        base = table.set_index("label").loc[baseline]
        ref, current = {}, {"ref_sd": base["sd_used"], "ref_n": int(base["n"])}
    elif anchor is not None:
        ref = current = {"ref_sd": anchor.sd, "ref_n": anchor.n}
    else:
        return pd.DataFrame(index=table.index)
    out = []
    for _, row in table.iterrows():
        sd, n = row["sd_used"], int(row["n"])
        if row["label"] == baseline or not sd > 0:
            out.append({})
            continue
        cols = {"mde": stats.min_detectable_effect(sd, n, s.alpha, s.power, **current) if n >= 2 else math.nan,
                "seeds_needed": stats.seeds_needed(s.target_effect, sd, s.alpha, s.power, **ref),
                "seeds_needed_holm": stats.seeds_needed(s.target_effect, sd, s.alpha / family, s.power, **ref)}
        if row.get("eval_sd", math.nan) == row.get("eval_sd", math.nan) and row.get("k", 0) >= 2:
            sd_k = larger_k_sd(sd, row["eval_sd"], row["k"], s.larger_k)
            cols["seeds_needed_larger_k"] = stats.seeds_needed(s.target_effect, sd_k, s.alpha, s.power, **ref)
        out.append(cols)
    return pd.DataFrame(out, index=table.index, dtype=object)


def sweep_power(table: pd.DataFrame, usable: pd.DataFrame, s: SummarySettings, reference: str | None,
                anchor: Anchor | None, pooled: tuple[float, int], family: int) -> dict:
    """Seeds-needed advice at the sweep's pooled SD (more stable than any one config's SD)."""
    sd, sd_df = pooled
    source = "pooled run-to-run SD"
    if not sd_df:
        sd, source = s.assumed_sd, "assumed run-to-run SD (no config has 2 runs)"
    if reference is None or not sd > 0:
        return {"reference": None}
    ref = {"ref_sd": anchor.sd, "ref_n": anchor.n} if reference == "anchor" else {}
    advice = {"sd": sd, "sd_source": source, "reference": reference, "family": family,
              "seeds": stats.seeds_needed(s.target_effect, sd, s.alpha, s.power, **ref),
              "seeds_holm": stats.seeds_needed(s.target_effect, sd, s.alpha / max(family, 1), s.power, **ref)}
    eval_var = usable["eval_var"].dropna() if "eval_var" in usable else pd.Series(dtype=float)
    k = usable["n_samples"].dropna().unique() if "n_samples" in usable else []
    if s.metric in PER_PROBLEM_METRICS and len(eval_var) and len(k) == 1 and k[0] >= 2 and s.larger_k > k[0]:
        eval_sd = math.sqrt(min(eval_var.mean(), sd**2))
        sd_k = larger_k_sd(sd, eval_sd, float(k[0]), s.larger_k)
        advice |= {"k": int(k[0]), "eval_sd": eval_sd, "sd_larger_k": sd_k,
                   "seeds_larger_k": stats.seeds_needed(s.target_effect, sd_k, s.alpha, s.power, **ref)}
    return advice


# --- the table -----------------------------------------------------------------------------------

def analyse(runs: pd.DataFrame, samples: pd.DataFrame, s: SummarySettings, anchor: Anchor | None) -> Analysis:
    """All per-config statistics for the metric `s.metric`, sorted by mean."""
    usable = usable_runs(runs, s.metric)
    if usable.empty:
        raise ValueError(f"no finished run has {s.metric!r}; check the roots and the states in runs.csv")
    matrices = problem_matrices(usable, samples) if s.metric in PER_PROBLEM_METRICS else {}
    rng = np.random.default_rng(s.bootstrap_seed)
    table, sp, sp_df = describe_configs(usable, s.metric, s, matrices, rng)
    notes = []
    baseline = select_baseline(table, s.baseline)
    if baseline is not None:
        table = table.join(compare_to_baseline(table, baseline, matrices, s, (sp, sp_df), rng))
        adjust(table, "baseline")
    if anchor is not None and anchor.metric != s.metric:
        notes.append(f"The anchor reports {anchor.metric}, not {s.metric}: no comparison with it.")
        anchor = None
    if anchor is not None:
        table = table.join(compare_to_anchor(table, usable, s.metric, anchor, s))
        adjust(table, "anchor")
    reference = "baseline" if baseline is not None else ("anchor" if anchor is not None else None)
    family = int(len(table) - (baseline is not None))
    if reference is not None:
        table["verdict"] = [("baseline" if row.get("vs_baseline") == "is baseline"
                             else stats.verdict(row[f"delta_{reference}"], row[f"p_{reference}_holm"], s.alpha))
                            for _, row in table.iterrows()]
        table["verdict_vs"] = "in-sweep baseline" if reference == "baseline" else "anchor"
    table = table.join(power_columns(table, s, baseline, anchor, max(family, 1)))
    table["flags"] = flags(table, baseline)
    table = table.sort_values("mean", ascending=False, kind="stable").reset_index(drop=True)
    power = sweep_power(table, usable, s, reference, anchor, (sp, sp_df), max(family, 1))
    return Analysis(table, usable, baseline, anchor, sp, sp_df, notes, power)


def flags(table: pd.DataFrame, baseline: str | None) -> list[str]:
    """Per config: simulated / external data, 1-run SD assumption, winner's curse on the top mean."""
    contenders = table[table["label"] != baseline]
    top = contenders["mean"].idxmax() if len(contenders) >= 2 else None
    out = []
    for index, row in table.iterrows():
        marks = []
        if row["simulated"]:
            marks.append("SIMULATED data")
        if row["external"]:
            marks.append("external results")
        if row["n"] == 1:
            marks.append(f"1 run: no own SD, used {row['sd_source'].split(' ')[0]} SD {row['sd_used']:.2f}")
        if index == top:
            marks.append(f"best of {len(contenders)}: winner's curse, confirm on fresh seeds")
        out.append("; ".join(marks))
    return out
