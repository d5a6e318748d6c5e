"""How fragile a verdict is: the largest run-to-run SD at which it still holds.

verdict_holds_to_sd = the largest X for which `--assumed-sd X --no-pool-sd` (every arm's SD known and
equal to X; the anchor keeps its published SD unless --pool-anchor) gives the same verdict, at the
same alpha and Holm family (inference.verdicts). Under pairing=seed a config paired with the baseline
takes X as the SD of its per-seed differences. No library has this; it is a search over X of the same tests.
"""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np
import pandas as pd

from opsd_sweep.inference import stats
from opsd_sweep.inference.arms import Arm, RunSD, compare_arms
from opsd_sweep.inference.pairing import MIN_PAIRS
from opsd_sweep.inference.verdicts import family_verdicts


class Levels(Protocol):
    """What the search needs of the summary's settings."""

    level: float  # coverage of the intervals
    alpha: float  # test level of the verdicts
    pool_anchor: bool  # the anchor shares the run-to-run SD of the configs


MAX_SD = 50.0  # the largest SD a score in [0, 100] can have: beyond it no SD is plausible
_GRID = np.geomspace(0.01, MAX_SD, 80)


def verdicts_at(sd: float, table: pd.DataFrame, family: np.ndarray, reference: Arm, reference_name: str,
                s: Levels) -> list[str]:
    """Every config's verdict if the run-to-run SD were `sd`, known (nan-p configs stay out of the family).

    A config compared by paired differences over its common seeds with the baseline (a `paired_n` >= 2, under
    pairing=seed) takes `sd` as the SD of those differences: SE = sd / sqrt(pairs)."""
    known = RunSD(sd, math.inf, "known")
    ref = Arm(reference.mean, reference.n, known) if reference_name == "baseline" or s.pool_anchor else reference
    p = np.full(len(table), np.nan)
    deltas = table[f"delta_{reference_name}"].to_numpy(float)
    pairs = table["paired_n"].to_numpy(float) if reference_name == "baseline" and "paired_n" in table \
        else np.full(len(table), np.nan)
    for i in np.flatnonzero(family):
        row = table.iloc[i]
        if pairs[i] >= MIN_PAIRS:
            p[i] = stats.difference(deltas[i], [(sd**2 / pairs[i], math.inf)], s.level).p
        else:
            p[i] = compare_arms(Arm(row["mean"], int(row["n"]), known), ref, s.level).p
    return family_verdicts(deltas, p, s.alpha).words


def verdict_holds_to_sd(table: pd.DataFrame, reference: Arm, reference_name: str, s: Levels) -> list[float]:
    """Per config: the largest run-to-run SD (points) keeping its better/worse verdict; nan otherwise.

    Scans a log grid of SDs up to MAX_SD, then bisects between the last SD where the verdict holds and
    the next grid point. MAX_SD itself means "for any plausible SD".
    """
    verdicts = table["verdict"].tolist()
    decided = [i for i, v in enumerate(verdicts) if v in ("better", "worse")]
    out = [math.nan] * len(table)
    if not decided:
        return out
    family = table[f"p_{reference_name}"].notna().to_numpy()
    at = {sd: verdicts_at(sd, table, family, reference, reference_name, s) for sd in _GRID}
    for i in decided:
        holding = [sd for sd in _GRID if at[sd][i] == verdicts[i]]
        if not holding:
            continue
        low = holding[-1]
        if low == _GRID[-1]:
            out[i] = MAX_SD
            continue
        high = _GRID[np.searchsorted(_GRID, low) + 1]
        for _ in range(30):
            mid = (low + high) / 2
            low, high = (mid, high) if verdicts_at(mid, table, family, reference, reference_name, s)[i] == \
                verdicts[i] else (low, mid)
        out[i] = low
    return out
