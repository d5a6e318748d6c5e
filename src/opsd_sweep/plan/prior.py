"""The run-to-run SD a plan is priced at: the published prior, or a sweep's own (--from RESULTS), and the eval's
length model (a sweep's own lengths where its runs wrote them, else the published ones grown as trained
checkpoints grow them)."""

from __future__ import annotations

import math

from opsd_sweep.costs import length_model
from opsd_sweep.costs.decision_model import DifficultyModel, LengthsByCorrectness, eval_lengths, sweep_by_correctness
from opsd_sweep.plan.designs import Noise
from opsd_sweep.summarize.collect import collect
from opsd_sweep.summarize.config_stats import pooled, usable_runs
from opsd_sweep.summarize.settings import load_settings as summary_settings


class PriorError(ValueError):
    """A results root the planner cannot take an SD or lengths from."""


def published_noise(sd: float, k: int, difficulty: DifficultyModel, base_score: float) -> Noise:
    """The prior SD at K = k; its eval-sampling part from the difficulty model (1.73 points of avg@12)."""
    return Noise(sd, difficulty.eval_var(base_score, k), k,
                 f"prior {sd:g} points at K = {k} (published multi-seed AIME24 studies' median)")


def sweep_noise(results: str, metric: str) -> Noise:
    """The summary's pooled run-to-run SD of the runs under `results` (its trained configs with >= 2 runs), at
    their K, with its eval-sampling part the mean of those runs' own eval variances."""
    runs = collect([results]).runs
    if runs.empty:
        raise PriorError(f"--from {results}: no readable run directories there; give the results root a sweep "
                         "wrote (e.g. results/<group>), or leave --from out for the published prior (--sd)")
    try:
        usable = usable_runs(runs, metric)
    except ValueError as err:
        raise PriorError(f"--from {results}: {err}") from None
    pool = pooled(usable, metric, summary_settings({"roots": [results]}), None)
    if pool.df < 1 or not math.isfinite(pool.sd):
        raise PriorError(f"--from {results}: no trained config there has >= 2 finished runs, so no run-to-run SD "
                         "can be pooled; run more seeds (seed=1,2,3) or give the SD with --sd")
    ks = sorted({int(k) for k in pool.members["n_samples"].dropna()})
    if len(ks) != 1:
        raise PriorError(f"--from {results}: the pooled runs used K = {ks} samples per problem; the SD's eval part "
                         "needs one K: point --from at runs of one K")
    eval_var = pool.members["eval_var"].dropna().mean() if "eval_var" in pool.members else math.nan
    if not math.isfinite(eval_var):
        raise PriorError(f"--from {results}: its runs record no per-sample results (eval.json problems), so the "
                         "SD cannot be split into training seeds and eval sampling; give the SD with --sd")
    return Noise(pool.sd, float(eval_var), ks[0], f"--from {results}: pooled over {pool.configs} configs, "
                                                  f"{pool.runs} runs ({pool.df} df) at K = {ks[0]}")


def lengths_for(spec: str, results: str | None) -> LengthsByCorrectness:
    """The eval's length model: `auto` = the --from sweep's own lengths where its runs wrote them, else the
    published lengths with the trained-checkpoint growth; or a decision_model.eval_lengths spec."""
    if spec != "auto":
        return eval_lengths(spec)
    if results is not None:
        try:
            return sweep_by_correctness(length_model.sweep(results))
        except ValueError:  # no eval.json with samples: the published model, grown
            pass
    return eval_lengths("trained")
