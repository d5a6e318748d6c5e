"""One verdict rule: the summary, the sensitivity search and the race word the same arms alike."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.multitest import multipletests

from opsd_sweep.inference.arms import Arm, RunSD
from opsd_sweep.inference.sensitivity import verdicts_at
from opsd_sweep.inference.verdicts import family_verdicts
from opsd_sweep.race import RaceSettings, RaceSpec
from opsd_sweep.race.compare import ConfigSummary
from opsd_sweep.race.policy import assess
from opsd_sweep.summarize.config_stats import analyse
from opsd_sweep.summarize.settings import load_settings

LABELS = ("lr=1", "lr=2", "lr=3", "lr=4", "lr=5")
BASELINE = LABELS[0]
RACE = dict(min_seeds=3, max_seeds=8, seeds_per_round=1, stop_alpha=0.02, eliminate_alpha=0.05, anchor_alpha=0.01,
            target_half_width=0.0, budget_gpu_hours=None, confirm_seeds=0, first_seed=1, max_failures=2)


def test_family_verdicts_is_holm_then_the_word_and_keeps_nan_and_held_out_members_in_place():
    p = [0.01, np.nan, 0.06, 0.003]
    family = family_verdicts([2.0, 5.0, -1.0, -3.0], p, 0.05)
    expected = multipletests([0.01, 0.06, 0.003], method="holm")[1]
    assert family.adjusted[[0, 2, 3]] == pytest.approx(expected) and math.isnan(family.adjusted[1])
    assert family.words == ["better", "inconclusive", "inconclusive", "worse"]
    held = family_verdicts([2.0, -3.0], [0.01, 0.003], 0.05, held_out=2)  # two futile members at p = 1
    assert held.adjusted == pytest.approx(multipletests([0.01, 0.003, 1, 1], method="holm")[1][:2])
    outside = family_verdicts([2.0, 1.0], [0.01, 0.001], 0.05, in_family=[True, False])
    assert outside.adjusted[0] == pytest.approx(0.01) and outside.words == ["better", "inconclusive"]
    with pytest.raises(ValueError, match="one entry per member"):
        family_verdicts([1.0], [0.1, 0.2], 0.05)


def draw_arms(rng: np.random.Generator, seeds: int) -> dict[str, np.ndarray]:
    """Run scores of five configs over the same seeds: a shared seed effect (pairing has something to find) and
    true shifts from clearly worse to clearly better than the baseline."""
    seed_effect = rng.normal(0, 2.0, seeds)
    shifts = (0.0, -4.0, 0.5, 3.0, 6.0)
    return {label: 50 + shift + seed_effect + rng.normal(0, 1.5, seeds) for label, shift in zip(LABELS, shifts)}


def runs_table(arms: dict[str, np.ndarray]) -> pd.DataFrame:
    """The summary's runs table (collect's columns the statistics read), one row per run."""
    rows = [{"label": label, "cfg.learning_rate": float(label[3:]), "cfg.seed": seed, "avg_at_n": score,
             "counts": True, "state": "done", "external": False, "simulated": False}
            for label, scores in arms.items() for seed, score in enumerate(scores, start=1)]
    return pd.DataFrame(rows)


def summary_words(arms, **settings) -> pd.DataFrame:
    s = load_settings({"baseline": BASELINE, "anchor": "none", "alpha": 0.05} | settings)
    return analyse(runs_table(arms), s, None).table.set_index("label")


def race_rows(arms, pairing: str) -> dict[str, dict]:
    spec = RaceSpec(LABELS, BASELINE, None, RaceSettings(alpha=0.05, pairing=pairing, **RACE))
    summaries = {c: ConfigSummary(c, np.asarray(v), seed_ids=tuple(range(1, len(v) + 1))) for c, v in arms.items()}
    return {r["config"]: r for r in assess(summaries, spec, 0, "final", claim_alpha=0.05)}


@pytest.mark.parametrize("pairing", ["none", "seed"])
def test_summary_and_race_give_the_same_holm_p_and_words(pairing):
    """The race pools the SD across its live configs: the summary with --pool-sd (and the same pairing) is
    the same test, family and word."""
    rng = np.random.default_rng(3)
    seen = set()
    for _ in range(12):
        arms = draw_arms(rng, int(rng.integers(3, 8)))
        summary = summary_words(arms, pool_sd=True, pairing=pairing)
        race = race_rows(arms, pairing)
        for label in LABELS[1:]:
            assert summary.loc[label, "verdict"] == race[label]["verdict_baseline"], label
            assert summary.loc[label, "p_baseline_holm"] == pytest.approx(race[label]["p_baseline"])
            assert summary.loc[label, "delta_baseline"] == pytest.approx(race[label]["delta_baseline"])
            seen.add(race[label]["verdict_baseline"])
            assert summary.loc[label, "vs_baseline"].startswith("paired") == (pairing == "seed")
    assert seen == {"better", "worse", "inconclusive"}  # every word was at stake


def test_summary_at_a_declared_sd_and_the_sensitivity_search_at_that_sd_agree():
    """verdict_holds_to_sd re-tests the family at SD X: at the SD the summary declared it must reproduce the
    summary's own words."""
    rng = np.random.default_rng(5)
    seen = set()
    for sd in (1.0, 2.5, 4.0, 8.0):
        arms = draw_arms(rng, 5)
        table = summary_words(arms, assumed_sd=sd, pool_sd=False).reset_index()
        base = table.set_index("label").loc[BASELINE]
        reference = Arm(base["mean"], int(base["n"]), RunSD(sd, math.inf, "known"))
        family = table["p_baseline"].notna().to_numpy()
        settings = load_settings({"alpha": 0.05, "assumed_sd": sd})
        words = verdicts_at(sd, table, family, reference, "baseline", settings)
        tested = table["label"] != BASELINE
        assert [w for w, t in zip(words, tested) if t] == list(table.loc[tested, "verdict"])
        seen.update(table.loc[tested, "verdict"])
    assert {"better", "worse"} <= seen
