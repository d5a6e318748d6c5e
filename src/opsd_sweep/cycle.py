"""One cycle: claim the run -> write its config -> train phase -> eval phase -> final status.

Each phase is a subprocess on the run dir with an explicit GPU set, so a crash, OOM or hang in a
phase never takes the orchestrator down; a failed run is recorded in status.json, never raised.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import traceback
from pathlib import Path

from omegaconf import OmegaConf

from opsd_sweep.config import RunConfig, semantic_dict, to_dict
from opsd_sweep.runs import (RunClaimedError, RunDir, atomic_write_text, claim_run, find_run_dir,
                             release_run, run_key, run_slug, utc_now)


class PhaseFailed(RuntimeError):
    def __init__(self, phase: str, returncode: int, log: Path):
        super().__init__(f"{phase} phase exited with code {returncode}; see {log}")
        self.log = log


def locate_run(run: RunConfig) -> tuple[str, RunDir]:
    key = run_key(semantic_dict(run))
    slug = run_slug(run.learning_rate, run.clip, run.loss_top_k, run.seed)
    return key, find_run_dir(Path(run.results_root) / run.group, key, slug)


def visible_gpus() -> list[str]:
    """The GPU ids this process may use, as the launcher set them (empty on CPU)."""
    value = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    return [g for g in value.split(",") if g.strip() != ""]


def run_cycle(run: RunConfig) -> dict:
    """Run one train-then-eval cycle unless it is done (or claimed by a live process).

    Returns a small dict: key, run_dir, state ('done' | 'failed' | 'skipped'), and the metric.
    """
    key, run_dir = locate_run(run)
    previous = run_dir.read_status()
    if previous.get("state") == "done" and not run.force:
        print(f"[opsd_sweep] skip {run_dir.path.name}: already done", flush=True)
        return {"key": key, "run_dir": str(run_dir.path), "state": "skipped", "reason": "done"}
    if previous.get("state") == "failed" and not (run.rerun_failed or run.force):
        print(f"[opsd_sweep] skip {run_dir.path.name}: failed before (rerun_failed=true retries it)", flush=True)
        return {"key": key, "run_dir": str(run_dir.path), "state": "skipped", "reason": "failed"}
    try:
        owner = claim_run(run_dir)
    except RunClaimedError as err:
        print(f"[opsd_sweep] skip {run_dir.path.name}: {err}", flush=True)
        return {"key": key, "run_dir": str(run_dir.path), "state": "skipped", "reason": "claimed"}
    try:
        return _run_claimed(run, key, run_dir, previous, owner)
    finally:
        release_run(run_dir)


def _run_claimed(run: RunConfig, key: str, run_dir: RunDir, previous: dict, owner: dict) -> dict:
    if run.force and previous.get("state") == "done":
        run_dir.eval_json.unlink(missing_ok=True)
    atomic_write_text(run_dir.config, OmegaConf.to_yaml(OmegaConf.create(to_dict(run))))
    gpus = visible_gpus()
    t = run.train
    print(f"[opsd_sweep] run {run_dir.path.name}: {max(t.num_gpus, 1)} x {t.per_device_batch_size} x "
          f"{t.grad_accum_steps} = {t.global_batch_size} prompts/step, {t.max_steps} steps, "
          f"GPUs {gpus or 'none (CPU)'}", flush=True)
    run_dir.update_status(key=key, state="pending", attempts=previous.get("attempts", 0) + 1,
                          host=socket.gethostname(), pid=os.getpid(), job_id=owner.get("job_id"),
                          gpus=gpus, started_at=utc_now(), ended_at=None, error=None,
                          phase_seconds=previous.get("phase_seconds", {}), gpu_hours={})
    phase_seconds: dict[str, float] = {}
    try:
        for phase, state in (("train", "training"), ("evaluate", "evaluating")):
            run_dir.update_status(state=state)
            started = time.monotonic()
            _run_phase(phase, run, run_dir, gpus)
            phase_seconds[phase] = round(time.monotonic() - started, 2)
            run_dir.update_status(phase_seconds=phase_seconds)
    except Exception as err:  # record any failure; the sweep goes on
        message = str(err) if isinstance(err, PhaseFailed) else traceback.format_exc(limit=3)
        log = str(err.log) if isinstance(err, PhaseFailed) else None
        run_dir.update_status(state="failed", ended_at=utc_now(), error={"message": message, "log": log},
                              phase_seconds=phase_seconds, gpu_hours=_gpu_hours(phase_seconds, gpus))
        print(f"[opsd_sweep] FAILED {run_dir.path.name}: {message}", flush=True)
        return {"key": key, "run_dir": str(run_dir.path), "state": "failed", "error": message}
    status = run_dir.update_status(state="done", ended_at=utc_now(), phase_seconds=phase_seconds,
                                   gpu_hours=_gpu_hours(phase_seconds, gpus))
    print(f"[opsd_sweep] done {run_dir.path.name} in {sum(phase_seconds.values()):.1f}s", flush=True)
    return {"key": key, "run_dir": str(run_dir.path), "state": status["state"]}


def _gpu_hours(phase_seconds: dict[str, float], gpus: list[str]) -> dict[str, float]:
    return {phase: round(seconds * len(gpus) / 3600, 4) for phase, seconds in phase_seconds.items()}


def phase_command(phase: str, run: RunConfig, run_dir: RunDir, gpus: list[str]) -> list[str]:
    """The argument list of a phase. Multi-GPU training goes through `accelerate launch`."""
    module = f"opsd_sweep.{phase}"
    if phase == "train" and len(gpus) > 1:
        port = str(29500 + (int(run_key(semantic_dict(run))[:4], 16) % 2000))  # distinct per run
        return [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", str(len(gpus)),
                "--main_process_port", os.environ.get("OPSD_MAIN_PORT", port),
                "-m", module, str(run_dir.path)]
    return [sys.executable, "-m", module, str(run_dir.path)]


def _run_phase(phase: str, run: RunConfig, run_dir: RunDir, gpus: list[str]) -> None:
    log = run_dir.log("train" if phase == "train" else "eval")
    log.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=",".join(gpus), PYTHONUNBUFFERED="1")
    with open(log, "a") as handle:
        handle.write(f"\n=== {utc_now()} {phase} ===\n")
        handle.flush()
        proc = subprocess.run(phase_command(phase, run, run_dir, gpus), stdout=handle,
                              stderr=subprocess.STDOUT, env=env)
    if proc.returncode != 0:
        raise PhaseFailed(phase, proc.returncode, log)
