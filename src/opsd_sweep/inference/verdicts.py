"""The one verdict rule: a Holm family of comparisons with one reference, and each member's word.

The summary (against the in-sweep baseline or the anchor), the sensitivity search (the same family at
another SD) and the race (claims against the baseline, eliminations against the round's best) all call
`family_verdicts`, so none of them can word a result differently from the others.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from opsd_sweep.inference.stats import holm, verdict  # verdict: the word of one adjusted p


@dataclass(frozen=True)
class FamilyVerdicts:
    """Per member, in the caller's order: the Holm-adjusted p (nan outside the family) and the word."""

    adjusted: np.ndarray
    words: list[str]


def family_verdicts(deltas: Sequence[float], p: Sequence[float], alpha: float,
                    in_family: Sequence[bool] | None = None, held_out: int = 0) -> FamilyVerdicts:
    """Holm over the members of one family of tests against one reference, then each member's verdict at alpha.

    Args:
        deltas: shape (m,), arm minus reference (its sign names the direction of a significant difference).
        p: shape (m,), raw two-sided p-values; a nan p (no test possible) is outside the family.
        alpha: family-wise level of the verdicts.
        in_family: shape (m,), which members are tested (default: those with a p); the others get nan and
            'inconclusive' and do not count in the family's size.
        held_out: members of the family that are not in the arrays and enter with p = 1 (the race's futile
            configs: stopping them never shrinks the family a claim is adjusted over).
    Returns:
        FamilyVerdicts in input order.
    """
    deltas, p = np.asarray(deltas, float), np.asarray(p, float)
    if deltas.shape != p.shape:
        raise ValueError(f"family_verdicts: deltas {deltas.shape} and p {p.shape} must have one entry per member")
    member = ~np.isnan(p) if in_family is None else np.asarray(in_family, bool) & ~np.isnan(p)
    adjusted = np.full(p.shape, np.nan)
    if member.any():
        adjusted[member] = holm(np.concatenate([p[member], np.ones(held_out)]))[:member.sum()]
    return FamilyVerdicts(adjusted, [verdict(d, q, alpha) for d, q in zip(deltas, adjusted)])
