"""The collapse rule (opsd_sweep.run.collapse.find_collapse), the pure function the trainer stops on and the
summary flags by; its real behaviour on tiny cycles is in tests/orchestration/test_collapse_stop.py."""

from __future__ import annotations

import pytest

from opsd_sweep.run.collapse import collapse_count, find_collapse
from opsd_sweep.config import CollapseConfig, ConfigError, load_run_config
from tests.conftest import compose


@pytest.fixture(scope="module")
def rule() -> CollapseConfig:
    """The default rule, as the recipe configures it."""
    return load_run_config(compose()).train.collapse


def run(kl: list[float], length: list[float] | None = None, cap: list[float] | None = None) -> list[dict]:
    length = length or [18.0] * len(kl)
    cap = cap or [0.0] * len(kl)
    return [{"step": i + 1, "kl_true": k, "rollout_len": n, "rollout_cap_frac": c}
            for i, (k, n, c) in enumerate(zip(kl, length, cap))]


def test_a_run_that_learns_never_collapses(rule):
    """OPSD's KL falls as the student learns: a fall to ~0 is success, not a collapse."""
    assert find_collapse(run([1.3, 1.1, 0.9, 0.5, 0.3, 0.1, 0.02, 0.004, 0.01, 0.0]), rule) is None


def test_one_noisy_step_is_no_collapse(rule):
    assert find_collapse(run([1.0, 1.2, 3.0, 1.0, 0.8, 3.1, 0.9]), rule) is None


def test_a_spike_that_recovers_is_no_collapse(rule):
    """The tiny demo's lr=0.01, seed 1, on an Intel Xeon VM: three steps out of band (KL 2.3 x its early
    maximum, 6 of 8 rollouts capped), then back; it scores 74 against the base model's 42."""
    kl = [1.647, 1.265, 1.032, 0.513, 3.871, 3.297, 2.149, 1.578, 0.451, 1.095, 0.279]
    length = [18.0, 18.0, 18.0, 17.75, 22.375, 19.25, 13.25, 14.25, 16.25, 15.875, 17.375]
    cap = [0.0, 0.0, 0.0, 0.0, 0.75, 0.5, 0.0, 0.0, 0.0, 0.25, 0.0]
    assert find_collapse(run(kl, length, cap), rule) is None


def test_a_kl_that_stays_above_the_early_band_collapses_at_its_first_step(rule):
    found = find_collapse(run([1.35, 0.73, 1.2, 3.6, 2.9, 4.8, 2.3, 3.0, 1.0]), rule)
    assert found.step == 4 and found.reason == "kl_true 3.6 > 1.5 x early max 1.35"


@pytest.mark.parametrize("length", [[18, 18, 18, 12, 11, 12, 13, 9, 18], [18, 18, 18, 23.5, 24, 23, 24, 25, 18]])
def test_rollouts_that_shrink_or_grow_out_of_band_collapse(rule, length):
    found = find_collapse(run([1.0] * 9, length=length), rule)
    assert found.step == 4 and found.reason.startswith("rollout_len") and "early mean 18 ± 25%" in found.reason


def test_more_truncated_rollouts_collapse(rule):
    found = find_collapse(run([1.0] * 8, cap=[0.0, 0.125, 0.5, 0.75, 0.5, 0.5, 0.625, 0.0]), rule)
    assert found.step == 3 and found.reason == "rollout_cap_frac 0.50 > early mean + 0.25 = 0.31"


def test_the_band_comes_from_the_early_steps_only(rule):
    assert find_collapse(run([0.5]), rule) is None  # not enough steps to have a band
    steady_high = run([3.0, 3.2, 3.1, 3.3, 2.9])  # a run that starts high is judged against itself
    assert find_collapse(steady_high, rule) is None
    assert find_collapse(steady_high, CollapseConfig(early_steps=2, patience=1, kl_ratio=1.01, length_band=0.25,
                                                     cap_rise=0.25)).step == 4


def test_thresholds_that_cannot_work_are_refused():
    with pytest.raises(ConfigError) as err:
        load_run_config(compose(["train.collapse.kl_ratio=0.5", "train.collapse.patience=0"]))
    assert "train.collapse.kl_ratio=0.5 must be > 1" in str(err.value)
    assert "train.collapse.patience=0 must be >= 1" in str(err.value)


def test_the_collapse_count_says_step_for_one_and_steps_for_several():
    assert collapse_count(3, [7]) == "collapsed in 1 of 3 seeds, at step 7"
    assert collapse_count(3, [9, 7]) == "collapsed in 2 of 3 seeds, at steps 7, 9"
