"""Issue 49, item 4: `python -m opsd_sweep.evaluate compare --margin M` says what showing equivalence costs. Pilot
evaluations are hand-built eval.json pairs with fixed per-sample outcomes (drawn once from a stated world under a
fixed seed, or written out); the plan from them against a Monte Carlo of TOST at its size; the plan line and its
prices; the budget's refusal; bad input named."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from opsd_sweep.evaluate.compare import compare, main, plan
from opsd_sweep.scoring.metrics import compute_metrics
from opsd_sweep.evaluate.sampling_plan import sample_gpu_seconds
from opsd_sweep.inference.equivalence_plan import margin_shown, samples_needed
from opsd_sweep.run.identity import evaluator_identity
from opsd_sweep.run.rundir import atomic_write_json
from tests.evaluate.conftest import evaluate_cli
from tests.inference.test_equivalence_plan import RATES, simulated_power, world_noise

TOKENS = 18_000  # every pilot sample's length: the published mean, round


def write_evaluation(eval_dir: Path, outcomes: np.ndarray, kv_cache: str = "auto", n_tokens: int | None = TOKENS,
                     seed: int = 1) -> Path:
    """An eval.json of one checkpoint (the base model, vLLM) whose sample s of problem i is correct when
    outcomes[i, s]; returns its dir."""
    problems = [{"id": f"p{i}", "answer": "7",
                 "samples": [{"pred": "7" if hit else "8", "correct": bool(hit), "formatted": True,
                              "finish_reason": "stop", **({"n_tokens": n_tokens} if n_tokens else {})}
                             for hit in row]} for i, row in enumerate(outcomes)]
    metrics = compute_metrics([{**p, "samples": [{"n_tokens": 0, **s} for s in p["samples"]]} for p in problems])
    atomic_write_json(eval_dir / "eval.json", {
        "dataset": "aime24", "n_problems": len(problems), "n_samples": outcomes.shape[1], "model": "qwen3-1.7b",
        "checkpoint": None, "backend": "vllm", "seed": seed, "problems": problems, "metrics": metrics,
        "sampling": {"temperature": 0.6, "top_p": 0.95, "top_k": 20, "max_tokens": 38_912, "thinking": True},
        "evaluator": evaluator_identity("vllm", None, False, kv_cache)})
    return eval_dir


def world_pilot(tmp_path: Path, samples: int, copy: float, seed: int) -> tuple[Path, Path]:
    """Pilots A (bf16 KV) and B (fp8 KV) drawn once from the RATES world: B's sample s is A's with probability
    `copy` (the shared seed), else its own draw; B has no effect."""
    rng = np.random.default_rng(seed)
    a = rng.random((RATES.size, samples)) < RATES[:, None]
    own = rng.random((RATES.size, samples)) < RATES[:, None]
    b = np.where(rng.random((RATES.size, samples)) < copy, a, own)
    return (write_evaluation(tmp_path / "exact" / "pilot", a),
            write_evaluation(tmp_path / "fp8" / "pilot", b, kv_cache="fp8"))


@pytest.fixture
def pilots(tmp_path) -> tuple[Path, Path]:
    return world_pilot(tmp_path, samples=4, copy=0.0, seed=7)


def test_the_plan_from_pilot_evaluations_has_its_power_in_a_monte_carlo(tmp_path):
    """A pilot of 48 samples a problem estimates the world's noise to a few percent; the K planned from the two
    eval.json files reaches power ~0.8 when TOST is simulated at K in that world."""
    a, b = world_pilot(tmp_path, samples=48, copy=0.3, seed=11)
    planned = plan(a, b, margin=3.0, level=0.95, power=0.8)
    truth = world_noise(RATES, copy=0.3)
    assert planned.noise.per_sample_var == pytest.approx(truth.per_sample_var, rel=0.1)
    assert planned.k == pytest.approx(samples_needed(truth, 3.0), rel=0.15)
    reps = 6000
    power = simulated_power(RATES, 0.3, planned.k, 3.0, 0.95, reps, seed=12)
    assert abs(power - 0.8) < 3 * math.sqrt(0.16 / reps) + 0.04, (planned.k, power)  # + the pilot's own error


def test_plan_prints_size_and_gpu_minutes_per_arm_naming_the_length_model(pilots, capsys):
    a, b = pilots
    main(["--plan", str(a), str(b), "--margin", "3"])
    line = capsys.readouterr().out.strip()
    planned = plan(a, b, margin=3.0)
    k = planned.k
    per_a = k * RATES.size * float(sample_gpu_seconds(TOKENS)) / 60
    per_b = k * RATES.size * float(sample_gpu_seconds(TOKENS, kv_factor=0.5)) / 60
    assert planned.gpu_min(planned.cost_a) == pytest.approx(per_a)
    assert planned.gpu_min(planned.cost_b) == pytest.approx(per_b) and 0.5 < per_b / per_a < 0.7  # fp8 halves the KV part
    assert line == planned.line()
    assert line.startswith("[compare] plan: equivalence within ±3 at 95% with power 0.8 if B has no effect "
                           "(the pilot: 120 paired samples over 30 problems;")
    assert f"needs K = {k} samples a problem per arm ({k / 12:.1f} evals of 12) on 30 problems" in line
    assert f"A {per_a:,.1f} + B {per_b:,.1f} = {per_a + per_b:,.1f} GPU-min" in line
    assert "length model: the pilot's own lengths, mean tokens a sample A 18,000, B 18,000 (fp8 KV)" in line
    assert f"evaluate both again with eval.n_samples={k} seed=1" in line


def test_a_plan_over_the_budget_is_refused_naming_budget_cost_and_the_margin_it_can_show(pilots, capsys):
    a, b = pilots
    planned = plan(a, b, margin=1.0, budget_gpu_min=600)
    affordable = planned.affordable_k
    assert 1 <= affordable < planned.k
    shown = margin_shown(planned.noise, affordable)
    assert samples_needed(planned.noise, round(shown, 2) + 0.01) <= affordable < samples_needed(planned.noise, shown - 0.01)
    with pytest.raises(SystemExit) as refused:
        main(["--plan", str(a), str(b), "--margin", "1", "--budget-gpu-min", "600"])
    message = str(refused.value.code)
    assert message == (f"[compare] plan refused: the plan costs {planned.total_gpu_min:,.0f} GPU-min, over "
                       f"--budget-gpu-min 600; that budget buys K = {affordable} samples a problem per arm, which "
                       f"shows ±{shown:.2f} at the same level and power: pass that --margin, or a budget of at least "
                       f"{planned.total_gpu_min:,.0f}")
    assert capsys.readouterr().out.strip() == planned.line()  # the plan is printed before the refusal
    within = plan(a, b, margin=1.0, budget_gpu_min=planned.total_gpu_min + 1)
    assert within.refusal is None


def test_the_cli_exits_1_on_a_refused_plan_and_0_on_one_within_budget(pilots):
    a, b = pilots
    over = evaluate_cli(["compare", "--plan", str(a), str(b), "--margin", "1", "--budget-gpu-min", "10"])
    out, _ = over.communicate(timeout=120)
    assert over.returncode == 1 and "over --budget-gpu-min 10;" in out and "Traceback" not in out
    fine = evaluate_cli(["compare", "--plan", str(a), str(b), "--margin", "3", "--budget-gpu-min", "1e6"])
    out, _ = fine.communicate(timeout=120)
    assert fine.returncode == 0 and "[compare] plan: equivalence within ±3" in out


def test_an_inconclusive_compare_is_followed_by_its_plan(pilots, capsys):
    a, b = pilots
    main([str(a), str(b), "--margin", "1"])
    lines = capsys.readouterr().out.splitlines()
    record = compare(a, b, margin=1.0)
    assert record["verdict"] == "inconclusive"  # 4 samples a problem cannot show +-1
    assert record["plan"]["samples_per_problem"] == plan(a, b, margin=1.0).k
    assert lines == [record["line"], record["plan"]["line"]]


def test_an_equivalent_compare_carries_no_plan(tmp_path):
    outcomes = np.tile(RATES[:, None] > 0.5, (1, 4))
    a = write_evaluation(tmp_path / "exact" / "same", outcomes)
    b = write_evaluation(tmp_path / "fp8" / "same", outcomes, kv_cache="fp8")
    assert "plan" not in compare(a, b, margin=1.0)


def test_a_pilot_without_token_counts_is_planned_but_not_priced_and_a_budget_refuses_it(tmp_path):
    rng = np.random.default_rng(3)
    a = write_evaluation(tmp_path / "exact" / "old", rng.random((30, 4)) < RATES[:, None], n_tokens=None)
    b = write_evaluation(tmp_path / "fp8" / "old", rng.random((30, 4)) < RATES[:, None], n_tokens=None)
    planned = plan(a, b, margin=3.0)
    assert planned.k and planned.refusal is None and "GPU-minutes unknown (a pilot recorded no token counts)" in planned.line()
    priced = plan(a, b, margin=3.0, budget_gpu_min=100)
    assert priced.refusal.startswith("--budget-gpu-min 100: the plan cannot be priced")


@pytest.mark.parametrize("flags, named", [
    (["--margin", "0"], "margin=0.0: the equivalence margin must be > 0 points (e.g. --margin 1)"),
    (["--margin", "-2"], "margin=-2.0"),
    (["--level", "1.2"], "level=1.2: the interval's coverage must be in (0.5, 1) (e.g. --level 0.95"),
    (["--level", "0"], "level=0.0"),
    (["--power", "1"], "power=1.0: the power to show equivalence must be in (0, 1) (e.g. --power 0.8)"),
    (["--budget-gpu-min", "0"], "--budget-gpu-min 0.0: a budget is > 0 GPU-minutes for both arms together"),
])
@pytest.mark.parametrize("mode", [["--plan"], []])
def test_bad_input_is_refused_naming_the_value_and_the_fix(pilots, flags, named, mode):
    a, b = pilots
    with pytest.raises(SystemExit) as refused:
        main([*mode, str(a), str(b), *flags])
    assert named in str(refused.value.code)
    assert not list(b.glob("compare_*.json"))  # nothing written
