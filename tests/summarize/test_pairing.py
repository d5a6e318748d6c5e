"""`--pairing seed`: configs against the in-sweep baseline by paired differences over the seeds both ran."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from opsd_sweep.summarize.settings import load_settings
from opsd_sweep.summary import main
from opsd_sweep.testing.rundirs import draw_correct, write_run

DIFFICULTY = np.random.default_rng(0).normal(0.0, 1.5, 30)
SEED_SHIFT = dict(enumerate(np.random.default_rng(7).normal(0.0, 0.5, 12), start=1))  # what a seed does to any config
# learning rate -> (logit effect, seeds run): 2e-5 misses baseline seed 1 and ran seed 9 the baseline did not;
# 3e-5 shares no seed with the baseline
GRID = {5e-6: (0.0, range(1, 7)), 1e-5: (0.2, range(1, 7)), 2e-5: (0.0, [2, 3, 4, 5, 6, 9]), 3e-5: (0.0, [10, 11])}
BASELINE = "cfg.learning_rate=5e-06"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp("results")
    rng = np.random.default_rng(1)
    for lr, (effect, seeds) in GRID.items():
        for seed in seeds:
            # K = 48 samples per problem: eval noise ~1 point, below the seed shift's ~8
            correct = draw_correct(rng, DIFFICULTY, effect + SEED_SHIFT[seed] + rng.normal(0, 0.03), 48)
            write_run(root / "lr", learning_rate=lr, seed=seed, correct=correct, rng=rng)
    return root


def summarise(sweep, out, *flags) -> pd.DataFrame:
    main([str(sweep), "--out", str(out), "--baseline", BASELINE, "--anchor", "none", "--no-plots", *flags])
    return pd.read_csv(out / "summary.csv").set_index("label")


def test_paired_comparison_is_the_paired_t_over_common_seeds(sweep, tmp_path):
    summary = summarise(sweep, tmp_path, "--pairing", "seed")
    runs = pd.read_csv(tmp_path / "runs.csv")
    score = runs.pivot_table(index="cfg.seed", columns="label", values="avg_at_n")
    for label, common in (("lr=1e-05", range(1, 7)), ("lr=2e-05", range(2, 7))):
        a, b = score.loc[list(common), label], score.loc[list(common), "lr=5e-06"]
        paired = sps.ttest_rel(a, b)
        row = summary.loc[label]
        assert row["delta_baseline"] == pytest.approx((a - b).mean())
        assert row["p_baseline"] == pytest.approx(paired.pvalue)
        assert row["paired_n"] == len(common) and row["vs_baseline"] == f"paired by seed ({len(common)} common)"
        assert row["seed_corr"] == pytest.approx(np.corrcoef(a, b)[0, 1])
    dropped = summary.loc["lr=2e-05"]
    assert (dropped["paired_dropped"], dropped["paired_dropped_baseline"]) == (1, 1)
    assert "dropped 1 of its runs and 1 of the baseline's" in dropped["flags"]
    lonely = summary.loc["lr=3e-05"]
    assert lonely["vs_baseline"] == "run scores (too few common seeds)" and lonely["paired_n"] == 0
    assert "0 seed(s) in common with the baseline, compared unpaired" in lonely["flags"]
    assert lonely["p_baseline"] == pytest.approx(sps.ttest_ind(score["lr=3e-05"].dropna(), score["lr=5e-06"].dropna(),
                                                               equal_var=False).pvalue)
    p = summary.loc[["lr=1e-05", "lr=2e-05", "lr=3e-05"], "p_baseline"]
    assert list(summary.loc[p.index, "p_baseline_holm"]) == pytest.approx(
        list(np.minimum(1, np.maximum.accumulate(np.sort(p) * [3, 2, 1]))[np.argsort(np.argsort(p))]))


def test_a_shared_seed_effect_makes_the_paired_verdict_decide_what_the_unpaired_cannot(sweep, tmp_path):
    paired = summarise(sweep, tmp_path / "paired", "--pairing", "seed")
    unpaired = summarise(sweep, tmp_path / "unpaired")
    assert paired.loc["lr=1e-05", "verdict"] == "better"
    assert unpaired.loc["lr=1e-05", "verdict"] == "inconclusive"
    assert paired.loc["lr=1e-05", "verdict_sd"] == "SD of the differences over 6 paired seeds"
    report = (tmp_path / "paired" / "summary.md").read_text()
    assert "## Pairing by seed" in report and "The anchor comparison stays unpaired" in report
    r = paired.loc[["lr=1e-05", "lr=2e-05"], "seed_corr"]
    assert r.min() > 0.5  # the seed shift dominates the run-to-run noise of this world
    assert "Seed correlation of a config's and the baseline's run scores: r = " in report
    assert "seeds per config paired** against" in report
    assert "Too few seeds in common with the baseline (< 2), compared unpaired: lr=3e-05." in report
    # the paired config's "holds to SD" is an SD of its per-seed differences, and the table says so
    holds = paired.loc["lr=1e-05", "verdict_holds_to_sd"]
    row = next(line for line in report.splitlines() if line.startswith("| lr=1e-05 "))
    assert f"| better | {holds:.1f} (of Δ) |" in row


def test_pairing_none_is_the_default_and_changes_nothing(sweep, tmp_path):
    default = summarise(sweep, tmp_path / "default")
    none = summarise(sweep, tmp_path / "none", "--pairing", "none")
    pd.testing.assert_frame_equal(default, none)
    assert "paired_n" not in default and set(default["vs_baseline"]) == {"run scores", "is baseline"}
    assert "## Pairing by seed" not in (tmp_path / "default" / "summary.md").read_text()


def test_an_unknown_pairing_is_refused_naming_the_choices():
    with pytest.raises(ValueError, match=r"pairing='by-seed' must be one of \['none', 'seed'\]"):
        load_settings({"pairing": "by-seed"})
    with pytest.raises(SystemExit):
        main(["--pairing", "by-seed"])


def test_declared_pairing_says_the_cost_optimal_k_is_an_unpaired_one(sweep, tmp_path):
    """The fixture's runs record GPU-hours per phase (4 of training, 1 of eval at K = 48): the seeds advice states
    a cost-optimal K, priced on the unpaired variance; under --pairing seed the report says so."""
    summarise(sweep, tmp_path / "paired", "--pairing", "seed")
    summarise(sweep, tmp_path / "unpaired")
    paired, unpaired = ((tmp_path / d / "summary.md").read_text() for d in ("paired", "unpaired"))
    optimum = re.search(r"most precision per GPU-hour comes at K ≈ (\d+) samples per problem", paired)
    assert optimum, paired
    assert (f"The K ≈ {optimum.group(1)} samples per problem of the seeds advice, like eval.n_samples=auto's "
            "choice, is the optimum of unpaired comparisons") in paired
    assert "is the optimum of unpaired comparisons" not in unpaired
