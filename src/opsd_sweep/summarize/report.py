"""The report: summary.md (tables + plain-language advice + plots) and the same table printed with rich."""

from __future__ import annotations

import math
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from opsd_sweep.summarize.caps import summary_section as cap_section
from opsd_sweep.summarize.drift import summary_section as drift_section
from opsd_sweep.summarize.graders import statement as grader_statement
from opsd_sweep.summarize.collapses import race_lines, summary_section
from opsd_sweep.summarize.collect import Collection
from opsd_sweep.summarize.config_stats import (MIN_SPLIT_RUNS, Analysis, advice_runs_split, noise_left_out,
                                               power_reference, seed_part_note)
from opsd_sweep.summarize.races import Race, row_confirmation
from opsd_sweep.summarize.sampling import sampling_lines
from opsd_sweep.summarize.settings import SummarySettings
from opsd_sweep.summarize.transitions import Transitions, markdown_lines as transition_lines
from opsd_sweep.inference import stats
from opsd_sweep.inference.sensitivity import MAX_SD

MANY_SEEDS = 20  # above this, the advice says plainly that the effect is expensive to prove
TARGET = ("What is tested: the benchmark's problems are held fixed, so each verdict, interval, MDE and seeds "
          "figure is about the expected score on these problems over training seeds and eval samples, computed "
          "from run scores; it says nothing about other problems.")


def metric_display(metric: str, runs: pd.DataFrame, fixed: dict) -> str:
    """'aime24 avg@12' from 'avg_at_n', the eval dataset and K (when one K and one dataset)."""
    ks = runs["n_samples"].dropna().unique() if "n_samples" in runs else []
    k = str(int(ks[0])) if len(ks) == 1 else "n"
    name = metric.replace("_at_n", f"@{k}").replace("_at_", "@")
    dataset = fixed.get("cfg.eval.name")
    return f"{dataset} {name}" if dataset else name


