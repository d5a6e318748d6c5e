"""Simulated runs: a run dir with a synthetic eval.json and metrics.jsonl, drawn from a declared noise model.

Used to test orchestration and statistics at scale (thousands of runs in seconds) and for the racing
benchmark. The model (values in conf/simulate/, schema `SimulateConfig`):

- true score of a config (avg@n, percent) = base_score - lr_curvature * log10(learning_rate / lr_peak)^2
  + the points of every `offsets` entry whose knob matches the run's config;
- one training run = true score + N(0, train_seed_sd) points (the training-seed effect);
- problem i has a fixed difficulty d_i ~ N(0, difficulty_sd) logits, shared by every config; the run's
  per-problem solve rate is sigmoid(shift - d_i), the shift chosen so the rates average to the run's score;
- each problem gets K = eval.n_samples Bernoulli samples (the eval-sampling noise), or the count its
  sampling plan gives it (eval.n_samples=auto, eval.allocation=neyman: evaluate/sampling_plan.py);
- a sample's n_tokens is lognormal around a share of eval.max_new_tokens, longer when it is wrong (wrong
  answers run on, some to the cap: finish_reason "length"), so an allocation's costs behave as on AIME;
- GPU-hours: the declared simulate.gpu_hours_per_run, or with simulate.train_gpu_hours set, that for the
  training phase and the eval step model's cost of the run's own samples for the eval phase (per phase, as
  eval.n_samples=auto reads them from the sweep's runs).

Everything a simulated run writes says so: status.json and eval.json carry "simulated": true.
"""

from __future__ import annotations

import json
import math
import time

import numpy as np

from opsd_sweep.config import RunConfig, SimulateConfig, get_dotted
from opsd_sweep.run.keys import semantic_dict
from opsd_sweep.scoring.metrics import compute_metrics
from opsd_sweep.evaluate.sampling_plan import SamplingPlan, ensure_plan, sample_gpu_seconds
from opsd_sweep.run.keys import run_key
from opsd_sweep.run.rundir import RunDir, atomic_write_json, atomic_write_text, utc_now

# Per-problem solve rates are kept inside (0, 1) so that every problem can be both solved and missed.
_SHIFT_GRID = np.linspace(-30.0, 30.0, 1201)
# Sample lengths as a share of eval.max_new_tokens (mean), lognormal with this SD of the log: at AIME24's 38,912
# tokens ~13.6k for a right answer and ~23k for a wrong one (wrong answers are the longest, some hit the cap).
CORRECT_LENGTH, WRONG_LENGTH, LENGTH_SIGMA = 0.35, 0.6, 0.3


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

    GPU-hours are the declared simulate.gpu_hours_per_run, so budgets can be exercised in simulation; with
    simulate.train_gpu_hours set, per phase (simulated_gpu_hours).
    """
    started = time.monotonic()
    result = simulate_run(run, run_dir)
    run_dir.update_status(state="done", ended_at=utc_now(), simulated=True, gpus=[],
                          phase_seconds={"simulate": round(time.monotonic() - started, 4)},
                          gpu_hours=simulated_gpu_hours(run.simulate, result))
    print(f"[opsd_sweep] done {run_dir.path.name} (simulated): avg@{result['n_samples']} "
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
    plan = ensure_plan(run, run_dir)
    counts = plan.samples_of(problem_ids(sim))
    correct = rng.random((sim.n_problems, max(counts))) < rates[:, None]
    _write_metrics(run, run_dir, true, rng)
    result = _eval_record(run, [row[:n] for row, n in zip(correct, counts)], rng, plan)
    atomic_write_json(run_dir.eval_json, result)
    return result


def problem_ids(sim: SimulateConfig) -> list[str]:
    return [f"sim-{i:03d}" for i in range(sim.n_problems)]


def simulated_gpu_hours(sim: SimulateConfig, evaluation: dict) -> float | dict[str, float]:
    """status.json's gpu_hours of a simulated run: the declared total, or per phase when simulate.train_gpu_hours
    is set (the eval phase's from its samples' tokens by the eval step model)."""
    if sim.train_gpu_hours is None:
        return sim.gpu_hours_per_run
    tokens = [s["n_tokens"] for p in evaluation["problems"] for s in p["samples"]]
    return {"train": sim.train_gpu_hours, "evaluate": round(float(sample_gpu_seconds(tokens).sum()) / 3600, 6)}


def sample_length(correct: bool, max_new_tokens: int, rng: np.random.Generator) -> int:
    """A simulated sample's n_tokens (see CORRECT_LENGTH): >= 1, at most max_new_tokens (the cap)."""
    mean = (CORRECT_LENGTH if correct else WRONG_LENGTH) * max_new_tokens
    return int(min(max_new_tokens, max(1, round(mean * math.exp(rng.normal(-LENGTH_SIGMA**2 / 2, LENGTH_SIGMA))))))


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


def _eval_record(run: RunConfig, correct: list[np.ndarray], rng: np.random.Generator, plan: SamplingPlan) -> dict:
    """eval.json with the real evaluator's schema (and its sampling plan's records); a wrong sample predicts a
    wrong number and runs longer."""
    e = run.eval
    problems = []
    for i, (problem_id, row) in enumerate(zip(problem_ids(run.simulate), correct)):
        answer = str(i)
        samples = []
        for ok in row:
            n_tokens = sample_length(bool(ok), e.max_new_tokens, rng)
            samples.append({"pred": answer if ok else str(i + 1 + int(rng.integers(0, 9))), "correct": bool(ok),
                            "formatted": True, "n_tokens": n_tokens,
                            "finish_reason": "length" if n_tokens >= e.max_new_tokens else "stop"})
        problems.append({"id": problem_id, "answer": answer, "samples": samples})
    allocated = {"samples_per_problem": {p["id"]: len(p["samples"]) for p in problems}} if plan.counts else {}
    return {"dataset": e.name, "n_problems": len(problems), "n_samples": plan.k, **plan.eval_record(), **allocated,
            "sampling": {"temperature": e.temperature, "top_p": e.top_p, "top_k": e.top_k,
                         "max_tokens": e.max_new_tokens, "thinking": e.thinking},
            "model": run.model.name, "checkpoint": None, "backend": "simulate", "seed": run.seed,
            "created_at": utc_now(), "simulated": True, "metrics": compute_metrics(problems), "problems": problems}
