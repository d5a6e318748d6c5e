"""One cycle: claim the run -> write its config -> train phase -> eval phase -> final status.

Each phase runs outside this process, on the run dir with an explicit GPU set: in the warm phase worker
the local launcher assigned (opsd_sweep.worker), or in a subprocess of its own (multi-GPU cycles, SLURM,
hydra.launcher.phase_workers=false). So a crash, OOM or hang in a phase never takes the orchestrator
down; a failed run is recorded in status.json, never raised.
A cycle picks up where an interrupted one stopped: training resumes from its newest checkpoint and a
phase whose output is complete is not run again.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import traceback
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from opsd_sweep import ACCELERATE_DIR, backends
from opsd_sweep.config import RunConfig, load_run_config, to_dict
from opsd_sweep.run.keys import input_identities
from opsd_sweep.run.identity import evaluation_problem
from opsd_sweep.run.record import planned_samples
from opsd_sweep.evaluate.sampling_plan import ensure_plan, plan_path
from opsd_sweep.evaluate.standalone import load_eval_config, locate_eval_dir
from opsd_sweep.interrupt import signals_raise
from opsd_sweep.preflight import preflight_problems
from opsd_sweep.run import collapse
from opsd_sweep.run.claims import (SLURM_LIVE_STATES, Claim, RunClaimedError, claim_run, current_owner,
                                   owner_alive, release_run, slurm_job_id, slurm_job_state)
from opsd_sweep.run.keys import cycle_key, run_slug
from opsd_sweep.run.rundir import RunDir, atomic_write_json, atomic_write_text, read_json, utc_now
from opsd_sweep.run.rundir import gpu_hours as recorded_gpu_hours
from opsd_sweep.run.takeover import Location, locate_dir, take_over_earlier
from opsd_sweep.simulate import simulate_cycle
from opsd_sweep.tiny import tiny_problems
from opsd_sweep.worker import client as worker_client

PHASES = (("train", "training"), ("evaluate", "evaluating"))  # (phase, the state while it runs)


class PhaseFailed(RuntimeError):
    def __init__(self, phase: str, how: str, log: Path):
        job = f" in SLURM job {slurm_job_id()}" if slurm_job_id() else ""
        said = last_error_line(log)
        super().__init__(f"{phase} phase {how}{job}" + (f": {said}" if said else "") + f"; see {log}")
        self.log = log


def exit_how(returncode: int) -> str:
    return f"was killed by {signal.Signals(-returncode).name}" if returncode < 0 else f"exited with code {returncode}"


ERROR_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b")
RANK_PREFIX = re.compile(r"^\[(?:rank|default)(\d+)\]:\s?")  # torchrun's prefix of each rank's lines
# Launchers' reports that a child failed (torch.distributed.elastic, accelerate's simple launcher): the child's
# own exception, printed above them, is the cause.
WRAPPER_ERRORS = re.compile(r"^[\w.]*(ChildFailedError|CalledProcessError)\b")


def last_error_line(log: Path) -> str | None:
    """What the phase said last in this attempt's part of its log: its exception line if it printed a
    traceback, else its last line (e.g. a SystemExit message); progress-bar redraws are skipped. Under a
    multi-process launch the cause is the failed rank's own exception, not the launcher's ChildFailedError
    (the root cause's rank first); with none printed (a rank killed), the launcher's line and the root cause."""
    section = log.read_text(errors="replace").rsplit(" ===\n", 1)[-1]  # after this attempt's header
    lines = [line.rsplit("\r", 1)[-1].strip() for line in section.splitlines()]
    lines = [line for line in lines if line]
    ranked = [(match.group(1) if (match := RANK_PREFIX.match(line)) else None, RANK_PREFIX.sub("", line))
              for line in lines]
    errors = [(rank, line) for rank, line in ranked if ERROR_LINE.match(line)]
    causes = [(rank, line) for rank, line in errors if not WRAPPER_ERRORS.match(line)]
    root_rank, root_exit = _root_cause(lines)
    if causes:
        said = next((line for rank, line in reversed(causes) if rank == root_rank), causes[-1][1])
    elif errors:
        said = errors[-1][1].rstrip(": ") + (f"; root cause: rank {root_rank} {root_exit}" if root_rank else "")
    else:
        said = lines[-1] if lines else None
    return said[:300] if said else None


def _root_cause(lines: list[str]) -> tuple[str | None, str]:
    """The rank torch.distributed.elastic names under 'Root Cause (first observed failure)' and how it ended
    ('exitcode -9 (SIGKILL)'); (None, '') where it names none."""
    start = next((i for i, line in enumerate(lines) if line.startswith("Root Cause")), len(lines))
    block = "\n".join(lines[start:start + 8])
    rank = re.search(r"^rank\s*:\s*(\d+)", block, re.M)
    code = re.search(r"^exitcode\s*:\s*(-?\d+)[^\n]*?(\(SIG\w+\))?$", block, re.M)
    how = "" if code is None else f"exitcode {code.group(1)}" + (f" {code.group(2)}" if code.group(2) else "")
    return (rank.group(1) if rank else None), how


def locate(run: RunConfig) -> Location:
    """Where this run lives (see run.takeover.Location); reads only (the launcher's grid check and probe call it)."""
    slug = run_slug(run.learning_rate, run.clip, run.loss_top_k, run.seed)
    return locate_dir(Path(run.results_root) / run.group, run, slug, cycle_key, input_identities)


def locate_run(run: RunConfig) -> tuple[str, RunDir]:
    """This run's key and the dir it runs in; reads only."""
    where = locate(run)
    return where.key, where.run_dir


def visible_gpus() -> list[str]:
    """The GPU ids this process may use, as the launcher set them (empty on CPU)."""
    value = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    return [g for g in value.split(",") if g.strip() != ""]


def run_gpus(num_gpus: int) -> list[str]:
    """The GPUs this run uses: the first `num_gpus` visible ones (all GPUs count as visible when
    CUDA_VISIBLE_DEVICES is unset). Raises when fewer are visible."""
    if num_gpus == 0:
        return []
    visible = visible_gpus() if "CUDA_VISIBLE_DEVICES" in os.environ else [str(i) for i in range(num_gpus)]
    if len(visible) < num_gpus:
        raise RuntimeError(f"train.num_gpus={num_gpus} but only GPUs {visible} are visible "
                           f"(CUDA_VISIBLE_DEVICES); give the job more GPUs or lower train.num_gpus")
    return visible[:num_gpus]


def skip_reason(run: RunConfig, status: dict) -> tuple[str, str] | None:
    """Why this run must not run now, as (code, text) with code 'done' or 'failed', or None."""
    state = status.get("state")
    if state == "done" and not run.force:
        return "done", "already done"
    if state == "collapsed" and run.train.stop_on_collapse and not run.force:  # settled, as a finding
        return "done", (f"collapsed at step {(status.get('collapse') or {}).get('step')} and stopped before "
                        "(train.stop_on_collapse=false trains it on, force=true reruns it)")
    # A SLURM job requeued after a preemption continues its own run even if the kill marked it failed.
    requeued_here = status.get("job_id") is not None and status.get("job_id") == slurm_job_id()
    if state == "failed" and not (run.rerun_failed or run.force or requeued_here):
        return "failed", "failed before (rerun_failed=true retries it)"
    return None


def run_cycle(run: RunConfig) -> dict:
    """Run one train-then-eval cycle unless it is settled or claimed by a live process.

    Returns a small dict: key, run_dir, state ('done' | 'collapsed' | 'failed' | 'skipped'); a skipped run has a
    reason 'done' | 'failed' | 'claimed' and a detail (the text printed).
    """
    with signals_raise():  # Ctrl-C / SIGTERM: the run is marked interrupted, the claim released
        return _run_cycle(run)


def _run_cycle(run: RunConfig) -> dict:
    where = locate(run)
    key = where.key
    result = {"key": key, "run_dir": str(where.run_dir.path)}
    try:
        run_dir = take_over_earlier(where)
    except RunClaimedError as err:  # the earlier dir was claimed since it was located
        print(f"[opsd_sweep] skip {where.current.path.name}: {err}", flush=True)
        return result | {"state": "skipped", "reason": "claimed", "detail": str(err)}
    status = settled_status(run, run_dir)
    skip = skip_reason(run, status)
    unrecorded = status.get("state") == "done" and run_dir.read_identity() is None  # done before records
    if skip is None or status.get("recovered") or unrecorded:  # written back under the claim
        try:
            claim = claim_run(run_dir)
        except RunClaimedError as err:
            if skip is None or status.get("recovered"):  # a done run stays done; its record waits for a rerun
                skip = "claimed", str(err)
        else:
            try:
                # Read again under the claim: another sweep may have finished the run meanwhile.
                previous = settled_status(run, run_dir)
                skip = skip_reason(run, previous)
                if skip is None:
                    return result | _run_claimed(run, where, run_dir, previous, claim)
                if previous.get("recovered"):
                    run_dir.update_status()  # the unreadable file is kept aside as status.json.unreadable
                if run_dir.read_identity() is None:  # its key holds today's identities: they are its own
                    run_dir.write_identity(key, where.inputs)
            finally:
                release_run(claim)
    print(f"[opsd_sweep] skip {run_dir.path.name}: {skip[1]}", flush=True)
    return result | {"state": "skipped", "reason": skip[0], "detail": skip[1]}


def _run_claimed(run: RunConfig, where: Location, run_dir: RunDir, previous: dict, claim: Claim) -> dict:
    key = where.key
    if run.force and previous.get("state") in ("done", "collapsed"):  # a forced rerun starts from scratch
        shutil.rmtree(run_dir.train_dir, ignore_errors=True)
        shutil.rmtree(run_dir.eval_dir, ignore_errors=True)
        plan_path(run_dir).unlink(missing_ok=True)  # and plans its samples again (eval.n_samples=auto, allocation)
        previous = {"attempts": previous.get("attempts", 0), "attempt_log": previous.get("attempt_log") or []}
    if previous.get("eval_unreadable"):
        print(f"[opsd_sweep] {run_dir.path.name}: {run_dir.eval_json} does not read back; evaluating again "
              "from the final checkpoint (no retraining)", flush=True)
    if previous.get("eval_again"):
        print(f"[opsd_sweep] {run_dir.path.name}: evaluating again from the final checkpoint (training kept): "
              f"{previous['eval_again']}", flush=True)
    atomic_write_text(run_dir.config, OmegaConf.to_yaml(OmegaConf.create(to_dict(run))))
    run_dir.write_identity(key, where.inputs)
    phase_seconds: dict[str, float] = dict(previous.get("phase_seconds") or {})
    gpu_hours = recorded_gpu_hours(previous).get("gpu_hours.total", 0.0)
    # this attempt's own phase seconds beside the totals: the cost advice reads one attempt's (run.record)
    attempt = {"attempt": previous.get("attempts", 0) + 1, "gpus": [], "phase_seconds": {}, "resumed": []}
    attempt_log = [*(previous.get("attempt_log") or []), attempt]
    owner = claim.owner
    run_dir.update_status(key=key, state="pending", attempts=previous.get("attempts", 0) + 1,
                          host=owner["host"], pid=owner["pid"], job_id=owner["job_id"], gpus=[],
                          started_at=utc_now(), ended_at=None, error=None, collapse=None,
                          phase_seconds=phase_seconds, gpu_hours=gpu_hours)
    try:
        ensure_plan(run, run_dir)  # its samples per problem, fixed before any is drawn (once; a resume reuses it)
        if run.executor == "simulate":  # the noise model writes the run dir: no phase processes
            return simulate_cycle(run, run_dir)
        gpus = run_gpus(run.train.num_gpus)
        attempt["gpus"] = gpus
        run_dir.update_status(gpus=gpus, attempt_log=attempt_log)
        t = run.train
        print(f"[opsd_sweep] run {run_dir.path.name}: {max(t.num_gpus, 1)} x {t.per_device_batch_size} x "
              f"{t.grad_accum_steps} = {t.global_batch_size} prompts/step, {t.max_steps} steps, "
              f"GPUs {gpus or 'none (CPU)'}", flush=True)
        for phase, state in PHASES:
            if _phase_complete(phase, run, run_dir):
                continue
            run_dir.update_status(state=state)
            if phase == "train" and run_dir.latest_checkpoint() is not None:
                attempt["resumed"].append("train")  # from a checkpoint: this attempt did part of the phase
            started = time.monotonic()
            try:
                _run_phase(phase, run, run_dir, gpus)
            finally:  # count the time even when the phase fails
                seconds = time.monotonic() - started
                for name, part in _split_phase_seconds(phase, seconds, run, run_dir).items():
                    phase_seconds[name] = round(phase_seconds.get(name, 0.0) + part, 2)
                    attempt["phase_seconds"][name] = round(attempt["phase_seconds"].get(name, 0.0) + part, 2)
                gpu_hours = round(gpu_hours + seconds * len(gpus) / 3600, 4)
                run_dir.update_status(phase_seconds=phase_seconds, gpu_hours=gpu_hours, attempt_log=attempt_log)
            if phase == "train" and run.train.stop_on_collapse and (found := collapse.read_marker(run_dir)):
                run_dir.update_status(state="collapsed", ended_at=utc_now(), collapse=found)
                print(f"[opsd_sweep] collapsed {run_dir.path.name} at step {found['step']} ({found['reason']}): "
                      "stopped, not evaluated (train.stop_on_collapse)", flush=True)
                return {"state": "collapsed", "collapse": found}
    except KeyboardInterrupt as err:  # Ctrl-C or SIGTERM: the phase process is stopped; a rerun resumes
        during = run_dir.read_status().get("state")
        run_dir.update_status(state="interrupted", ended_at=utc_now(),
                              error={"message": f"{err or 'interrupted by SIGINT'} while {during}; run the sweep "
                                                "again to resume", "log": None})
        raise
    except Exception as err:  # record any failure; the sweep goes on
        message = str(err) if isinstance(err, PhaseFailed) else traceback.format_exc(limit=3)
        log = str(err.log) if isinstance(err, PhaseFailed) else None
        run_dir.update_status(state="failed", ended_at=utc_now(), error={"message": message, "log": log})
        print(f"[opsd_sweep] FAILED {run_dir.path.name}: {message}", flush=True)
        return {"state": "failed", "error": message}
    run_dir.update_status(state="done", ended_at=utc_now())
    print(f"[opsd_sweep] done {run_dir.path.name}: {phase_seconds}", flush=True)
    return {"state": "done"}


def _final_checkpoint(run: RunConfig, run_dir: RunDir) -> Path | None:
    found = run_dir.checkpoints()
    return found[-1][1] if found and found[-1][0] >= run.train.max_steps else None


def _phase_complete(phase: str, run: RunConfig, run_dir: RunDir) -> bool:
    """Training is complete at the final checkpoint; evaluation when eval.json holds today's scores of
    that checkpoint (identity.evaluation_problem), with all eval.n_samples (or the K its sampling plan chose)."""
    final = _final_checkpoint(run, run_dir)
    if phase == "train" or final is None:
        return final is not None
    evaluation = run_dir.read_eval()
    return evaluation is not None and evaluation_problem(evaluation, final, run.eval.merge_lora,
                                                         planned_samples(run_dir, run.eval.n_samples)) is None


def settled_status(run: RunConfig, run_dir: RunDir) -> dict:
    """status.json as the skip decision reads it: a run marked done whose eval.json does not read back
    (truncated, corrupted) or does not hold today's scores of its checkpoint (an evaluator since found
    wrong) is not done: its evaluation runs again, from the checkpoint it already has."""
    status = run_dir.read_status()
    if status.get("state") != "done":
        return status
    evaluation = run_dir.read_eval()
    if evaluation is None:
        return status | {"state": "evaluating", "eval_unreadable": True}
    again = evaluation_problem(evaluation, _final_checkpoint(run, run_dir), run.eval.merge_lora,
                               planned_samples(run_dir, run.eval.n_samples))
    return status | {"state": "evaluating", "eval_again": again} if again else status


def _split_phase_seconds(phase: str, seconds: float, run: RunConfig, run_dir: RunDir) -> dict[str, float]:
    """A train phase whose rollout engine also evaluated the final checkpoint (one engine per cycle)
    wrote eval.json itself: its evaluation's wall time is the eval phase's, the rest the train phase's."""
    if phase != "train" or not _phase_complete("evaluate", run, run_dir):
        return {phase: seconds}
    evaluating = 0.0
    for path in [run_dir.eval_json, *run_dir.eval_dir.glob("checkpoint-*/eval.json")]:  # eval.checkpoints=all
        timing = read_json(path).get("timing", {})
        if timing.get("engine") != "own":
            evaluating += float(timing.get("wall_seconds", 0.0))
    evaluating = min(evaluating, seconds)
    return {"train": seconds - evaluating, "evaluate": evaluating}


def phase_env(run: RunConfig, gpus: list[str]) -> dict[str, str]:
    """A phase's environment: its GPUs, unbuffered output, and what vLLM needs inside a cycle (spawned
    engine processes, compile caches in the shared cache dir; see backends.vllm_env)."""
    return {**backends.vllm_env(run.cache_dir), **os.environ, "CUDA_VISIBLE_DEVICES": ",".join(gpus),
            "PYTHONUNBUFFERED": "1"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


def phase_command(phase: str, run_dir: RunDir, gpus: list[str], strategy: str) -> list[str]:
    """The argument list of a phase. Multi-GPU training goes through `accelerate launch` with the config
    file of train.strategy, on the port the launcher reserved for this job (OPSD_MAIN_PORT) or a free one."""
    module = f"opsd_sweep.{phase}"
    if phase == "train" and len(gpus) > 1:
        port = os.environ.get("OPSD_MAIN_PORT") or str(free_port())
        return [sys.executable, "-m", "accelerate.commands.launch", "--config_file",
                str(ACCELERATE_DIR / f"{strategy}.yaml"), "--num_processes", str(len(gpus)),
                "--main_process_port", port, "-m", module, str(run_dir.path)]
    return [sys.executable, "-m", module, str(run_dir.path)]


def _die_with_parent() -> None:
    """In the phase process: get SIGKILL when the cycle process dies, so a killed sweep leaves no
    orphan still writing into the run dir (Linux prctl PR_SET_PDEATHSIG)."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)


def _run_phase(phase: str, run: RunConfig, run_dir: RunDir, gpus: list[str]) -> None:
    """Run a phase in the phase worker the launcher assigned (a 1-GPU or CPU cycle), else in a process of
    its own; either way its output goes to the phase log, and a failure raises PhaseFailed."""
    log = run_dir.log("train" if phase == "train" else "eval")
    log.parent.mkdir(parents=True, exist_ok=True)
    env = phase_env(run, gpus)
    worker = worker_client.assigned_worker() if len(gpus) <= 1 else None
    returncode = None
    if worker is not None:
        _log_header(log, f"phase worker {worker[1]}: {phase}")
        try:
            returncode = worker_client.run_phase(worker, phase, str(run_dir.path), env, str(log))
        except worker_client.WorkerDied as err:
            raise PhaseFailed(phase, f"stopped: {err}", log) from None
    if returncode in (None, worker_client.FRESH_PROCESS, worker_client.BESIDE):
        _log_header(log, phase)
        with open(log, "a") as handle:
            returncode = subprocess.run(phase_command(phase, run_dir, gpus, run.train.strategy), stdout=handle,
                                        stderr=subprocess.STDOUT,
                                        env=env, preexec_fn=_die_with_parent if sys.platform == "linux" else None,
                                        check=False).returncode
    if returncode != 0:
        raise PhaseFailed(phase, exit_how(returncode), log)


def _log_header(log: Path, what: str) -> None:
    """The line each start of a phase begins its part of the log with (last_error_line reads after it)."""
    with open(log, "a") as handle:
        handle.write(f"\n=== {utc_now()} {what} ===\n")


_PHASE_START = re.compile(r"=== \S+ (?:phase worker (\d+): )?(train|evaluate) ===")


def phase_starts(log: Path, phase: str) -> list[int | None]:
    """Where each start of `phase` in its log ran: the phase worker's pid, or None for a process of its own."""
    return [int(pid) if pid else None for pid, name in _PHASE_START.findall(log.read_text()) if name == phase]


# --- hooks for the launchers (hydra.launcher.validate / on_lost / probe in conf/hydra/launcher/) ---

STANDALONE_APP = "standalone"  # hydra.job.name of `python -m opsd_sweep.evaluate` (evaluate/standalone.py)


def load_cycle_config(cfg: DictConfig) -> RunConfig:
    """load_run_config plus what a train-then-eval cycle needs beyond a valid config: at least one training
    step, tiny.* settings a world can be built with, and model, data and eval sources that exist (preflight);
    raise one ConfigError listing all."""
    return load_run_config(cfg, more_checks=(_cycle_problems, tiny_problems,
                                             lambda run: preflight_problems(run, train=True)))


def _cycle_problems(run: RunConfig) -> list[str]:
    if run.train.max_steps == 0:
        return ["train.max_steps=0 trains nothing, and a cycle evaluates what it trained; give it >= 1 step, "
                "or evaluate the untrained model with python -m opsd_sweep.evaluate train.max_steps=0 ..."]
    return []


def validate_job(job_cfg: DictConfig) -> str:
    """Raise ConfigError when a composed job config cannot run (the launcher checks the whole grid);
    return the run dir it would run, so the launcher can refuse two jobs that would share one. Jobs of
    the standalone evaluation are checked (and located) as evaluations."""
    if HydraConfig.initialized() and HydraConfig.get().job.name == STANDALONE_APP:
        return str(locate_eval_dir(load_eval_config(job_cfg))[1].path)
    return str(locate_run(load_cycle_config(job_cfg))[1].path)


def probe_job(job_cfg: DictConfig) -> tuple[str, str, dict]:
    """What a launcher should do with a job before submitting it, why, and which run it is: action 'done'
    or 'failed' (settled: skip it), 'wait' (a live process or a queued SLURM job holds it) or 'submit';
    the run as run_cycle names it ({key, run_dir}), for the answer the launcher gives in the job's place."""
    run = load_run_config(job_cfg)
    location = locate(run)
    run_dir = location.current
    where = {"key": location.key, "run_dir": str(location.run_dir.path)}
    if location.earlier is not None:  # the cycle takes it over (a rename, under its claim), then skips it if done
        return "submit", f"to take over {location.earlier.path.name}, written under an earlier run key", where
    skip = skip_reason(run, settled_status(run, run_dir))
    if skip is not None:
        return *skip, where
    owner = current_owner(run_dir)
    if owner is not None and owner_alive(owner):
        return "wait", str(RunClaimedError(run_dir, owner)), where
    queued = read_json(run_dir.submission)["job_id"] if run_dir.submission.exists() else None
    if queued is not None and slurm_job_state(queued) in SLURM_LIVE_STATES:
        return "wait", f"queued as SLURM job {queued}", where
    return "submit", "not done", where


def record_submitted_job(job_cfg: DictConfig, job_id: str) -> None:
    """Remember the SLURM job that will run this run, so a re-run of the sweep waits for it."""
    run_dir = locate(load_run_config(job_cfg)).current  # an earlier-key dir takes it along when renamed
    atomic_write_json(run_dir.submission, {"job_id": job_id, "submitted_at": utc_now()})


def record_lost_job(job_cfg: DictConfig, error: dict, owner: dict) -> None:
    """Mark the run failed when the process that ran it died without saying so (SIGKILL, OOM, scancel).

    `owner` names that process ({"host", "pid"} or {"job_id"}); a run that another live process holds
    now, or that has already settled, is left alone.
    """
    run = load_run_config(job_cfg)
    location = locate(run)
    key, run_dir = location.key, location.current
    status = run_dir.read_status()
    if status.get("state") in ("done", "collapsed", "failed", "interrupted"):  # interrupted: it said so; resumable
        return
    ours = all(status.get(field) in (None, value) for field, value in owner.items())
    holder = current_owner(run_dir)
    if not ours or (holder is not None and owner_alive(holder)):
        return
    run_dir.update_status(key=key, state="failed", ended_at=utc_now(), error=error)