def _num(value, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _p(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return "<0.001" if value < 1e-3 else f"{value:.3f}"


def _bracket(low, high) -> str:
    return "–" if pd.isna(low) and pd.isna(high) else f"[{_num(low)}, {_num(high)}]"


def _interval(row: pd.Series, delta: str, low: str, high: str) -> str:
    if delta not in row or pd.isna(row[delta]):
        return "–"
    return f"{row[delta]:+.2f} [{_num(row[low])}, {_num(row[high])}]"


def _share(value) -> str:
    return "–" if value is None or value != value else f"{value:.0%}"


def _seeds(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return str(int(value))


def verdict_rows(analysis: Analysis, level: float) -> tuple[list[str], list[list[str]]]:
    """Header and cells of the main table (shared by markdown and rich)."""
    t = analysis.table
    header = ["config", "n", "mean", f"{level:.0%} CI", "SD"]
    if analysis.baseline is not None:
        header += ["Δ vs baseline [CI]", "p Holm (base)"]
    if analysis.anchor is not None:
        header += ["Δ vs anchor [CI]", "p Holm (anchor)"]
    if "verdict" in t:
        header += ["verdict", "holds to SD", "MDE", "seeds needed"]
    header.append("flags")
    rows = []
    for _, row in t.iterrows():
        cells = [row["label"], str(row["n"]), _num(row["mean"]), _bracket(row["ci_low"], row["ci_high"]),
                 _num(row["sd_used"]) + ("" if row["sd_source"] == "sample" else f" ({row['sd_source'].split()[0]})")]
        paired = str(row.get("vs_baseline", "")).startswith("paired")
        if analysis.baseline is not None:
            cells += [_interval(row, "delta_baseline", "baseline_low", "baseline_high") + (" (paired)" if paired else ""),
                      _p(row.get("p_baseline_holm"))]
        if analysis.anchor is not None:
            cells += [_interval(row, "delta_anchor", "anchor_low", "anchor_high"), _p(row.get("p_anchor_holm"))]
        if "verdict" in t:
            # a config paired by seed holds its verdict up to an SD of its per-seed differences, not of runs
            holds = _num(row.get("verdict_holds_to_sd"), 1)
            holds += " (of Δ)" if paired and holds != "–" else ""
            cells += [row["verdict"], holds, _num(row.get("mde")),
                      _seeds(row.get("seeds_needed"))]
        cells.append(row["flags"])
        rows.append(cells)
    return header, rows


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    def line(cells):
        return "| " + " | ".join(str(c).replace("|", "/") for c in cells) + " |"
    return "\n".join([line(header), line(["---"] * len(header)), *map(line, rows)])


# --- plain-language sections ---------------------------------------------------------------------

def _configs(count: int) -> str:
    return f"{count} config" + ("" if count == 1 else "s")


def _holds(row: pd.Series) -> str:
    sd = row.get("verdict_holds_to_sd")
    if sd is None or sd != sd:
        return "only at the SD it used"
    if sd >= MAX_SD:
        return f"for any run-to-run SD (up to {MAX_SD:g} points, the most a percent score can have)"
    return f"for any run-to-run SD up to {sd:.1f} points"


def verdict_statements(analysis: Analysis, s: SummarySettings) -> list[str]:
    t = analysis.table
    if "verdict" not in t:
        return ["No reference to test against: give an in-sweep baseline (--baseline) or an anchor (--anchor)."]
    reference = t["verdict_vs"].iloc[0]
    prefix = "baseline" if analysis.baseline else "anchor"
    family = int(t[f"p_{prefix}"].notna().sum())
    out = []
    for _, row in t[t["verdict"].isin(["better", "worse"])].iterrows():
        out.append(f"**{row['verdict'].capitalize()}** than the {reference}: {row['label']} "
                   f"({row[f'delta_{prefix}']:+.2f} points, Holm-adjusted p {_p(row[f'p_{prefix}_holm'])} over "
                   f"{_configs(family)}, with the {row['verdict_sd']}); it stays {row['verdict']} {_holds(row)}.")
    if not any(t["verdict"].isin(["better", "worse"])):
        out.append(f"No config differs from the {reference} at α = {s.alpha} (Holm over {_configs(family)}): "
                   "every verdict is inconclusive, which is not evidence of no effect (see the MDE column).")
    # screening finds candidates for more seeds: a gain not yet proven, never a config already judged
    promising = t[(t.get(f"q_{prefix}_bh", pd.Series(dtype=float)) <= s.alpha) & (t[f"delta_{prefix}"] > 0)
                  & (t["verdict"] == "inconclusive")]
    if not promising.empty:
        out.append(f"Screening (BH q ≤ {s.alpha}, false-discovery rate): {', '.join(promising['label'])} — a gain "
                   "not yet proven at the family-wise level: worth more seeds.")
    top = t[t["flags"].str.contains("winner's curse")]
    if not top.empty:
        # the configs it was picked from, not the tested family: 1-run configs are ranked but not tested
        picked_from = int((t["label"] != analysis.baseline).sum())
        out.append(f"The top mean ({top['label'].iloc[0]}) was picked from {picked_from} configs: its mean is biased "
                   "upward (winner's curse). Confirm it on fresh seeds before claiming it.")
    if (t["n"] == 1).any():
        out.append("Configs with 1 run have no SD of their own: their intervals and tests use the SD named in the "
                   "table (pooled from the other configs, or the declared --assumed-sd), or none at all.")
    return out


def power_statements(analysis: Analysis, s: SummarySettings, display: str) -> list[str]:
    p = analysis.power
    if p.get("reference") is None:
        return []
    reference = "the in-sweep baseline (it needs as many seeds)" if p["reference"] == "baseline" else "the anchor"
    seeds, seeds_bonferroni = p["seeds"], p["seeds_bonferroni"]
    taken = ("" if p["known"] else ", taken as the true SD (its own uncertainty is not priced in)")
    family = (f", and {_seeds(seeds_bonferroni) if seeds_bonferroni else 'more than 10000'} at α / {p['family']} "
              f"(Bonferroni; Holm rejects at least as much, so this many are enough with Holm over {p['family']} "
              "configs)") if p["family"] > 1 else ""
    start = (f"At the {p['sd_source']} of {p['sd']:.2f} points{taken}, detecting a true +{s.target_effect:g} points "
             f"vs {reference} with {s.power:.0%} power")
    unreachable = seeds is None and anchor_limits_power(analysis, s)
    if unreachable:  # the first line is the one the console prints: it says this, not "more than 10000"
        a = analysis.anchor
        own = f"SD {a.sd:.2f} over {a.n} runs" if a is not None else "SD over its runs"
        out = [f"{start}: **no number of seeds is enough against the anchor** here (at α = {s.alpha}): its own "
               f"uncertainty ({own}) already exceeds what this effect allows. Run an in-sweep baseline."]
    else:
        out = [f"{start} needs **{_seeds(seeds) if seeds else 'more than 10000'} seeds per config** (one comparison "
               f"at α = {s.alpha}){family}."]
    if not unreachable and (seeds is None or seeds > MANY_SEEDS):
        out.append(f"That is a lot: a +{s.target_effect:g}-point effect is hard to prove at this noise level. Test "
                   "fewer configs, look for larger effects, or reduce the noise (below).")
    if "collapses" in p:
        out.append("Collapses, per config (of its seeds the collapse rule judged): "
                   + "; ".join(_collapse_price(c, unreachable) for c in p["collapses"])
                   + ". The seeds above are for a config that does not collapse.")
    if "seeds_larger_k" in p and not advice_runs_split(analysis):
        out.append(f"No split of the noise into eval sampling and training seed (it needs a config with at least "
                   f"{MIN_SPLIT_RUNS} runs, as the Noise section below), so no advice on more samples per problem.")
    elif "seeds_larger_k" in p:
        larger = p["seeds_larger_k"]
        saving = f" ({1 - larger / seeds:.0%} fewer)" if seeds and larger else ""
        needed = (f"the seeds needed to {_seeds(larger)}" if larger
                  else _beyond(unreachable, "the seeds needed to more than 10000"))
        out.append(f"{eval_share_statement(p)} Evaluating with K = {s.larger_k} samples per problem would bring the "
                   f"SD to {p['sd_larger_k']:.2f} and {needed}{saving}. {samples_cost_statement(p, s.larger_k)}")
    if "k_mixed" in p:
        ks = p["k_mixed"]
        out.append(f"The runs used {len(ks)} different K ({', '.join(map(str, ks))} samples per problem; see "
                   "\"Samples per problem\"), so no advice on a larger K is given: it scales one K's eval variance.")
    out.append(f"The MDE column is the smallest true difference each config's current n detects with {s.power:.0%} "
               f"power at α = {s.alpha} against the reference's current runs; the seeds-needed column is the figure "
               "above. Both use the same SD as this advice, not each config's own (with few runs that one is "
               "itself too uncertain to plan with).")
    return out


def _collapse_price(c: dict, unreachable: bool) -> str:
    """One config's collapses in the seeds advice (config_stats.collapse_price)."""
    counted = f"{c['label']} collapsed in {c['collapsed']} of {c['judged']} seeds"
    if c["sd_collapsing"] is None:
        return (f"{counted}: collapsing is what it does, not noise a seeds figure prices (its verdict is of its "
                "collapsed runs)")
    collapsing = c["seeds_collapsing"]
    needs = (f"needs **{_seeds(collapsing)} seeds**" if collapsing
             else _beyond(unreachable, "needs **more than 10000 seeds**"))
    return (f"{counted}, {c['gap']:.1f} points below its other seeds: a config that collapses at that rate "
            f"({c['rate']:.0%}, from {c['judged']} seeds) has a run-to-run SD of {c['sd_collapsing']:.2f} and {needs} "
            "for the same effect")


def eval_share_statement(p: dict) -> str:
    """The eval-sampling part of the advice's run-to-run SD, naming the runs it is of (the pool's, or every
    counted run's when the SD is declared: one config's, as the Noise table's row, or the mean over several),
    and saying so when it is capped at the run-to-run SD."""
    configs = p["eval_configs"]
    runs = sum(configs.values())
    of = (f"the {runs} runs of {next(iter(configs))}, as in the Noise table" if len(configs) == 1 else
          f"the mean eval-sampling variance of the {runs} runs of {len(configs)} configs ({', '.join(configs)}) the "
          "SD comes from; the Noise table gives each config's own")
    if p.get("eval_clamped"):
        return (f"Eval sampling makes all of the run-to-run variance: the eval-sampling SD at K = {p['k']} is "
                f"{p['eval_sd_runs']:.2f} ({of}), above the {p['sd_source']} of {p['sd']:.2f} (the runs spread less "
                f"than eval sampling alone predicts), so the advice takes eval SD {p['eval_sd']:.2f}, the whole "
                "run-to-run SD, and no training-seed part.")
    share = p["eval_sd"] ** 2 / p["sd"] ** 2 if p["sd"] else math.nan
    return (f"Eval sampling makes {share:.0%} of the run-to-run variance (eval SD {p['eval_sd']:.2f} at K = {p['k']}, "
            f"of {of}).")


UNBOUNDED_SEEDS = 10**9  # "as many seeds as you like": only the anchor's own uncertainty is left


def anchor_limits_power(analysis: Analysis, s: SummarySettings) -> bool:
    """Whether, against the anchor, no number of seeds reaches the power: even at UNBOUNDED_SEEDS runs per
    config the anchor's own uncertainty (SD over its n runs) leaves the test short of it. Seeds advice that
    gave up at 10000 for another reason (a huge run-to-run SD) is not this."""
    p, anchor = analysis.power, analysis.anchor
    if p.get("reference") != "anchor" or anchor is None:
        return False
    plan = power_reference(s, "anchor", anchor, None)
    return stats.power(s.target_effect, p["sd"], UNBOUNDED_SEEDS, s.alpha, plan, known=p["known"]) < s.power


def _beyond(unreachable: bool, more_than: str) -> str:
    """A seeds figure the search gave up on: no number at all when the anchor's own uncertainty is the limit
    (as the advice's first line says), else `more_than` the search's 10000."""
    return "still no number of seeds would be enough against the anchor" if unreachable else more_than


def samples_cost_statement(p: dict, larger_k: int) -> str:
    """Whether more samples per problem or more seeds is cheaper, at the runs' own GPU-hours per phase."""
    if "train_gpu_h" not in p:
        return ("Whether that is cheaper than seeds depends on what K samples cost against a training run: "
                "these runs record no GPU-hours per phase (CPU or simulated runs, or more than the final checkpoint "
                "evaluated). `python -m opsd_sweep.plan --from RESULTS` prices them at the measured GPU costs, its "
                "evals at the lengths these runs wrote (docs/plan.md).")
    k, train_h, eval_h = p["k"], p["train_gpu_h"], p["eval_gpu_h"]
    out = (f"A trained run here costs {train_h:.2f} GPU-hours of training and {eval_h:.2f} of evaluation at K = {k} "
           "on average (the runs' own recorded hours, so at the lengths their evals wrote; eval hours taken as "
           "proportional to samples)")
    if "gpu_h_seeds" in p:
        cheaper = "cheaper" if p["gpu_h_seeds_larger_k"] < p["gpu_h_seeds"] else "dearer"
        out += (f": the seeds needed cost {p['gpu_h_seeds']:.1f} GPU-hours per config at K = {k} and "
                f"{p['gpu_h_seeds_larger_k']:.1f} at K = {larger_k}, {cheaper}")
    if p["k_optimal"] is None:
        return out + ". No training-seed variance is left beyond eval sampling: more samples per problem buy more " \
                     "precision per GPU-hour than more seeds."
    return out + (f". At this split of the noise the most precision per GPU-hour comes at K ≈ {p['k_optimal']:.0f} "
                  "samples per problem (two-stage sampling's optimal allocation).")


def pairing_statements(analysis: Analysis, s: SummarySettings) -> list[str]:
    """pairing=seed: how the configs were paired with the baseline, the seed correlation, what pairing saves."""
    p = analysis.pairing
    if s.pairing != "seed":
        return []
    if not p:
        return ["pairing=seed was declared, but there is no in-sweep baseline with seeded runs to pair with: every "
                "comparison is unpaired."]
    out = [f"Declared pairing=seed: {_configs(p['configs'])} compared with the in-sweep baseline by paired "
           "differences over the seeds both ran (t on the per-seed differences, pairs - 1 df; Δ is their mean), "
           "Holm over the family as before. The anchor comparison stays unpaired."]
    if p["unpaired"]:
        out.append(f"Too few seeds in common with the baseline (< 2), compared unpaired: {', '.join(p['unpaired'])}.")
    if p["r"] != p["r"]:
        out.append("Seed correlation: not estimable (it needs a config with >= 4 seeds in common with the baseline "
                   "and scores that vary).")
        return out
    out.append(f"Seed correlation of a config's and the baseline's run scores: r = {p['r']:.2f} "
               f"[{_num(p['low'])}, {_num(p['high'])}] ({s.level:.0%} Fisher-z interval, pooled over the "
               f"{_configs(p['correlated_configs'])} with ≥ 4 common seeds, {p['pairs']} pairs; the configs share the "
               "baseline's runs, so the interval is somewhat narrow). At r ≤ 0 pairing only costs degrees of "
               "freedom.")
    if "seeds_paired" in p:
        paired, unpaired = p["seeds_paired"], p["seeds_unpaired"]
        out.append(f"At the {p['sd_source']} of {p['sd']:.2f} points and r = {p['r']:.2f}, detecting +"
                   f"{s.target_effect:g} points with {s.power:.0%} power at α = {s.alpha} needs "
                   f"**{_seeds(paired) if paired else 'more than 10000'} seeds per config paired** against "
                   f"{_seeds(unpaired) if unpaired else 'more than 10000'} unpaired (each arm).")
    if k_optimal_said(analysis):
        out.append(f"The K ≈ {analysis.power['k_optimal']:.0f} samples per problem of the seeds advice, like "
                   "eval.n_samples=auto's choice, is the optimum of unpaired comparisons. Paired by seed, the part of "
                   "the training-seed noise that the arms share cancels, so a paired Δ's optimum is larger, by "
                   "1 / sqrt(1 - the correlation of the arms' training-seed parts); what the smaller K costs: "
                   "docs/statistics.md.")
    return out


def k_optimal_said(analysis: Analysis) -> bool:
    """Whether the seeds advice states a cost-optimal K (power_statements: a noise split and GPU-hours per phase)."""
    p = analysis.power
    return ("seeds_larger_k" in p and advice_runs_split(analysis) and "train_gpu_h" in p
            and p.get("k_optimal") is not None)


POOL_KIND_WORDS = {"external": "external", "simulated": "simulated", "base_model": "untrained base-model",
                   "collapsed": "collapsed"}


def pool_statement(analysis: Analysis) -> str:
    """Which runs the pooled run-to-run SD comes from (count, df) and which were left out."""
    p = analysis.pool
    if not p.df:
        return "No pooled run-to-run SD: no config of this pipeline's trained runs has 2 or more runs."
    anchor = f" and the anchor's {p.anchor_runs} runs (--pool-anchor)" if p.anchor_runs else ""
    text = (f"Pooled run-to-run SD {p.sd:.2f} points ({p.df} df): the {p.runs} runs of {_configs(p.configs)} with "
            f"2 or more runs{anchor}")
    if p.left_out:
        kinds = ", ".join(f"{n} {POOL_KIND_WORDS[kind]}" for kind, n in p.left_out.items())
        text += (f"; left out: {kinds} runs (--pool-include {' '.join(p.left_out)} takes them in). The pool holds "
                 "this pipeline's trained configs only")
    return text + "."


def anchor_statement(analysis: Analysis) -> list[str]:
    a = analysis.anchor
    if a is None:
        return []
    text = f"Anchor: {a.label}, {a.metric} = {a.mean:.2f} (SD {a.sd:.2f} over {a.n} runs)."
    if a.note:
        text += f" {a.note.strip()}"
    if analysis.baseline is None:
        text += (" The verdicts below are against this anchor because the sweep has no in-sweep baseline: add the "
                 "unchanged recipe to the sweep and select it with --baseline.")
    else:
        text += " The verdicts use the in-sweep baseline; the anchor columns are for orientation."
    return [text]


def noise_table(analysis: Analysis, level: float) -> str:
    t = analysis.table.dropna(subset=["eval_sd"]) if "eval_sd" in analysis.table else pd.DataFrame()
    left = noise_left_out(analysis.table)
    if t.empty:
        return (f"No per-sample data with at least {MIN_SPLIT_RUNS} runs per config: no split of the noise."
                + (f" {not_split_line(left)}" if left else ""))
    header = ["config", "n", "run-to-run SD", "eval-sampling SD", f"training-seed SD [{level:.0%} CI]", "eval share"]
    rows = []
    for _, r in t.iterrows():
        seed = seed_part_note(r) + " " + _bracket(r["train_sd_low"], r["train_sd_high"])
        rows.append([r["label"], str(r["n"]), _num(r["sd"]), _num(r["eval_sd"]), seed, _share(r["eval_share"])])
    return markdown_table(header, rows) + (f"\n\n{not_split_line(left)}" if left else "")


def not_split_line(left: dict[str, str]) -> str:
    """The configs the Noise table and plots/variance_decomposition.png leave out, and why."""
    return "Not split, so in neither the table nor its plot: " + "; ".join(f"{label} ({why})" for label, why in
                                                                        left.items()) + "."


# --- races ---------------------------------------------------------------------------------------

def _signed(value) -> str:
    return "–" if value is None or pd.isna(value) else f"{value:+.2f}"


def race_section(race: Race, plot: Path | None) -> list[str]:
    """The '## Race' section of one race.jsonl: outcome, final verdicts, eliminations, spending, plot."""
    h, t, st = race.header, race.totals, race.header.get("settings", {})
    mark = " [simulated]" if t["simulated"] else ""
    lines = [f"## Race: {race.path}", ""]
    if t["simulated"]:
        lines += [f"> **SIMULATED DATA: {t['simulated']} of the race's {t['done']} finished runs come from the "
                  "simulator, not from training.**", ""]
    baseline = f"in-sweep baseline {h.get('baseline')}" if h.get("baseline") else "no in-sweep baseline"
    decided = race.stop is not None and str(race.stop["reason"]).startswith("decided")
    level = (f"α = {st.get('alpha')} (the race was decided)" if decided
             else f"stop_alpha = {st.get('stop_alpha')} (the race ended undecided, so its last look is no looser)")
    lines.append(f"{len(h['configs'])} configs ({baseline}) raced on {h.get('metric')}: {st.get('min_seeds')} seeds "
                 f"each, then +{st.get('seeds_per_round')} per round up to {st.get('max_seeds')}; a config "
                 f"significantly worse than the round's best (Holm p ≤ {st.get('eliminate_alpha')}) gets no more seeds."
                 + (f" Nor does one that cannot beat the baseline by futility_effect = {st['futility_effect']} points "
                    "(futile; it stays in the Holm family of the claims)." if st.get("futility_effect") else "")
                 + (" Declared pairing=seed: configs were compared by paired differences over the seeds both ran, "
                    "and the baseline ran the confirmation seeds too." if st.get("pairing") == "seed" else "")
                 + (f" Restarted with changed settings {race.resumes} time(s) (see the log's resume records)."
                    if race.resumes else ""))
    if race.stop is None:
        lines += ["", "**Not finished**: no stop in the log yet (running, or cut by a kill: rerun the same sweep "
                      "command and it resumes from the log). The rounds so far are in the plot."]
    else:
        lines += ["", f"**Stopped after round {race.stop['round']}**: {race.stop['reason']}. "
                      f"**Winner: {race.winner}{mark}**."]
        winner = race.final[race.final["winner"]]
        seeds = row_confirmation(race, winner.iloc[0], with_mean=False) if not winner.empty else ""
        if seeds:  # the console's words for the seeds; the mean is said apart, as the unbiased score
            row = winner.iloc[0]
            score = (f"mean {row['confirm_mean']:.2f}, the winner's unbiased score (its race mean was picked as the "
                     "best, so it is biased upward)" if pd.notna(row["confirm_n"]) else
                     "no unbiased score (no confirmation run finished)")
            lines.append(f"Confirmation on {seeds}: {score}; its final row uses all {int(row['n'])} runs. Final "
                         f"verdict vs the baseline: **{row['action']}**.")
        elif not race.finished:
            lines.append("The winner's confirmation on fresh seeds is still running: no final verdicts yet.")
    if not race.final.empty:
        lines += ["", f"Final verdicts of the configs live at the stop (t-intervals with the SD pooled across them; "
                      f"vs the baseline Holm-adjusted, judged at {level}; vs the anchor at anchor_alpha = "
                      f"{st.get('anchor_alpha')}, reported only, never the evidence for 'better'):", ""]
        header = ["config", "n", "mean", f"{1 - st.get('alpha', 0.05):.0%} CI", "Δ vs baseline", "p Holm (base)",
                  "Δ vs anchor", "p (anchor)", "vs anchor (reported only)", "verdict", "confirmation (fresh seeds)"]
        rows = [[r["config"] + mark + (" (winner)" if r["winner"] else ""), str(r["n"]),
                 _num(r["mean"]), _bracket(r["ci_low"], r["ci_high"]), _signed(r["delta_baseline"]),
                 _p(r["p_baseline"]), _signed(r["delta_anchor"]), _p(r["p_anchor"]), r["anchor"] or "–",
                 r["action"], row_confirmation(race, r) or "–"] for _, r in race.final.iterrows()]
        lines.append(markdown_table(header, rows))
    if race.eliminations.empty:
        lines += ["", "No config left the race early."]
    else:
        left_as = {"eliminate": "eliminated", "futile": "futile"}
        rows = [[r["config"] + mark, str(r["round"]), left_as.get(r["action"], "dropped"),
                 _seeds(r["n"]), _num(r["mean"]), _signed(r["delta_best"]), _p(r["p_best"]), r["reason"]]
                for _, r in race.eliminations.iterrows()]
        lines += ["", "Configs that left the race, with the round it happened in:", "",
                  markdown_table(["config", "round", "action", "n", "mean", "Δ vs best", "p Holm (vs best)", "why"],
                                 rows)]
    if collapsed := race_lines(race.run_dirs):
        lines += ["", *collapsed]
    grid = f"; every config at max_seeds would be {t['grid_runs']} runs without confirmation" if t["grid_runs"] else ""
    lines += ["", f"Spent: {t['runs']} runs ({t['done']} done, {t['collapsed']} stopped at a collapse, "
                  f"{t['failed']} failed, {t['confirm_runs']} in the confirmation), {t['gpu_hours']:.1f} "
                  f"GPU-hours{grid}. Per config (every run it took, failed ones included; each run's own "
                  "GPU-hours):", "",
              markdown_table(["config", "runs", "GPU-hours"],
                             [[config + mark, str(c["runs"]), f"{c['gpu_hours']:.2f}"]
                              for config, c in t["by_config"].items()]
                             + [["total", str(t["runs"]), f"{t['gpu_hours']:.2f}"]]),
              "", "These are the race's own decisions, as logged. The Verdicts table above re-analyses every run, "
                  "eliminated configs included, with the summary's settings, so its numbers can differ."]
    if plot is not None:
        lines += ["", f"![race progress](plots/{plot.name})"]
    return lines


# --- writers -------------------------------------------------------------------------------------

def write_markdown(path: Path, analysis: Analysis, collection: Collection, s: SummarySettings, display: str,
                   plots: list[Path], races: list[tuple[Race, Path | None]] = (),
                   transitions: Transitions | None = None, apart: str | None = None) -> None:
    """summary.md. `apart`: which of the roots' problem sets this summary holds, when they held several."""
    sim = int(analysis.usable["simulated"].sum())
    ext = int(analysis.usable["external"].sum())
    lines = [f"# Sweep summary: {display}", "",
             f"Generated {datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC} from {', '.join(s.roots)}"
             + (f" and external results {', '.join(s.external)}" if s.external else "") + ".",
             f"{len(analysis.usable)} finished runs in {len(analysis.table)} configs enter the statistics "
             f"({len(collection.skipped)} run dirs left out, listed at the end). "
             f"Unit of replication: the training run. Intervals: {s.level:.0%} t-intervals over runs"
             + (", cut at 0 and 100 (differences at -100 and +100), the bounds of the score: cutting never drops "
                "its true value" if stats.is_percent_score(s.metric) else "")
             + f"; tests at α = {s.alpha}, Holm-adjusted across configs."]
    if apart:
        lines += ["", f"> {apart}"]
    if not collection.skipped.empty:
        counts = ", ".join(f"{n} {state}" for state, n in collection.skipped["state"].value_counts().items())
        lines += ["", f"> {len(collection.skipped)} run dirs are left out ({counts}): only finished runs with eval "
                      "results enter the statistics. They are listed at the end."]
    if graders := grader_statement(collection.runs, s.roots):
        lines += ["", f"> **{graders}**"]
    if sim:
        lines += ["", f"> **SIMULATED DATA: {sim} of the runs were produced by the simulator (executor=simulate), "
                      "not by training.** Their configs are labelled [simulated] in every table and plot and are "
                      "never pooled with real runs (unless --pool-include simulated)."]
    if ext:
        lines += ["", f"> {ext} runs come from external results (labelled [external]); they have no per-sample data, "
                      "so they are compared on run scores only."]
    header, rows = verdict_rows(analysis, s.level)
    lines += ["", "## Verdicts", "", markdown_table(header, rows), "", *[f"- {x}" for x in verdict_statements(analysis, s)],
              *[f"- {x}" for x in analysis.notes], f"- {pool_statement(analysis)}"]
    lines += [f"- In-sweep baseline: {analysis.baseline or 'none'} ({analysis.baseline_how}).",
              f"- {TARGET}"]
    if transitions is not None:
        lines += ["", *transition_lines(transitions, next((p for p in plots if p.name == "transitions.png"), None))]
    lines += ["", "## Anchor", "", *anchor_statement(analysis)] if analysis.anchor is not None else []
    for race, plot in races:
        lines += ["", *race_section(race, plot)]
    if collapse := summary_section(collection.runs, s.collapsed_score):
        lines += ["", *collapse]
    if caps := cap_section(collection.runs):
        lines += ["", *caps]
    if drift := drift_section(collection.runs, analysis.baseline):
        lines += ["", *drift]
    power = power_statements(analysis, s, display)
    lines += ["", "## How many seeds", "", *[f"- {x}" for x in power]] if power else []
    if sampling := sampling_lines(collection.runs):
        lines += ["", *sampling]
    if pairing := pairing_statements(analysis, s):
        lines += ["", "## Pairing by seed", "", *[f"- {x}" for x in pairing]]
    lines += ["", "## Noise: eval sampling vs training seed", "", noise_table(analysis, s.level), "",
              "Eval-sampling SD: the binomial noise of K samples per problem, from each run's own samples. "
              "Training-seed SD: what remains of the run-to-run variance, with its interval (chi-square on the "
              f"run variance; configs with ≥ {MIN_SPLIT_RUNS} runs). 'Below eval noise': the runs spread less than "
              "eval sampling alone predicts, so only the interval says how large the training-seed part can be. "
              "The first shrinks with more samples per problem, the second only with more seeds. An untrained base "
              "model's runs differ in eval sampling only: its remainder is expected to be 0, a check of the "
              "eval-noise model, not a training-seed effect."]
    if fixed := {k.removeprefix("cfg."): v for k, v in collection.fixed.items()
                 if k.split(".")[1] in ("model", "eval", "loss") or k in ("cfg.executor",)}:
        lines += ["", "## Fixed settings (same in every run)", "",
                  ", ".join(f"`{k}={v}`" for k, v in fixed.items() if not isinstance(v, (tuple, str)) or len(str(v)) < 40)]
    if not collection.skipped.empty:
        rows = [[r["path"], r["state"], r["reason"]] for _, r in collection.skipped.iterrows()]
        lines += ["", "## Skipped or unfinished run dirs", "", markdown_table(["run dir", "state", "reason"], rows)]
    if plots:
        lines += ["", "## Plots", ""] + [f"![{p.stem}](plots/{p.name})" for p in plots]
    lines += ["", "Files: runs.csv (one row per run), samples.parquet (one row per run × problem × sample), "
                  "summary.csv (one row per config, every number above)."]
    path.write_text("\n".join(lines) + "\n")


# Below this console width the printed table keeps only the verdict's own columns (summary.md and
# summary.csv always hold all of them): thirteen columns in 100 characters are unreadable.
FULL_TABLE_WIDTH = 160


def printed_columns(header: list[str], width: int) -> list[int]:
    """Indices of the columns to print: all on a wide console; on a narrow one the config, its mean and
    CI, the comparison the verdict rests on (in-sweep baseline if any, else the anchor) and the verdict."""
    if width >= FULL_TABLE_WIDTH:
        return list(range(len(header)))
    reference = "base" if "p Holm (base)" in header else "anchor"
    return [i for i, name in enumerate(header)
            if i < 4 or name == "verdict" or (name.startswith(("Δ vs", "p Holm")) and reference in name)]


def print_table(analysis: Analysis, s: SummarySettings, display: str, console: Console | None = None) -> None:
    header, rows = verdict_rows(analysis, s.level)
    console = console or Console()
    keep = printed_columns(header, console.width)
    title = f"{display} per config ({len(analysis.usable)} runs)"
    if analysis.usable["simulated"].any():
        title += " — includes SIMULATED runs"
    if len(keep) < len(header):
        title += f" — {len(header) - len(keep)} more columns in summary.md"
    table = Table(title=escape(title))
    for i in keep:
        table.add_column(header[i], overflow="fold")
    colors = {"better": "green", "worse": "red", "baseline": "blue"}
    for cells, (_, row) in zip(rows, analysis.table.iterrows()):  # labels hold [simulated]: escape them
        table.add_row(*(escape(cells[i]) for i in keep), style=colors.get(row.get("verdict"), None))
    console.print(table)
    for line in verdict_statements(analysis, s) + power_statements(analysis, s, display)[:1]:
        console.print(escape(f"- {line}".replace("**", "")))
