"""Simulated runs: a run dir with a synthetic eval.json and metrics.jsonl, drawn from a declared noise model.

Used to test orchestration and statistics at scale (thousands of runs in seconds) and for the racing
benchmark. The model (values in conf/simulate/, schema `SimulateConfig`):

- true score of a config (avg@n, percent) = base_score - lr_curvature * log10(learning_rate / lr_peak)^2
  + the points of every `offsets` entry whose knob matches the run's config;
- one training run = true score + N(0, train_seed_sd) points (the training-seed effect);
- problem i has a fixed difficulty d_i ~ N(0, difficulty_sd) logits, shared by every config; the run's
  per-problem solve rate is sigmoid(shift - d_i), the shift chosen so the rates average to the run's score;
- each problem gets K = eval.n_samples Bernoulli samples: the eval-sampling noise.

Everything a simulated run writes says so: status.json and eval.json carry "simulated": true.
"""

from __future__ import annotations

import json
import math
import time

import numpy as np

from opsd_sweep.config import RunConfig, SimulateConfig, get_dotted
from opsd_sweep.run.keys import semantic_dict
from opsd_sweep.evaluate.metrics import compute_metrics
from opsd_sweep.run.keys import run_key
from opsd_sweep.run.rundir import RunDir, atomic_write_json, atomic_write_text, utc_now

# Per-problem solve rates are kept inside (0, 1) so that every problem can be both solved and missed.
_SHIFT_GRID = np.linspace(-30.0, 30.0, 1201)


# --- the noise model (pure, vectorised: the benchmark draws thousands of runs at once) -----------

def true_score(sim: SimulateConfig, run: RunConfig) -> float:
    """The config's true avg@n in percent: the response to its knobs (seed plays no part)."""
    score = sim.base_score - sim.lr_curvature * math.log10(run.learning_rate / sim.lr_peak) ** 2
    for offset in sim.offsets:
        if _knob_matches(get_dotted(run, offset.key), offset.value):
            score += offset.points
    return score


def _knob_matches(actual, wanted) -> bool:
    numbers = (int, float)
    if isinstance(actual, numbers) and isinstance(wanted, numbers) and not isinstance(actual, bool):
        return math.isclose(actual, wanted, rel_tol=1e-9)
    return actual == wanted


def problem_difficulties(sim: SimulateConfig) -> np.ndarray:
    """Difficulty logits [n_problems], fixed by problem_seed: the same benchmark for every config."""
    return np.random.default_rng(sim.problem_seed).normal(0.0, sim.difficulty_sd, sim.n_problems)


def solve_rates(run_scores: np.ndarray, difficulties: np.ndarray) -> np.ndarray:
    """Per-problem solve probabilities [runs, problems] whose mean over problems is each run's score / 100.

    The mean rate is monotone in the shift, so the shift is read off a fine grid by interpolation.
    """
    mean_rate = _sigmoid(_SHIFT_GRID[:, None] - difficulties[None, :]).mean(1)
    target = np.clip(np.asarray(run_scores, dtype=float) / 100.0, mean_rate[0], mean_rate[-1])
    shift = np.interp(target, mean_rate, _SHIFT_GRID)
    return _sigmoid(shift[..., None] - difficulties)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def draw_run_rates(true_scores: np.ndarray, sim: SimulateConfig, rng: np.random.Generator) -> np.ndarray:
    """Per-problem solve rates [..., problems] of training runs of configs with true scores [...]."""
    true_scores = np.asarray(true_scores, dtype=float)
    run_scores = true_scores + rng.normal(0.0, sim.train_seed_sd, true_scores.shape)
    return solve_rates(run_scores, problem_difficulties(sim))


def draw_correct_counts(true_scores: np.ndarray, sim: SimulateConfig, n_samples: int,
                        rng: np.random.Generator) -> np.ndarray:
    """Correct-sample counts [..., problems] of runs with n_samples samples per problem."""
    return rng.binomial(n_samples, draw_run_rates(true_scores, sim, rng))


