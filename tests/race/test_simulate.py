"""The simulator: the declared noise model, the run dir it writes, and how it stays apart from real runs."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from opsd_sweep.config import ConfigError, SimulateOffset, load_run_config
from opsd_sweep.run.keys import semantic_dict
from opsd_sweep.cycle import locate_run, run_cycle
from opsd_sweep.scoring.metrics import compute_metrics
from opsd_sweep.run.keys import run_key
from opsd_sweep.simulate import draw_correct_counts, problem_difficulties, simulate_run, solve_rates, true_score
from tests.conftest import compose


def simulated(tmp_path, *overrides: str):
    return load_run_config(compose(["executor=simulate", f"results_root={tmp_path}", *overrides]))


def test_noise_model_matches_the_calibration_facts(tmp_path):
    """30 problems x 12 samples: eval-sampling SD ~1.8 points; training-seed SD adds in quadrature."""
    sim = simulated(tmp_path).simulate
    rng = np.random.default_rng(0)
    eval_only = draw_correct_counts(np.full(4000, 54.22), dataclasses.replace(sim, train_seed_sd=0.0), 12, rng)
    scores = 100 * eval_only.mean(axis=1) / 12
    assert abs(scores.mean() - 54.22) < 0.15
    assert 1.65 < scores.std() < 1.95
    for sd in (2.0, 4.0):
        total = 100 * draw_correct_counts(np.full(4000, 54.22), dataclasses.replace(sim, train_seed_sd=sd), 12,
                                          rng).mean(axis=1) / 12
        assert abs(total.std() - np.hypot(sd, scores.std())) < 0.2


def test_problem_difficulties_are_shared_and_rates_hit_the_score(tmp_path):
    sim = simulated(tmp_path).simulate
    d = problem_difficulties(sim)
    assert d.shape == (30,) and np.array_equal(d, problem_difficulties(sim))
    rates = solve_rates(np.array([20.0, 54.22, 90.0]), d)
    assert np.allclose(rates.mean(axis=1), [0.20, 0.5422, 0.90], atol=1e-4)
    # a better run solves every problem at least as often: the same problems stay hard for every config
    assert np.all(np.diff(rates, axis=0) > 0)


def test_true_score_peaks_in_log_learning_rate_and_takes_knob_offsets(tmp_path):
    run = simulated(tmp_path, "simulate.lr_curvature=4", "simulate.lr_peak=5e-6", "learning_rate=5e-6")
    assert true_score(run.simulate, run) == pytest.approx(54.22)
    for lr in (5e-5, 5e-7):  # one decade either side loses lr_curvature points
        assert true_score(run.simulate, dataclasses.replace(run, learning_rate=lr)) == pytest.approx(50.22)
    run.simulate.offsets = [SimulateOffset(key="clip", value=0.05, points=3.0),
                            SimulateOffset(key="loss.beta", value=0.5, points=-8.0)]
    assert true_score(run.simulate, run) == pytest.approx(57.22)  # paper_clip has clip 0.05, beta 0


def test_simulated_run_dir_has_the_evaluator_schema_and_is_labelled(tmp_path):
    run = simulated(tmp_path, "seed=3")
    result = run_cycle(run)
    assert result["state"] == "done" and result["simulated"] is True
    _, run_dir = locate_run(run)
    status = json.loads(run_dir.status.read_text())
    assert status["state"] == "done" and status["simulated"] is True
    assert status["gpu_hours"] == run.simulate.gpu_hours_per_run and "simulate" in status["phase_seconds"]
    evaluation = json.loads(run_dir.eval_json.read_text())
    assert evaluation["simulated"] is True and evaluation["backend"] == "simulate"
    assert evaluation["n_problems"] == 30 and evaluation["n_samples"] == 12
    assert evaluation["metrics"] == compute_metrics(evaluation["problems"])  # recomputable from the samples
    sample = evaluation["problems"][0]["samples"][0]
    assert set(sample) == {"pred", "correct", "formatted", "n_tokens", "finish_reason"}
    steps = [json.loads(line) for line in run_dir.metrics.read_text().splitlines()]
    assert [s["step"] for s in steps] == list(range(1, run.train.max_steps + 1))
    assert {"loss", "kl_true", "grad_norm", "lr", "rollout_len"} <= set(steps[-1])
    # the same run draws the same numbers again; another seed draws others
    again = simulate_run(run, run_dir)
    assert again["problems"] == evaluation["problems"] and again["metrics"] == evaluation["metrics"]
    other = simulate_run(dataclasses.replace(run, seed=4), run_dir)
    assert other["metrics"] != evaluation["metrics"]


def test_simulated_and_real_runs_never_share_a_run_dir(tmp_path):
    real = load_run_config(compose([f"results_root={tmp_path}"]))
    sim = simulated(tmp_path)
    assert run_key(semantic_dict(real)) != run_key(semantic_dict(sim))
    # the noise model decides what a simulated run computes, and nothing about a real one
    changed = compose([f"results_root={tmp_path}", "simulate.base_score=40"])
    assert run_key(semantic_dict(load_run_config(changed))) == run_key(semantic_dict(real))
    changed_sim = simulated(tmp_path, "simulate.base_score=40")
    assert run_key(semantic_dict(changed_sim)) != run_key(semantic_dict(sim))


def test_bad_noise_model_is_refused_with_the_fix(tmp_path):
    with pytest.raises(ConfigError) as err:
        simulated(tmp_path, "simulate.base_score=140", "simulate.n_problems=0")
    assert "simulate.base_score=140.0 must be in (0, 100)" in str(err.value)
    assert "simulate.n_problems=0 must be >= 1" in str(err.value)
