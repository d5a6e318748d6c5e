"""What a decision costs if runs were evaluated with another number of samples per problem (K).

Eval-sampling variance scales as 1/K and the training-seed part stays, so a run-to-run SD measured at
one K gives the SD at any other; seeds needed at that SD times the GPU-hours of a run at that K is the
GPU cost of the decision. Eval hours are taken as proportional to samples.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from opsd_sweep.inference import stats


def sd_at_k(sd: float, eval_sd: float, k: float, other_k: float) -> float:
    """Run-to-run SD if each run were evaluated with other_k samples per problem instead of k."""
    train_var = max(0.0, sd**2 - eval_sd**2)
    return math.sqrt(train_var + eval_sd**2 * k / other_k)


def run_gpu_hours_at_k(train_h: float, eval_h: float, k: float, other_k: float) -> float:
    """GPU-hours of one run (training + evaluation) at other_k samples per problem, from its hours at k."""
    return train_h + eval_h * other_k / k


def decision_cost_by_k(ks: Iterable[int], *, k: int, sd: float, eval_sd: float, train_h: float, eval_h: float,
                       target_effect: float, alpha: float, power: float, plan: stats.PowerReference,
                       known: bool) -> list[dict]:
    """Per K in `ks` (ascending): seeds per config for `target_effect` at the SD that K gives, and their
    GPU-hours per config ({"k", "seeds", "gpu_h"}; seeds and gpu_h None beyond the power search's limit).

    Args:
        k: the samples per problem the runs used, at which `sd` (run-to-run) and `eval_sd` were measured.
        train_h, eval_h: a run's GPU-hours of training and of evaluation at k.
        plan: the reference of the power calculation (stats.PowerReference); known: SD declared known.
    """
    rows = []
    for other in ks:
        seeds = stats.seeds_needed(target_effect, sd_at_k(sd, eval_sd, k, other), alpha, power, plan, known=known)
        rows.append({"k": other, "seeds": seeds,
                     "gpu_h": seeds * run_gpu_hours_at_k(train_h, eval_h, k, other) if seeds else None})
    return rows