# --- one simulated run dir -----------------------------------------------------------------------

def simulate_cycle(run: RunConfig, run_dir: RunDir) -> dict:
    """The cycle of executor=simulate on a claimed run: write the run dir, mark it done and simulated.

    GPU-hours are the declared simulate.gpu_hours_per_run, so budgets can be exercised in simulation.
    """
    started = time.monotonic()
    result = simulate_run(run, run_dir)
    run_dir.update_status(state="done", ended_at=utc_now(), simulated=True, gpus=[],
                          phase_seconds={"simulate": round(time.monotonic() - started, 4)},
                          gpu_hours=run.simulate.gpu_hours_per_run)
    print(f"[opsd_sweep] done {run_dir.path.name} (simulated): avg@{run.eval.n_samples} "
          f"{result['metrics']['avg_at_n']:.2f}", flush=True)
    return {"state": "done", "simulated": True}


def simulate_run(run: RunConfig, run_dir: RunDir) -> dict:
    """Write train/metrics.jsonl and eval/eval.json for one simulated run; return the eval.json dict.

    The draw is a pure function of the run's semantic config, so a rerun of the same run writes the same
    numbers. Hub ids and tiny-world paths are left out of it (the noise model reads none of them); a local
    file or directory enters by its content, so a run of an input edited in place is another draw, as a
    real run of other data would be.
    """
    sim = run.simulate
    semantic = semantic_dict(run)
    for section in ("model", "data", "eval"):
        if not semantic[section]["path"].startswith(("file:", "dir:")):
            semantic[section].pop("path")
    rng = np.random.default_rng([sim.noise_seed, int(run_key(semantic), 16)])
    true = true_score(sim, run)
    rates = draw_run_rates(np.array([true]), sim, rng)[0]
    correct = rng.random((sim.n_problems, run.eval.n_samples)) < rates[:, None]
    _write_metrics(run, run_dir, true, rng)
    result = _eval_record(run, correct, rng)
    atomic_write_json(run_dir.eval_json, result)
    return result


def _write_metrics(run: RunConfig, run_dir: RunDir, true: float, rng: np.random.Generator) -> None:
    """One line per step; kl_true decays toward a floor that is lower for better configs."""
    steps = np.arange(1, run.train.max_steps + 1)
    floor = max(0.05, 0.5 - 0.01 * (true - run.simulate.base_score))
    kl = floor + (1.0 - floor) * np.exp(-steps / max(1.0, run.train.max_steps / 4))
    kl = kl * np.exp(rng.normal(0.0, 0.05, steps.shape))
    lines = [{"step": int(s), "loss": float(v), "kl_true": float(v), "grad_norm": float(2.0 * v),
              "lr": run.learning_rate, "rollout_len": 512.0, "tokens_per_s": 0.0, "step_seconds": 0.0}
             for s, v in zip(steps, kl)]
    atomic_write_text(run_dir.metrics, "".join(json.dumps(line) + "\n" for line in lines))


def _eval_record(run: RunConfig, correct: np.ndarray, rng: np.random.Generator) -> dict:
    """eval.json with the real evaluator's schema; a wrong sample predicts a wrong number."""
    e = run.eval
    problems = []
    for i, row in enumerate(correct):
        answer = str(i)
        problems.append({"id": f"sim-{i:03d}", "answer": answer, "samples": [
            {"pred": answer if ok else str(i + 1 + int(rng.integers(0, 9))), "correct": bool(ok),
             "formatted": True, "n_tokens": int(rng.integers(200, 2000)), "finish_reason": "stop"} for ok in row]})
    return {"dataset": e.name, "n_problems": len(problems), "n_samples": e.n_samples,
            "sampling": {"temperature": e.temperature, "top_p": e.top_p, "top_k": e.top_k,
                         "max_tokens": e.max_new_tokens, "thinking": e.thinking},
            "model": run.model.name, "checkpoint": None, "backend": "simulate", "seed": run.seed,
            "created_at": utc_now(), "simulated": True, "metrics": compute_metrics(problems), "problems": problems}
