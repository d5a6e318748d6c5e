"""The racing rule of eval.checkpoints=race on hand-built per-problem rates: who stops, when it ends."""

from __future__ import annotations

import numpy as np

from opsd_sweep.evaluate.race_rule import race, schedule, worse_than_best

RNG = np.random.default_rng(3)
BASE = RNG.uniform(0.2, 0.8, 30)


def test_rounds_add_samples_up_to_n():
    assert schedule(3, 3, 12) == [3, 6, 9, 12]
    assert schedule(3, 4, 12) == [3, 7, 11, 12]
    assert schedule(1, 5, 4) == [1, 4]


def test_a_clearly_worse_checkpoint_stops_and_an_equal_one_does_not():
    rates = np.stack([BASE, BASE - 0.3, BASE + RNG.normal(0, 0.01, 30)])
    worse, p = worse_than_best(rates, alpha=0.05)
    assert worse.tolist() == [False, True, False]
    assert np.isnan(p[int(np.argmax(rates.mean(1)))]) and p[1] < 1e-6


def test_identical_checkpoints_never_stop():
    worse, p = worse_than_best(np.stack([BASE, BASE]), alpha=0.5)
    assert not worse.any() and p[1] == 1.0


def test_the_race_draws_more_only_for_checkpoints_still_in_it_until_they_reach_n():
    truth = [BASE, BASE - 0.4, BASE]
    asked = []

    def correct(c, m):
        asked.append((c, m))
        return np.round(truth[c] * m)  # expected counts: no sampling noise

    result = race(3, [2, 4, 6, 8], alpha=0.05, correct=correct)
    assert asked[:3] == [(0, 2), (1, 2), (2, 2)]  # everyone gets the first round
    assert 1 not in {c for c, m in asked if m > 2}  # the far worse one stops after it
    assert result.samples == [8, 2, 8]
    assert result.rounds[0]["stopped"] == [1]


def test_the_race_ends_at_n_samples_when_nothing_is_clearly_worse():
    result = race(2, [1, 2, 3], alpha=0.05, correct=lambda c, m: np.round(BASE * m))
    assert result.samples == [3, 3] and [r["samples"] for r in result.rounds] == [1, 2, 3]
