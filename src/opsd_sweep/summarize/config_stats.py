"""Per-config statistics table: intervals, noise split, tests vs baseline and anchor, verdicts, power.

Input: the runs table of `collect` (one row per run). Output: one row per config (= one label: all
varying columns except the seed), the content of summary.csv. The target is stated in inference.stats:
the benchmark's problems are held fixed, so every number here works on run scores.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from opsd_sweep.summarize.collapses import WITHHELD
from opsd_sweep.summarize.collect import TRAINING_KNOBS, is_base_model
from opsd_sweep.summarize.metric_scope import check_metric_scope
from opsd_sweep.summarize.settings import SummarySettings
from opsd_sweep.inference import stats
from opsd_sweep.inference.arms import Anchor, Arm, RunSD, anchor_arm, compare_arms, run_sd
from opsd_sweep.inference.cost_by_k import decision_cost_by_k, run_gpu_hours_at_k, sd_at_k
from opsd_sweep.inference.design import cost_optimal_k, seeds_needed_paired
from opsd_sweep.inference.pairing import SeedPairing, by_seed, paired_by_seed, pooled_seed_correlation
from opsd_sweep.inference.sensitivity import verdict_holds_to_sd
from opsd_sweep.inference.verdicts import family_verdicts
from opsd_sweep.selector import SelectorError, select_config


@dataclass
class Analysis:
    table: pd.DataFrame  # one row per config, sorted by mean (best first)
    usable: pd.DataFrame  # the runs that entered the statistics
    baseline: str | None  # label of the in-sweep baseline
    baseline_how: str  # how it was chosen: "--baseline ...", "auto: the untrained base model", or why none
    anchor: Anchor | None  # the anchor actually compared (None when absent or another metric)
    pool: Pool
    notes: list[str] = field(default_factory=list)  # plain-language statements for the report
    power: dict = field(default_factory=dict)  # sweep-level seeds-needed advice
    pairing: dict = field(default_factory=dict)  # pairing=seed: pooled seed correlation, seeds paired vs unpaired


# --- inputs --------------------------------------------------------------------------------------

def usable_runs(runs: pd.DataFrame, metric: str, collapsed_score: float | None = None) -> pd.DataFrame:
    """The runs that count (collect's `counts`: run.record.RunRecord.left_out) with a value of the metric,
    and, when `collapsed_score` is declared, the runs stopped at their collapse scored at it. Raises naming
    the available metrics when the metric is absent."""
    counted = runs["counts"].astype(bool)
    if not counted.any():
        states = ", ".join(f"{n} {state}" for state, n in runs["state"].value_counts().items())
        raise ValueError(f"no run finished with scores that count ({states}): nothing to compare yet; runs.csv "
                         "lists each run's state and why it is left out")
    if metric not in runs.columns or metric.startswith(NOT_SCORES):
        raise ValueError(f"metric {metric!r} is in no run; use one of {metric_columns(runs)} (--metric)")
    usable = runs[counted & runs[metric].notna()]
    stopped = runs[runs["state"] == "collapsed"]
    if collapsed_score is None or stopped.empty:
        return usable.copy()
    return pd.concat([usable, stopped.assign(**{metric: float(collapsed_score)})])


NOT_SCORES = ("cfg.", "id.")  # a run's config values and input identities (cfg.learning_rate ends in _rate too)


def metric_columns(runs: pd.DataFrame) -> list[str]:
    """The evaluator's scores in collect's runs table (an eval suite's `<benchmark>.<metric>` too): what
    --metric is told to pick from."""
    def is_metric(column: str) -> bool:
        name = column.rsplit(".", 1)[-1]
        return not column.startswith(NOT_SCORES) and (name.startswith(("avg_at", "pass_at", "maj_at"))
                                                      or name.endswith("_rate") or name in ("pooled", "mean_tokens"))
    return [c for c in runs.columns if is_metric(c)]


def withheld_configs(runs: pd.DataFrame, collapsed_score: float | None) -> dict[str, int]:
    """{label: runs stopped at their collapse} of the configs whose verdict is withheld: with no declared
    collapsed_score such a run has no score, and a config judged on the seeds that did not collapse would be
    judged on its survivors (the estimand is the expected score of one training run, collapses included)."""
    if collapsed_score is not None or "label" not in runs:
        return {}
    return runs.loc[runs["state"] == "collapsed", "label"].value_counts().to_dict()



AUTO = "auto"


def select_baseline(table: pd.DataFrame, selector: str | None, declared: Sequence[str] = ()
                    ) -> tuple[str | None, str]:
    """The label of the in-sweep baseline and how it was chosen.

    `selector`: None or 'none' (no baseline); 'auto' (the untrained base model, train.max_steps=0, when
    the sweep has exactly one such config; without one, the baseline a race of these runs declared:
    `declared`, the labels of those configs); else a selector (opsd_sweep.selector: a label, or `key=value`
    terms as the race's hydra.sweeper.baseline takes). Raises naming the configs when it matches none or
    several.
    """
    if selector is None or selector.lower() == "none":
        return None, "none (--baseline none)"
    if selector == AUTO:
        base = [label for label in table["label"] if is_base_model(label)]
        if len(base) == 1:
            return base[0], "auto: the untrained base model, train.max_steps=0; --baseline picks another"
        if base:
            return None, f"auto found {len(base)} untrained base-model configs, so none; pick one with --baseline"
        declared = [label for label in dict.fromkeys(declared) if label in set(table["label"])]
        if len(declared) == 1:
            return declared[0], "auto: the in-sweep baseline the race declared; --baseline picks another"
        return None, (f"auto: the races declare {len(declared)} baselines {declared}, so none; pick one with "
                      "--baseline" if declared else "auto: the sweep has no untrained base model and no race "
                      "declares a baseline; pick one with --baseline")
    configs = configs_of(table)
    try:
        return select_config(selector, configs, "--baseline"), f"--baseline {selector}"
    except SelectorError as err:
        raise SelectorError(f"{err}. A --baseline for each config: {baseline_choices(configs)}") from None


UNUSED = "unused (no training)"  # a training knob's value for an untrained base model, as selectors see it


def configs_of(table: pd.DataFrame) -> dict[str, dict]:
    """{label: {config key: value}} of a table with one row per config (the selector's input). An untrained base
    model (train.max_steps=0) has no training knobs: its learning rate, say, is a default it never used, so it is
    UNUSED, which no selector value matches and an error shows as such."""
    columns = [c for c in table.columns if c.startswith("cfg.")]
    unused = [c for c in columns if c.startswith(TRAINING_KNOBS) and c != "cfg.train.max_steps"]
    return {row["label"]: {c.removeprefix("cfg."): UNUSED if is_base_model(row["label"]) and c in unused else row[c]
                           for c in columns} for _, row in table.iterrows()}


def baseline_choices(configs: dict[str, dict]) -> str:
    """"max_steps=0 (base model); 'lr=0.01 max_steps=20'; ...": a --baseline that picks each config, the one
    untrained base model by max_steps=0, the others by their label (key=value terms too)."""
    def pick(label: str) -> str:
        if is_base_model(label):
            try:
                if select_config("max_steps=0", configs, "--baseline") == label:
                    return f"max_steps=0 ({label})"
            except SelectorError:
                pass  # several base models: each by its label
        return shlex.quote(label)
    return "; ".join(pick(label) for label in configs)


# The mean correctness over every problem x sample in samples.parquet: the metrics whose eval-sampling
# variance samples.parquet gives, so their noise can be split. `pooled` is an eval suite's avg@n over the union of its benchmarks' problems.
PER_PROBLEM_METRICS = ("avg_at_n", "pooled")


# --- per config ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Pool:
    """The run-to-run SD pooled over configs with >= 2 runs, and what entered it."""

    sd: float
    df: int
    runs: int  # runs of the configs that entered (configs with >= 2 runs)
    configs: int
    anchor_runs: int  # the anchor's n with --pool-anchor, else 0
    left_out: dict[str, int]  # kind (settings.POOL_OPT_INS) -> runs left out
    members: pd.DataFrame = field(repr=False, default_factory=pd.DataFrame)  # the runs that entered

    @property
    def pair(self) -> tuple[float, int]:
        return self.sd, self.df


def pool_runs(usable: pd.DataFrame, include: Sequence[str]) -> tuple[pd.DataFrame, dict[str, int]]:
    """The runs the pooled SD comes from: this pipeline's trained configs, plus the kinds in `include`;
    and the number of runs of each kind left out. Simulated runs count as this pipeline's when the sweep
    has no real ones (the simulator's demo), else they stay out. A collapsed run (opsd_sweep.run.collapse) stays
    out: its score sits at the floor, so its spread says nothing about the run-to-run noise of a working config."""
    real = ~usable["external"] & ~usable["simulated"]
    kinds = {"external": usable["external"], "simulated": usable["simulated"] & bool(real.any()),
             "base_model": usable["label"].map(is_base_model).astype(bool),
             "collapsed": usable["collapse_step"].notna() if "collapse_step" in usable else pd.Series(False, usable.index)}
    out = pd.Series(False, index=usable.index)
    left_out = {}
    for kind, mask in kinds.items():
        if kind not in include and (mask & ~out).any():
            left_out[kind] = int((mask & ~out).sum())
            out |= mask
    return usable[~out], left_out


def pooled(usable: pd.DataFrame, metric: str, s: SummarySettings, anchor: Anchor | None) -> Pool:
    """Run-to-run SD pooled over the pool's configs with >= 2 runs (+ the anchor's runs with --pool-anchor)."""
    members, left_out = pool_runs(usable, s.pool_include)
    members = members.groupby("label", sort=False).filter(lambda group: len(group) >= 2)
    groups = [g[metric].to_numpy(float) for _, g in members.groupby("label", sort=False)]
    extra = [(anchor.sd, anchor.n)] if s.pool_anchor and anchor is not None else []
    sd, df = stats.pooled_sd(groups, extra)
    return Pool(sd, df, len(members), len(groups), anchor.n if extra else 0, left_out, members)


def describe_configs(usable: pd.DataFrame, metric: str, s: SummarySettings, pool: tuple[float, int]) -> pd.DataFrame:
    """n, mean, sample SD, the SD used (sample / pooled / known), t-interval, noise split."""
    axes = [c for c in usable.columns if c.startswith("cfg.") and c != "cfg.seed"]
    rows = []
    for label, group in usable.groupby("label", sort=False):
        scores = group[metric].to_numpy(float)
        n = scores.size
        sample = float(scores.std(ddof=1)) if n > 1 else math.nan
        # the pool leaves collapsed runs out (pool_runs), so a config with scored collapses keeps its own spread
        collapses = n > 1 and s.pool_sd and "collapse_step" in group and bool(group["collapse_step"].notna().any())
        sd = RunSD(sample, n - 1, "sample") if collapses else run_sd(n, sample, pool, s.pool_sd, s.assumed_sd)
        ci = stats.t_interval(scores, s.level, sd=sd.value, df=sd.df)
        low, high = stats.bounded(ci.low, ci.high, stats.SCORE_BOUNDS) if stats.is_percent_score(metric) \
            else (ci.low, ci.high)
        row = {"label": label, **{c: group[c].iloc[0] for c in axes},
               "external": bool(group["external"].any()), "simulated": bool(group["simulated"].any()),
               "n": n, "mean": ci.estimate, "sd": sample, "se": ci.se, "sd_used": sd.value, "sd_df": sd.df,
               "sd_source": sd.source, "ci_low": low, "ci_high": high, "own_sd_for_collapses": collapses}
        row |= noise_split(group, scores, metric, s.level)
        if "n_samples" in group and group["n_samples"].notna().any():
            ks = sorted({int(k) for k in group["n_samples"].dropna()})  # eval.n_samples=auto: runs may differ
            row["k"] = ks[0] if len(ks) == 1 else f"{ks[0]}-{ks[-1]}"
        if "gpu_hours.total" in group:
            row["gpu_hours"] = float(group["gpu_hours.total"].sum())
        rows.append(row)
    return pd.DataFrame(rows)


MIN_SPLIT_RUNS = 3  # with 2 runs the chi-square interval of the training-seed SD spans three decades


def noise_split(group: pd.DataFrame, scores: np.ndarray, metric: str, level: float) -> dict:
    """Eval-sampling and training-seed SD with the latter's interval; else, for a per-problem metric, why the
    config's noise is not split (noise_not_split: the Noise table and its plot say it)."""
    if metric not in PER_PROBLEM_METRICS:
        return {}
    if scores.size < MIN_SPLIT_RUNS:
        return {"noise_not_split": f"{scores.size} run{'s' if scores.size > 1 else ''}: the split needs "
                                   f"{MIN_SPLIT_RUNS}"}
    if "eval_var" not in group or not group["eval_var"].notna().all():
        return {"noise_not_split": "no per-sample data of every run"}
    split = stats.variance_decomposition(scores, group["eval_var"].to_numpy(float), level)
    if split.run_var == 0 and split.eval_var == 0:  # every run scored alike on every problem: nothing to split
        collapsed = int(group["collapse_step"].notna().sum()) if "collapse_step" in group else 0
        return {"noise_not_split": f"no noise to split: its {scores.size} runs scored {scores[0]:.2f}, each problem's "
                                   "samples alike" + (f"; collapsed in {collapsed} of {scores.size} seeds"
                                                      if collapsed else "")}
    return {"eval_sd": math.sqrt(split.eval_var), "train_sd": math.sqrt(split.train_var),
            "train_sd_low": math.sqrt(split.train_var_low), "train_sd_high": math.sqrt(split.train_var_high),
            "eval_share": split.eval_share}


def arm_of(row: pd.Series) -> Arm:
    return Arm(row["mean"], int(row["n"]), RunSD(row["sd_used"], row["sd_df"], row["sd_source"]))


def compare_to(table: pd.DataFrame, reference: Arm, prefix: str, level: float, alpha: float,
               skip: Collection[str] = (), shared: bool = False, percent: bool = True,
               paired: dict[str, SeedPairing] | None = None) -> pd.DataFrame:
    """delta, interval, p, Holm-adjusted p and verdict word (inference.verdicts) of every config against one
    reference arm (run scores; `skip`: the reference's row and those of withheld verdicts, outside the Holm
    family; `shared`: every config takes the reference's SD, as --pool-anchor has it; `percent`: the interval
    is cut at -100 and +100, the most two percent scores can differ; `paired`: {label: SeedPairing} under
    pairing=seed, whose configs with >= 2 common seeds are compared by paired differences)."""
    out = []
    for _, row in table.iterrows():
        if row["label"] in skip:
            out.append({})
            continue
        pairing = (paired or {}).get(row["label"])
        if pairing is not None and pairing.paired:
            comp = pairing.comparison
        else:
            comp = compare_arms(Arm(row["mean"], int(row["n"]), reference.sd) if shared else arm_of(row), reference,
                                level)
        low, high = stats.bounded(comp.low, comp.high, stats.DIFFERENCE_BOUNDS) if percent else (comp.low, comp.high)
        out.append({f"delta_{prefix}": comp.delta, f"{prefix}_low": low, f"{prefix}_high": high,
                    f"p_{prefix}": comp.p})
    # the columns named: a table of the reference alone (every other config collapsed) compares nothing
    columns = [f"delta_{prefix}", f"{prefix}_low", f"{prefix}_high", f"p_{prefix}"]
    frame = pd.DataFrame(out, index=table.index, columns=columns)
    family = family_verdicts(frame[f"delta_{prefix}"].to_numpy(float), frame[f"p_{prefix}"].to_numpy(float), alpha)
    frame[f"p_{prefix}_holm"] = family.adjusted
    frame[f"q_{prefix}_bh"] = stats.benjamini_hochberg(frame[f"p_{prefix}"].to_numpy(float))
    frame[f"verdict_{prefix}"] = family.words
    return frame


# --- pairing by seed -----------------------------------------------------------------------------

def seed_pairings(usable: pd.DataFrame, metric: str, baseline: str, level: float, skip: Collection[str]
                  ) -> dict[str, SeedPairing]:
    """{label: its comparison with the baseline over the seeds both ran} for every config but `skip` (runs
    without a recorded seed, e.g. external ones, cannot pair and are left out of the pairing)."""
    if "cfg.seed" not in usable:
        return {}
    seeded = usable[usable["cfg.seed"].notna()]
    arms = {label: by_seed(group["cfg.seed"].astype(int), group[metric].astype(float))
            for label, group in seeded.groupby("label", sort=False)}
    if baseline not in arms:
        return {}
    return {label: paired_by_seed(arm, arms[baseline], level) for label, arm in arms.items()
            if label != baseline and label not in skip}


def pairing_columns(table: pd.DataFrame, pairings: dict[str, SeedPairing]) -> pd.DataFrame:
    """Per config compared with the baseline: common seeds, seeds dropped on either side, seed correlation."""
    rows = []
    for label in table["label"]:
        p = pairings.get(label)
        rows.append({} if p is None else {
            "paired_n": p.common, "paired_dropped": p.dropped_arm, "paired_dropped_baseline": p.dropped_ref,
            "seed_corr": p.correlation.r, "seed_corr_low": p.correlation.low, "seed_corr_high": p.correlation.high})
    columns = ["paired_n", "paired_dropped", "paired_dropped_baseline", "seed_corr", "seed_corr_low",
               "seed_corr_high"]
    return pd.DataFrame(rows, index=table.index, columns=columns)


def pairing_advice(pairings: dict[str, SeedPairing], s: SummarySettings, psd: tuple[float, bool, str] | None
                   ) -> dict:
    """The seed correlation pooled over the paired configs and, at the power SD, the seeds per config a paired
    design needs for target_effect against an unpaired one (design.seeds_needed_paired)."""
    estimable = [p.correlation for p in pairings.values() if p.paired and p.correlation.n >= 4
                 and p.correlation.r == p.correlation.r]  # the ones the Fisher-z pool takes
    pooled_r = pooled_seed_correlation(estimable, s.level)
    advice = {"r": pooled_r.r, "low": pooled_r.low, "high": pooled_r.high, "pairs": pooled_r.n,
              "configs": sum(p.paired for p in pairings.values()), "correlated_configs": len(estimable),
              "unpaired": sorted(label for label, p in pairings.items() if not p.paired)}
    if psd is not None and pooled_r.r == pooled_r.r:
        sd, known, source = psd
        paired, unpaired = seeds_needed_paired(s.target_effect, sd, pooled_r.r, s.alpha, s.power, known=known)
        advice |= {"sd": sd, "sd_source": source, "seeds_paired": paired, "seeds_unpaired": unpaired}
    return advice


# --- power ---------------------------------------------------------------------------------------

def power_sd(s: SummarySettings, pool: tuple[float, int]) -> tuple[float, bool, str] | None:
    """(SD, known?, where it comes from) of every power figure; None when there is none.

    The pooled SD, taken as the true SD (its own uncertainty is not priced in: it has sum R_c - 1 df);
    a declared SD as known when it replaces every config's own SD (--assumed-sd without --pool-sd).
    """
    sd, df = pool
    if s.assumed_sd is not None and (not s.pool_sd or not df):
        return s.assumed_sd, True, "declared run-to-run SD (--assumed-sd), known"
    if df and sd > 0:  # a pooled SD of 0 (every run alike) plans nothing
        return sd, False, f"pooled run-to-run SD ({df} df)"
    return None


def power_reference(s: SummarySettings, reference: str, anchor: Anchor | None, ref_n: int | None) -> stats.PowerReference:
    """In-sweep baseline (ref_n runs, or as many as the config when planning) or the anchor."""
    if reference == "baseline":
        return stats.PowerReference(n=ref_n)
    if s.pool_anchor:  # the anchor's runs share our run-to-run SD
        return stats.PowerReference(n=anchor.n)
    return stats.PowerReference(var_of_mean=anchor.sd**2 / anchor.n, df=anchor.n - 1)


def phase_costs(usable: pd.DataFrame) -> tuple[float, float] | None:
    """Mean GPU-hours of a run's training and of its evaluation, over the trained runs that record both
    (None without them: CPU or simulated runs, or evaluations of more than the final checkpoint, whose
    eval hours are not those of the scored K samples)."""
    needed = {"gpu_hours.train", "gpu_hours.evaluate"}
    if not needed <= set(usable.columns):
        return None
    if "cfg.eval.checkpoints" in usable and (usable["cfg.eval.checkpoints"].fillna("final") != "final").any():
        return None
    both = usable[(usable["gpu_hours.train"] > 0) & (usable["gpu_hours.evaluate"] > 0)]
    return (float(both["gpu_hours.train"].mean()), float(both["gpu_hours.evaluate"].mean())) if len(both) else None


def power_columns(table: pd.DataFrame, s: SummarySettings, reference: str, baseline: str | None,
                  anchor: Anchor | None, psd: tuple[float, bool, str] | None, family: int) -> pd.DataFrame:
    """Per config, on the power SD: the MDE at its n vs its reference's current runs, and the seeds per
    config for target_effect (in-sweep: both arms get them) at alpha and at alpha / family (Bonferroni)."""
    if psd is None:
        return pd.DataFrame(index=table.index)
    sd, known, _ = psd
    base_n = int(table.set_index("label").loc[baseline, "n"]) if baseline is not None else None
    now = power_reference(s, reference, anchor, base_n)
    plan = power_reference(s, reference, anchor, None)
    seeds = stats.seeds_needed(s.target_effect, sd, s.alpha, s.power, plan, known=known)
    bonferroni = stats.seeds_needed(s.target_effect, sd, s.alpha / family, s.power, plan, known=known)
    out = []
    for _, row in table.iterrows():
        n = int(row["n"])
        if row["label"] == baseline:
            out.append({})
            continue
        testable = n >= (1 if known else 2) and (reference == "anchor" or base_n >= (1 if known else 2))
        out.append({"mde": stats.min_detectable_effect(sd, n, s.alpha, s.power, now, known=known)
                    if testable else math.nan, "seeds_needed": seeds, "seeds_needed_bonferroni": bonferroni})
    return pd.DataFrame(out, index=table.index, dtype=object)


def sweep_power(usable: pd.DataFrame, s: SummarySettings, reference: str | None, anchor: Anchor | None,
                psd: tuple[float, bool, str] | None, family: int, pool: Pool) -> dict:
    """The seeds-needed advice of the report text: the same figures as the table's columns, plus the
    saving of more eval samples per problem. Its eval-sampling SD comes from the runs its run-to-run SD
    comes from (the pool's, or every usable run's when the SD is declared), so the split is of one set."""
    if reference is None or psd is None:
        return {"reference": None}
    sd, known, source = psd
    plan = power_reference(s, reference, anchor, None)
    advice = {"sd": sd, "sd_source": source, "known": known, "reference": reference, "family": family,
              "target_effect": s.target_effect, "power": s.power, "larger_k": s.larger_k,
              "seeds": stats.seeds_needed(s.target_effect, sd, s.alpha, s.power, plan, known=known),
              "seeds_bonferroni": stats.seeds_needed(s.target_effect, sd, s.alpha / family, s.power, plan,
                                                     known=known)}
    if collapses := collapse_price(usable, s.metric, sd):
        advice["collapses"] = [c | {"seeds_collapsing": None if c["sd_collapsing"] is None else stats.seeds_needed(
            s.target_effect, c["sd_collapsing"], s.alpha, s.power, plan, known=known)} for c in collapses]
    runs = usable if known else pool.members
    eval_var = runs["eval_var"].dropna() if "eval_var" in runs else pd.Series(dtype=float)
    k = runs["n_samples"].dropna().unique() if "n_samples" in runs else []
    if len(k) > 1:  # the 1/K scaling needs one K; eval.n_samples=auto chose each run's K from these costs
        advice["k_mixed"] = sorted(int(x) for x in k)
    if s.metric in PER_PROBLEM_METRICS and len(eval_var) and len(k) == 1 and k[0] >= 2 and s.larger_k > k[0]:
        # the eval part of the run-to-run SD cannot exceed it: runs that spread less than eval sampling predicts
        # are all eval noise (eval_sd_runs, eval_clamped say so)
        eval_sd = math.sqrt(min(eval_var.mean(), sd**2))
        sd_k = sd_at_k(sd, eval_sd, float(k[0]), s.larger_k)
        with_var = runs[runs["eval_var"].notna()]
        advice |= {"eval_sd_runs": math.sqrt(eval_var.mean()), "eval_clamped": bool(eval_var.mean() > sd**2),
                   "eval_configs": {label: len(g) for label, g in with_var.groupby("label", sort=False)}}
        advice |= {"k": int(k[0]), "eval_sd": eval_sd, "sd_larger_k": sd_k,
                   "seeds_larger_k": stats.seeds_needed(s.target_effect, sd_k, s.alpha, s.power, plan, known=known)}
        if (costs := phase_costs(usable)) is not None:
            train_h, eval_h = costs
            advice |= {"train_gpu_h": train_h, "eval_gpu_h": eval_h,
                       "k_optimal": cost_optimal_k(eval_sd**2, advice["k"], sd**2 - eval_sd**2, train_h, eval_h)}
            if advice["seeds"] and advice["seeds_larger_k"]:
                advice |= {"gpu_h_seeds": advice["seeds"] * (train_h + eval_h),
                           "gpu_h_seeds_larger_k": advice["seeds_larger_k"] * run_gpu_hours_at_k(
                               train_h, eval_h, advice["k"], s.larger_k)}
            advice["cost_by_k"] = decision_cost_by_k(
                cost_by_k_grid(s, advice["k"], advice["k_optimal"]), k=advice["k"], sd=sd, eval_sd=eval_sd,
                train_h=train_h, eval_h=eval_h, target_effect=s.target_effect, alpha=s.alpha, power=s.power,
                plan=plan, known=known)
    return advice


def advice_runs_split(analysis: Analysis) -> bool:
    """Whether the runs the seeds advice's SD comes from (the pool's, or every usable run's when the SD is
    declared) hold a config whose noise the Noise section splits (>= MIN_SPLIT_RUNS runs, per-sample data):
    the advice's eval share is said only where that section has one, so the two never disagree."""
    runs = analysis.usable if analysis.power.get("known") else analysis.pool.members
    if "eval_sd" not in analysis.table or runs.empty or "label" not in runs:
        return False
    return bool(analysis.table.loc[analysis.table["label"].isin(set(runs["label"])), "eval_sd"].notna().any())


def collapse_price(usable: pd.DataFrame, metric: str, sd: float) -> list[dict]:
    """What collapses cost the seeds advice, per config with a judged run that collapsed (a collapse rate is a
    finding about one config: pooled over configs it is a rate none of them has): its collapsed and judged
    runs, and, when some of its runs did not collapse, its rate r, the score gap between its runs that did not
    and those that did, and the run-to-run SD of a config that collapses at rate r (a mixture:
    sqrt((1 - r) sd^2 + r (1 - r) gap^2), sd the working runs' SD); sd_collapsing None for a config that collapsed
    in every judged seed (no noise to price). [] without a judged collapse with a score (a run stopped at its
    collapse has one only with --collapsed-score)."""
    if "collapse_judged" not in usable:
        return []
    judged = usable[usable["collapse_judged"].fillna(False).astype(bool)]
    out = []
    for label, group in judged.groupby("label", sort=False):
        collapsed = group["collapse_step"].notna()
        if not collapsed.any():
            continue
        entry = {"label": label, "collapsed": int(collapsed.sum()), "judged": len(group), "sd_collapsing": None}
        if not collapsed.all():
            rate = float(collapsed.mean())
            gap = float(group.loc[~collapsed, metric].mean() - group.loc[collapsed, metric].mean())
            entry |= {"rate": rate, "gap": gap,
                      "sd_collapsing": math.sqrt((1 - rate) * sd**2 + rate * (1 - rate) * gap**2)}
        out.append(entry)
    return out


def cost_by_k_grid(s: SummarySettings, k: int, k_optimal: float | None) -> list[int]:
    """The K values the decision-cost table shows: 1 to twice larger_k, the runs' K, larger_k, the optimum."""
    grid = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, k, s.larger_k}
    if k_optimal is not None:
        grid.add(max(1, round(k_optimal)))
    return sorted(x for x in grid if x <= 2 * max(s.larger_k, k))


# --- the table -----------------------------------------------------------------------------------

def analyse(runs: pd.DataFrame, s: SummarySettings, anchor: Anchor | None,
            declared_baselines: Sequence[str] = ()) -> Analysis:
    """All per-config statistics for the metric `s.metric`, sorted by mean. `declared_baselines`: labels
    of the in-sweep baselines the sweeps' races declared (what --baseline auto falls back on)."""
    check_metric_scope(runs, s.metric)  # a metric whose meaning changes with the runs' K is refused
    usable = usable_runs(runs, s.metric, s.collapsed_score)
    withheld = withheld_configs(runs, s.collapsed_score)
    if usable.empty:
        raise ValueError(f"no finished run has {s.metric!r}; check the roots and the states in runs.csv")
    notes = []
    if anchor is not None and anchor.metric != s.metric:
        notes.append(f"The anchor reports {anchor.metric}, not {s.metric}: no comparison with it.")
        anchor = None
    pool_info = pooled(usable, s.metric, s, anchor)
    pool = pool_info.pair
    table = describe_configs(usable, s.metric, s, pool)
    baseline, how = select_baseline(table, s.baseline, declared_baselines)
    references = {}
    pairings = {}
    # a baseline judged on its survivors (seeds stopped at their collapse, no score) judges no one
    survivors_baseline = baseline in withheld
    if baseline is not None:
        references["baseline"] = arm_of(table.set_index("label").loc[baseline])
        if s.pairing == "seed" and not survivors_baseline:
            pairings = seed_pairings(usable, s.metric, baseline, s.level, skip=set(withheld))
            table = table.join(pairing_columns(table, pairings))
        skip = set(table["label"]) if survivors_baseline else {baseline, *withheld}
        table = table.join(compare_to(table, references["baseline"], "baseline", s.level, s.alpha, skip=skip,
                                      percent=stats.is_percent_score(s.metric), paired=pairings))
        table["vs_baseline"] = [_compared_how(label, baseline, pairings) for label in table["label"]]
    if anchor is not None:  # the anchor has no seeds of ours: never paired
        references["anchor"] = anchor_arm(anchor, pool, s.pool_sd, s.assumed_sd, s.pool_anchor)
        table = table.join(compare_to(table, references["anchor"], "anchor", s.level, s.alpha, skip=withheld,
                                      shared=s.pool_anchor, percent=stats.is_percent_score(s.metric)))
    reference = next(iter(references), None)
    family = max(1, int(table[f"p_{reference}"].notna().sum())) if reference else 1
    if reference is not None:
        table["verdict"] = [("baseline" if row["label"] == baseline else WITHHELD if row["label"] in withheld
                             or (reference == "baseline" and survivors_baseline) else row[f"verdict_{reference}"])
                            for _, row in table.iterrows()]
        table["verdict_vs"] = "in-sweep baseline" if reference == "baseline" else "anchor"
        shared = references["anchor"].sd if reference == "anchor" and s.pool_anchor else None
        table["verdict_sd"] = [f"SD of the differences over {int(row['paired_n'])} paired seeds"
                               if reference == "baseline" and str(row["vs_baseline"]).startswith("paired")
                               else _sd_words(row, shared) for _, row in table.iterrows()]
        table["verdict_holds_to_sd"] = verdict_holds_to_sd(table, references[reference], reference, s)
    psd = power_sd(s, pool)
    if reference is not None:
        table = table.join(power_columns(table, s, reference, baseline, anchor, psd, family))
    table["flags"] = flags(table, baseline, withheld, pairings, survivors_baseline)
    table = table.sort_values("mean", ascending=False, kind="stable").reset_index(drop=True)
    power = sweep_power(usable, s, reference, anchor, psd, family, pool_info)
    pairing = pairing_advice(pairings, s, psd) if pairings else {}
    return Analysis(table, usable, baseline, how, anchor, pool_info, notes, power, pairing)


def _compared_how(label: str, baseline: str, pairings: dict[str, SeedPairing]) -> str:
    """How a config is compared with the in-sweep baseline (summary.csv's vs_baseline)."""
    if label == baseline:
        return "is baseline"
    pairing = pairings.get(label)
    if pairing is None:
        return "run scores"
    return f"paired by seed ({pairing.common} common)" if pairing.paired else "run scores (too few common seeds)"


def _sd_words(row: pd.Series, shared: RunSD | None = None) -> str:
    """The run-to-run SD a verdict used, e.g. 'sample SD 2.91 (3 df)', 'known SD 3.50' (`shared`: the SD
    both arms of the comparison took, --pool-anchor)."""
    sd = shared or RunSD(row["sd_used"], row["sd_df"], row["sd_source"])
    if not sd.value == sd.value:
        return "no SD (1 run, nothing pooled or declared)"
    df = "" if math.isinf(sd.df) else f" ({int(sd.df)} df)"
    words = f"{sd.source} SD {sd.value:.2f}{df}"
    pooled_with_anchor = shared is not None and shared.source != "known"  # a known SD is everyone's anyway
    return words + (", shared with the anchor (--pool-anchor)" if pooled_with_anchor else "")


def flags(table: pd.DataFrame, baseline: str | None, withheld: dict[str, int],
          pairings: dict[str, SeedPairing] | None = None, survivors_baseline: bool = False) -> list[str]:
    """Per config: simulated / external data, 1-run SD assumption, winner's curse on the top mean, seeds
    stopped at their collapse with no score (its verdict withheld; every verdict against a baseline that has
    such seeds too), no spread to test with, its own SD where collapses keep it out of the pool, and under
    pairing=seed the seeds its paired comparison dropped or, with too few common seeds, that it was compared
    unpaired."""
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
            marks.append("1 run: no own SD, " + (f"used {row['sd_source']} SD {row['sd_used']:.2f}"
                                                 if row["sd_used"] == row["sd_used"] else "no test"))
        if index == top:
            marks.append(f"best of {len(contenders)}: winner's curse, confirm on fresh seeds")
        if row["label"] in withheld:
            marks.append(f"verdict withheld: {withheld[row['label']]} seed(s) stopped at their collapse have no "
                         "score, the mean is of the others; --collapsed-score 0 scores them, or rerun them with "
                         "train.stop_on_collapse=false")
        elif survivors_baseline and row["label"] != baseline:
            marks.append("verdict withheld: the baseline's mean is of its seeds that did not collapse")
        if row.get("p_baseline") == 1 and row.get("baseline_low") != row.get("baseline_low"):
            marks.append("no spread: its runs and the baseline's scored alike, no test (in the Holm family at "
                         "p = 1)")
        if row.get("own_sd_for_collapses"):
            marks.append("its own SD, not the pooled one: its collapses break the pool's equal variance")
        if (pairing := (pairings or {}).get(row["label"])) is not None:
            marks.extend(_pairing_marks(pairing))
        out.append("; ".join(marks))
    return out


def _pairing_marks(pairing: SeedPairing) -> list[str]:
    if not pairing.paired:
        return [f"pairing=seed: {pairing.common} seed(s) in common with the baseline, compared unpaired"]
    if pairing.dropped_arm or pairing.dropped_ref:
        return [f"paired on {pairing.common} common seeds: dropped {pairing.dropped_arm} of its runs and "
                f"{pairing.dropped_ref} of the baseline's (no partner seed)"]
    return []


def noise_left_out(table: pd.DataFrame) -> dict[str, str]:
    """{label: why its noise is not split} of the configs the Noise table and its plot leave out."""
    if "noise_not_split" not in table:
        return {}
    return {row["label"]: row["noise_not_split"] for _, row in table.iterrows()
            if isinstance(row["noise_not_split"], str)}


def seed_part_note(row: pd.Series) -> str:
    """How a noise-split row's remainder (run-to-run variance over eval sampling) reads: a training-seed
    SD, except for an untrained base model, whose runs differ in eval sampling only (expected 0)."""
    below = row["train_sd"] != row["train_sd"]  # NaN: the runs spread less than eval sampling predicts
    if is_base_model(row["label"]):
        return "untrained: below eval noise" if below else f"untrained: excess over eval noise {row['train_sd']:.2f}"
    return "training seed below eval noise" if below else f"training seed {row['train_sd']:.2f}"
