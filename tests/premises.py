"""Premises built, not drawn. The tiny world trains on CPU, and the floating-point kernels differ between CPUs
(AVX-512, AVX2 or none: `ATEN_CPU_CAPABILITY`), so what a tiny run learns or draws is a fact about the CPU it ran
on: a test whose premise is such an outcome (a pilot that solved some problems and not others, a run that
collapsed) tests the CPU. These helpers write the outcome a test needs into a real run dir, by construction,
and the product then reads it as it reads any run dir.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path

from opsd_sweep.config import load_run_config
from opsd_sweep.cycle import locate_run
from opsd_sweep.scoring.metrics import score_fields
from opsd_sweep.run.rundir import RunDir, atomic_write_json, atomic_write_text
from tests.conftest import compose


# --- fixed outcomes of an evaluation --------------------------------------------------------------

def fix_outcomes(eval_json: Path, solved: Sequence[int], n_tokens: int = 18) -> dict:
    """Rewrite an eval.json's per-sample records (and its completions.jsonl) so that problem i is solved in its
    first solved[i] samples and missed in the rest, every sample formatted, `n_tokens` long and stopped at EOS;
    its metrics are recomputed from them (the evaluator's score_fields). Returns the new eval.json."""
    evaluation = json.loads(eval_json.read_text())
    problems = evaluation["problems"]
    if len(solved) != len(problems):
        raise ValueError(f"{len(solved)} solved counts for the {len(problems)} problems of {eval_json}")
    texts = []
    for problem, hits in zip(problems, solved, strict=True):
        if not 0 <= hits <= len(problem["samples"]):
            raise ValueError(f"problem {problem['id']}: {hits} solved of {len(problem['samples'])} samples")
        answer = str(problem["answer"])
        problem["samples"] = [{"pred": answer if s < hits else answer + "1", "correct": s < hits, "formatted": True,
                               "n_tokens": n_tokens, "finish_reason": "stop"} for s in range(len(problem["samples"]))]
        texts += [json.dumps({"id": problem["id"], "sample": s, "text": f"\\boxed{{{sample['pred']}}}"}) + "\n"
                  for s, sample in enumerate(problem["samples"])]
    evaluation |= score_fields(problems, suite="benchmarks" in evaluation)
    atomic_write_text(eval_json.parent / "completions.jsonl", "".join(texts))
    atomic_write_json(eval_json, evaluation)
    return evaluation


# --- an early band of the collapse rule -----------------------------------------------------------

def run_dir_of(overrides: Sequence[str], results: Path, cache: Path) -> Path:
    """Where `python -m opsd_sweep OVERRIDES` (one job, results and cache as run_sweep sets them) puts its run."""
    run = load_run_config(compose([*overrides, f"results_root={results}", f"cache_dir={cache}"]))
    return locate_run(run)[1].path


def start_at_band(run_dir: Path, donor: Path, **band: float) -> int:
    """Make `run_dir` a run that stopped after its first k steps and resumes there, its early steps built.

    `donor` is a finished run dir of the same model, LoRA setup and learning rate (its optimizer and scheduler
    state hold the learning rate) whose final checkpoint is of step k: that checkpoint (adapter, optimizer,
    scheduler, RNG) becomes run_dir's train/checkpoint-k, and the donor's metrics lines 1..k, with the fields of
    `band` replaced, run_dir's metrics.jsonl: what the collapse rule reads as the run's early steps
    (train.collapse.early_steps). Every step the cycle trains from there on is real; only the band they are
    judged against is built: a band none of them can be in (e.g. a rollout_len no completion can have) makes
    the collapse certain, one that holds every value a step can log makes it impossible. Returns k."""
    source, target = RunDir(donor), RunDir(run_dir)
    checkpoint = source.latest_checkpoint()
    step = json.loads((checkpoint / "trainer_state.json").read_text())["step"]
    lines = [line | band for line in source.training_steps() if line["step"] <= step]
    if [line["step"] for line in lines] != list(range(1, step + 1)):
        raise ValueError(f"{donor} logged steps {[line['step'] for line in lines]}, not 1..{step}")
    shutil.copytree(checkpoint, target.checkpoint(step))
    atomic_write_text(target.metrics, "".join(json.dumps(line) + "\n" for line in lines))
    return step
