"""With no --seeds, confirm plans its fresh seeds for the test it runs: config - baseline paired by seed. The count
comes from the paired formula at the sweep's seed correlation (its lower 95% bound, never below 0), not from the
summary's unpaired advice: on a sweep whose seeds move both arms alike, the unpaired advice is far above the 24 per
arm confirm launches unasked (it was refused) while the paired one is a few seeds."""

from __future__ import annotations

import json
import math

import numpy as np
from scipy import stats as sps
from statsmodels.stats.power import TTestPower

from opsd_sweep.testing.rundirs import write_run
from opsd_sweep.confirm import __main__ as confirm_cli
from opsd_sweep.confirm import seeds

PROBLEMS, K = 30, 8  # a run's avg@8 is its correct cells / 240, in percent


def run_with_score(group, lr: float, seed: int, score: float, rng) -> float:
    """A real run dir whose avg_at_n is `score` rounded to one cell of 240; returns that score."""
    cells = int(round(score / 100 * PROBLEMS * K))
    correct = np.zeros(PROBLEMS * K, bool)
    correct[rng.permutation(PROBLEMS * K)[:cells]] = True
    write_run(group, learning_rate=lr, seed=seed, correct=correct.reshape(PROBLEMS, K), rng=rng)
    return 100 * cells / (PROBLEMS * K)


def test_the_seeds_advice_is_planned_for_the_paired_test(tmp_path, capsys):
    rng = np.random.default_rng(3)
    group = tmp_path / "default"
    scores = {5e-6: [], 1e-5: []}
    for seed in range(1, 21):  # a seed moves both arms alike (SD 6 points); each run adds its own SD 1
        shared = rng.normal(0, 6)
        for lr, gain in ((5e-6, 0.0), (1e-5, 1.0)):
            scores[lr].append(run_with_score(group, lr, seed, 45 + shared + gain + rng.normal(0, 1), rng))
    confirm_cli.main([str(group), "--baseline", "lr=5e-06", "--config", "lr=1e-05", "--report-only"])
    plan = json.loads((group / "confirm.json").read_text())["plan"]
    advice = plan["seeds_advice"]

    low = sps.pearsonr(scores[1e-5], scores[5e-6]).confidence_interval(0.95).low  # Fisher z, as design's
    assert math.isclose(advice["rho"], max(0.0, low), rel_tol=1e-6) and advice["rho"] > 0.5, advice
    d = advice["target_effect"] / (advice["sd"] * math.sqrt(2 * (1 - advice["rho"])))
    expected = math.ceil(TTestPower().solve_power(effect_size=d, alpha=0.05, power=advice["power"]))
    assert len(plan["seeds"]) == advice["paired"] == expected <= seeds.MAX_ADVISED_SEEDS, advice
    assert advice["unpaired"] > seeds.MAX_ADVISED_SEEDS  # what confirm planned (and refused) before
    out = capsys.readouterr().out
    assert f"the paired seeds advice: {expected} seeds per arm" in out and "unpaired it would be" in out


def test_with_too_few_common_seeds_the_advice_is_planned_at_no_correlation(tmp_path):
    """3 seeds per arm: no correlation estimate, so rho 0, where the paired test asks at least the unpaired count."""
    rng = np.random.default_rng(4)
    group = tmp_path / "default"
    for seed in (1, 2, 3):
        for lr in (5e-6, 1e-5):
            run_with_score(group, lr, seed, 45 + rng.normal(0, 0.7), rng)
    confirm_cli.main([str(group), "--baseline", "lr=5e-06", "--config", "lr=1e-05", "--report-only", "--seeds", "2"])
    advice = json.loads((group / "confirm.json").read_text())["plan"]["seeds_advice"]
    assert advice["rho"] == 0.0 and "not estimable" in advice["rho_how"], advice
    assert advice["paired"] >= advice["unpaired"], advice
