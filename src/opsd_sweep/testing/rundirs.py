"""Hand-built run dirs per the run-dir contract (config.yaml, status.json, train/metrics.jsonl, eval/eval.json),
for the summary's tests and bench_read_results.

Configs come from the real conf/ (composed and validated), eval.json metrics from the real evaluator's
`compute_metrics`, so the analysis reads exactly what a sweep writes. Correctness is drawn from a
known model: problem difficulty (logit) + a run-wide shift, binomial over K samples.
"""

from __future__ import annotations

import dataclasses
import json
from functools import lru_cache
from pathlib import Path

import numpy as np
from omegaconf import OmegaConf

from opsd_sweep.config import RunConfig, to_dict
from opsd_sweep.scoring.grade import grader_identity
from opsd_sweep.run.keys import run_key, run_slug, semantic_dict
from opsd_sweep.run.rundir import RunDir, atomic_write_json, atomic_write_text
from opsd_sweep.scoring.metrics import compute_metrics
from opsd_sweep.testing.run_config import composed_run_config


@lru_cache(maxsize=1)
def base_run() -> RunConfig:
    """The default run config (conf/ with no overrides)."""
    return composed_run_config([])


def draw_correct(rng: np.random.Generator, difficulty: np.ndarray, shift: float, k: int) -> np.ndarray:
    """(n_problems, k) bools: P(correct) = sigmoid(difficulty_i + shift)."""
    p = 1 / (1 + np.exp(-(difficulty + shift)))
    return rng.random((difficulty.size, k)) < p[:, None]


def eval_record(correct: np.ndarray, rng: np.random.Generator) -> dict:
    """An eval.json dict for a (n_problems, k) correctness array, metrics by the real evaluator code."""
    problems = []
    for i, row in enumerate(correct):
        samples = [{"pred": "7" if c else str(rng.integers(0, 5)), "correct": bool(c), "formatted": True,
                    "n_tokens": int(rng.integers(100, 400)), "finish_reason": "stop"} for c in row]
        problems.append({"id": f"p{i:02d}", "answer": "7", "samples": samples})
    return {"dataset": "aime24", "n_problems": len(problems), "n_samples": correct.shape[1], "sampling": {},
            "checkpoint": "train/checkpoint-20", "backend": "hf", "metrics": compute_metrics(problems),
            "evaluator": {"grader": grader_identity()},  # graded by today's grader, as a sweep's eval.json records
            "problems": problems}


def write_run(group_dir: Path, *, learning_rate: float, seed: int, correct: np.ndarray | None,
              state: str = "done", steps: int = 20, kl_final: float = 0.1, simulated: bool = False,
              rng: np.random.Generator | None = None, **fields) -> RunDir:
    """A complete (or, with state/correct, partial) run dir; returns it."""
    rng = rng or np.random.default_rng(seed)
    run = dataclasses.replace(base_run(), learning_rate=learning_rate, seed=seed,
                              executor="simulate" if simulated else "real", **fields)
    if correct is not None and "eval" not in fields:  # an eval.json of K samples is eval.n_samples=K's
        run = dataclasses.replace(run, eval=dataclasses.replace(run.eval, n_samples=int(correct.shape[1])))
    key = run_key(semantic_dict(run))
    run_dir = RunDir(group_dir / f"{run_slug(run.learning_rate, run.clip, run.loss_top_k, seed)}-{key[:8]}")
    atomic_write_text(run_dir.config, OmegaConf.to_yaml(OmegaConf.create(to_dict(run))))
    status = {"key": key, "state": state, "attempts": 1, "phase_seconds": {"train": 3600.0, "evaluate": 900.0},
              "gpu_hours": {"train": 4.0, "evaluate": 1.0}}
    if simulated:
        status["simulated"] = True
    atomic_write_json(run_dir.status, status)
    lines = [{"step": s, "loss": 1.0 / s, "kl_true": kl_final * (1 + (steps - s) / steps), "grad_norm": 0.5,
              "lr": learning_rate, "rollout_len": 300.0} for s in range(1, steps + 1)]
    run_dir.metrics.parent.mkdir(parents=True, exist_ok=True)
    run_dir.metrics.write_text("".join(json.dumps(line) + "\n" for line in lines))
    if correct is not None:
        atomic_write_json(run_dir.eval_json, eval_record(correct, rng))
    return run_dir
