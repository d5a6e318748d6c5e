"""Standalone evaluation of any model or checkpoint, without training: a Hydra app over the same conf/.

    python -m opsd_sweep.evaluate model=qwen3-1.7b eval=aime24 eval.n_samples=12 group=anchor
    python -m opsd_sweep.evaluate eval.checkpoint=/path/to/checkpoint-100 eval.backend=vllm
    python -m opsd_sweep.evaluate -m seed=1,2,3 group=anchor        # three evaluation seeds

Each evaluation is a run directory <results_root>/<group>/eval-<model>-<checkpoint>-s<seed>-<key8>/
with config.yaml, status.json (kind: eval_only) and eval/eval.json, so the analysis reads it like a
run (e.g. as the published anchor). Its key hashes model, eval settings and seed: the same command
resumes or skips a finished evaluation (force=true redoes it).
"""

from __future__ import annotations

import re
import shutil
import traceback
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from opsd_sweep import CONF_DIR
from opsd_sweep.cli import exit_unless_finished, refuse_config
from opsd_sweep.config import ConfigError, RunConfig, load_run_config, to_dict
from opsd_sweep.evaluate.evaluator import evaluate, resolve_weights, summary_line
from opsd_sweep.evaluate.sampling_plan import ensure_plan, plan_path
from opsd_sweep.interrupt import signals_raise
from opsd_sweep.preflight import preflight_problems
from opsd_sweep.run.claims import RunClaimedError, claim_run, release_run
from opsd_sweep.run.keys import EVAL_ONLY, eval_inputs, eval_key
from opsd_sweep.run.record import RunRecord, UnreadableRun
from opsd_sweep.run.rundir import RunDir, atomic_write_text, utc_now
from opsd_sweep.run.takeover import Location, locate_dir, take_over_earlier
from opsd_sweep.tiny import ensure_tiny_assets, tiny_problems


def locate_eval(run: RunConfig) -> Location:
    """Where this evaluation lives (a dir written under an earlier key is taken over by
    evaluate_standalone: run/takeover.py); reads only."""
    checkpoint = Path(run.eval.checkpoint).name if run.eval.checkpoint else "base"
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", f"eval-{run.model.name}-{checkpoint}-s{run.seed}")
    return locate_dir(Path(run.results_root) / run.group, run, slug, eval_key, eval_inputs)



def locate_eval_dir(run: RunConfig) -> tuple[str, RunDir]:
    """This evaluation's key and the dir it runs in; reads only."""
    where = locate_eval(run)
    return where.key, where.run_dir


def load_eval_config(cfg: DictConfig) -> RunConfig:
    """load_run_config plus the tiny world's settings and the model and eval sources checked (preflight); one
    ConfigError lists all."""
    run = load_run_config(cfg, more_checks=(_one_checkpoint, _checkpoint_found, tiny_problems,
                                            lambda run: preflight_problems(run, train=False)))
    if run.eval.checkpoint:
        run.eval.checkpoint = str(Path(run.eval.checkpoint).expanduser().absolute())
    return run


def _one_checkpoint(run: RunConfig) -> list[str]:
    if run.eval.checkpoints == "race":
        return ["eval.checkpoints=race races the saved checkpoints of a training run (python -m opsd_sweep); a "
                "standalone evaluation scores one checkpoint with all eval.n_samples: drop eval.checkpoints=race"]
    return []


def _checkpoint_found(run: RunConfig) -> list[str]:
    """eval.checkpoint must be there and hold weights, before a run dir is made or a model loads."""
    if not run.eval.checkpoint:
        return []
    path = Path(run.eval.checkpoint).expanduser()
    if not path.is_dir():
        what = "is a file, not a directory" if path.exists() else "does not exist"
        return [f"eval.checkpoint={run.eval.checkpoint} {what}; point it at a saved checkpoint dir (a PEFT adapter "
                "with adapter_config.json or a model dir with config.json, e.g. <run dir>/train/checkpoint-100), "
                "or drop eval.checkpoint to evaluate the base model"]
    try:
        resolve_weights(run, path)
    except FileNotFoundError as err:  # a dir without weights: its message names both kinds
        return [f"eval.checkpoint: {err}"]
    return []


def finished_evaluation(run_dir: RunDir) -> dict | None:
    """The eval.json of a finished evaluation whose scores count today (run.record.RunRecord), else None."""
    try:
        record = RunRecord.read(run_dir)
    except (UnreadableRun, OSError):
        return None
    return record.evaluation if record.counts else None


