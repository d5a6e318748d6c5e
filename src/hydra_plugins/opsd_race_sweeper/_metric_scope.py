"""Refuse a race metric whose meaning changes with the runs' K, before any run.

The summary refuses such a metric over the K its runs recorded (opsd_sweep.summarize.metric_scope); a race
decides while its runs come in, so it applies the same rule to the K its configs will draw, read from their
composed eval settings: eval.n_samples=auto lets each run's K follow the pool (from the smaller of
eval.auto_k.first and eval.auto_k.low up to eval.auto_k.high), eval.allocation=neyman gives each problem its
own count (down to eval.allocation_floor), and a grid axis over eval.n_samples gives configs different K.
"""

from __future__ import annotations

from omegaconf import DictConfig

from opsd_sweep.config import AUTO, is_sample_count
from opsd_sweep.summarize.metric_scope import K_DEPENDENT, PASS_AT

FIX = ("use hydra.sweeper.metric=avg_at_n (the mean solve rate: the same quantity at any K and any per-problem "
       "counts)")


def race_metric_problem(metric: str, evals: dict[str, DictConfig]) -> str | None:
    """Why `metric` (hydra.sweeper.metric) cannot decide a race of the configs whose eval settings are `evals`
    ({config label: its composed eval node}), naming the eval settings and the fix; None when it can."""
    name = metric.rsplit(".", 1)[-1]  # an eval suite's `<benchmark>.<metric>` is judged by its metric
    evals = {label: e for label, e in evals.items() if smallest_k(e) is not None}  # else the config check says it
    if not evals:
        return None
    if name in K_DEPENDENT and mixed_k(evals):
        return (f"hydra.sweeper.metric={metric} cannot decide this race: its runs draw different numbers of samples "
                f"per problem (K): {describe_k(evals)}. A majority vote over more samples scores higher on the same "
                "model (maj@11 > maj@4), so the race would compare the runs' K, not the configs. Fix: "
                f"{FIX}, or give every config one fixed eval.n_samples with eval.allocation=uniform.")
    if (match := PASS_AT.fullmatch(name)) and (k := int(match.group(1))) > min(map(smallest_k, evals.values())):
        return (f"hydra.sweeper.metric={metric} cannot decide this race: pass@{k} needs at least {k} samples of "
                f"every problem, but runs can draw fewer: {describe_k(evals)}. A run with fewer has no {name}: it "
                f"would leave the race, and the runs kept would be chosen by their K. Fix: {FIX}, or pass_at_k with "
                f"k <= the smallest K, or raise the smallest K to >= {k}.")
    return None


def smallest_k(e: DictConfig) -> int | None:
    """The fewest samples a run of these eval settings can draw of a problem; None for an invalid n_samples."""
    if e.n_samples == AUTO:
        low = min(e.auto_k.first, e.auto_k.low)
    elif is_sample_count(e.n_samples):
        low = e.n_samples
    else:
        return None
    return min(low, e.allocation_floor) if e.allocation == "neyman" else low


def mixed_k(evals: dict[str, DictConfig]) -> bool:
    """Whether the runs can differ in K: auto or per-problem counts anywhere, or two fixed K in the grid."""
    return (any(e.n_samples == AUTO or e.allocation == "neyman" for e in evals.values())
            or len({e.n_samples for e in evals.values()}) > 1)


def describe_k(evals: dict[str, DictConfig]) -> str:
    """Each distinct K setting with its smallest K, and the configs that have it (all: 'every config')."""
    by_setting: dict[str, list[str]] = {}
    for label, e in evals.items():
        by_setting.setdefault(k_setting(e), []).append(label)
    return "; ".join(f"{setting} in {'every config' if len(labels) == len(evals) else ', '.join(labels)}"
                     for setting, labels in by_setting.items())


def k_setting(e: DictConfig) -> str:
    if e.n_samples == AUTO:
        text = (f"eval.n_samples=auto (K from min(eval.auto_k.first={e.auto_k.first}, "
                f"eval.auto_k.low={e.auto_k.low}) up to eval.auto_k.high={e.auto_k.high})")
    else:
        text = f"eval.n_samples={e.n_samples}"
    if e.allocation == "neyman":
        text += (" with eval.allocation=neyman (per-problem counts, down to "
                 f"eval.allocation_floor={e.allocation_floor})")
    return text if text == f"eval.n_samples={e.n_samples}" else f"{text}: smallest K {smallest_k(e)}"