def evaluate_standalone(run: RunConfig) -> dict:
    """Evaluate unless up to date; eval.json's dict. Ctrl-C / SIGTERM mark the evaluation interrupted (a rerun
    resumes its finished shards) and raise on: python -m opsd_sweep.evaluate exits 130 / 143, as a cycle does.
    A failure is recorded in status.json and raised."""
    with signals_raise():
        return _evaluate_standalone(run, locate_eval(run))[0]


def standalone_job(run: RunConfig) -> dict:
    """One job of python -m opsd_sweep.evaluate, answered as run_cycle answers a cycle (the launchers read both
    alike): key, run_dir, state 'done' | 'failed' | 'skipped' (reason 'done' or 'claimed', and the detail printed),
    avg_at_n of a scored evaluation, the error of a failed one. A failure is recorded and answered, not raised, as
    a cycle's: it stops no sweep."""
    with signals_raise():
        where = locate_eval(run)
        answer = {"key": where.key, "run_dir": str(where.run_dir.path)}
        try:
            result, skipped = _evaluate_standalone(run, where)
        except RunClaimedError as err:  # the same evaluation runs elsewhere now
            print(f"[evaluate] skip {where.run_dir.path.name}: {err}", flush=True)
            return answer | {"state": "skipped", "reason": "claimed", "detail": str(err)}
        except Exception as err:  # recorded as failed in status.json (_evaluate_standalone)
            traceback.print_exc()
            message = f"{type(err).__name__}: {err}"
            print(f"[evaluate] FAILED {where.run_dir.path.name}: {message}", flush=True)
            return answer | {"state": "failed", "error": message}
    score = {"avg_at_n": result["metrics"]["avg_at_n"]}
    if skipped:
        return answer | {"state": "skipped", "reason": "done", "detail": "already done"} | score
    return answer | {"state": "done"} | score


def _evaluate_standalone(run: RunConfig, where: Location) -> tuple[dict, bool]:
    """(eval.json's dict, whether it was finished before and so skipped)."""
    key, run_dir = where.key, take_over_earlier(where)
    claim = claim_run(run_dir)  # raises RunClaimedError when the same evaluation runs elsewhere now
    try:
        if not run.force and (finished := finished_evaluation(run_dir)) is not None:
            print(f"[evaluate] skip {run_dir.path.name}: already done, with today's scores (force=true evaluates "
                  "it again)", flush=True)
            print(summary_line(finished), flush=True)
            return finished, True
        if run.force:  # from scratch: no eval.json, no finished shards, no plan (only under the claim: never another's)
            shutil.rmtree(run_dir.eval_dir, ignore_errors=True)
            plan_path(run_dir).unlink(missing_ok=True)
        atomic_write_text(run_dir.config, OmegaConf.to_yaml(OmegaConf.create(to_dict(run))))
        run_dir.write_identity(key, where.inputs)
        run_dir.update_status(key=key, kind=EVAL_ONLY, state="evaluating", started_at=utc_now(), ended_at=None,
                              error=None, host=claim.owner["host"], pid=claim.owner["pid"], job_id=claim.owner["job_id"])
        print(f"[evaluate] {run.model.name} ({run.eval.checkpoint or 'base model'}) on {run.eval.name} "
              f"-> {run_dir.path}", flush=True)
        checkpoint = Path(run.eval.checkpoint) if run.eval.checkpoint else None
        try:
            # eval.n_samples=auto / eval.allocation=neyman: planned from the group's other finished evaluations
            result = evaluate(run, checkpoint, run_dir.eval_dir, sampling=ensure_plan(run, run_dir))
        except KeyboardInterrupt as err:
            run_dir.update_status(state="interrupted", ended_at=utc_now(),
                                  error={"message": f"{err or 'interrupted by SIGINT'} while evaluating; run the "
                                                    "same command again to resume", "log": None})
            raise
        except Exception as err:
            run_dir.update_status(state="failed", ended_at=utc_now(), error={"message": repr(err)})
            raise
        run_dir.update_status(state="done", ended_at=utc_now())
    finally:
        release_run(claim)
    print(summary_line(result), flush=True)
    return result, False


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="evaluate")  # = config + its --help
def main(cfg: DictConfig) -> dict:
    try:
        run = load_eval_config(cfg)  # a bad config fails here, before any model is loaded
    except ConfigError as err:
        refuse_config(err, cfg)
    if run.tiny is not None:
        ensure_tiny_assets(run.tiny)
    return exit_unless_finished(standalone_job(run))  # a single evaluation that did not finish exits 1
