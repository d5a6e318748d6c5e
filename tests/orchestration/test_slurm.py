"""Sweeps on a real SLURM (ci/start_slurm.sh: one node, 2 CPUs, 2 fake GPUs, slurmdbd accounting)
with hydra/launcher=slurm_ci: completion, killed jobs recorded failed and finished by a rerun, a
requeue resuming training from its checkpoint, claims held by gone SLURM jobs taken over."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from opsd_sweep.run.claims import RunClaimedError, claim_run, owner_alive, release_run, slurm_job_state
from opsd_sweep.run.rundir import RunDir
from tests.conftest import run_sweep
from tests.orchestration.conftest import (TINY, has_checkpoint, run_dirs, start_sweep, status, steps_logged,
                                          wait_until)


def slurm_missing() -> str | None:
    """Why SLURM tests cannot run here, or None when a controller with accounting answers."""
    if not all(shutil.which(tool) for tool in ("sbatch", "squeue", "sacct", "scontrol")):
        return "SLURM client tools are not installed (apt-get install slurm-client; see ci/start_slurm.sh)"
    for command in (["sinfo", "-h", "-o", "%t"], ["sacct", "-n", "-X", "-S", "now"]):
        try:
            proc = subprocess.run(command, capture_output=True, text=True, timeout=20, check=False)
        except subprocess.TimeoutExpired:
            return f"`{' '.join(command)}` timed out"
        if proc.returncode != 0:
            return f"`{' '.join(command)}` failed ({proc.stderr.strip()[:200]}): start SLURM with ci/start_slurm.sh"
    return None


pytestmark = [pytest.mark.slurm, pytest.mark.slow,
              pytest.mark.skipif(slurm_missing() is not None, reason=str(slurm_missing()))]

SLURM = ["-m", "hydra/launcher=slurm_ci", *TINY]


def job_state(job_id: str) -> str:
    return slurm_job_state(job_id) or "UNKNOWN"


def completing_jobs() -> list[str]:
    return subprocess.run(["squeue", "-h", "-t", "COMPLETING", "-o", "%i"], capture_output=True,
                          text=True).stdout.split()


def job_processes_alive(job_id: str) -> bool:
    """Whether any process of the job still runs on this (the only) node: its step daemons (named by the
    raw job id) or anything started under it (SLURM_JOB_ID in its environment), e.g. an old srun."""
    raw = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%A"], capture_output=True, text=True).stdout.strip()
    if not raw:
        return False
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            cmdline, environ = (proc / "cmdline").read_bytes(), (proc / "environ").read_bytes()
        except OSError:
            continue
        if cmdline.startswith(f"slurmstepd: [{raw}.".encode()) or f"SLURM_JOB_ID={raw}\0".encode() in environ:
            return True
    return False


def test_a_slurm_sweep_completes_and_a_rerun_submits_nothing(tmp_path, tiny_cache):
    args = [*SLURM, "train.max_steps=1", "seed=1,2"]
    proc = run_sweep(args, tmp_path, tiny_cache)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    submitted = dict(re.findall(r"#(\d) -> (\d+_\d)", output))
    assert len(submitted) == 2
    for seed, run_dir in run_dirs(tmp_path).items():
        s = status(run_dir)
        assert s["state"] == "done" and s["job_id"] == submitted[str(seed - 1)]  # job #0 is seed 1
        assert (run_dir / "eval" / "eval.json").exists()
    again = run_sweep(args, tmp_path, tiny_cache)
    assert again.returncode == 0
    assert (again.stdout + again.stderr).count("skipped (already done)") == 2
    assert "submitted" not in again.stdout + again.stderr


def process_tree(root: int) -> list[int]:
    """root and its descendants, by the parent pids in /proc."""
    children: dict[int, list[int]] = {}
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            parent = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(proc.name))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, []))
    return tree


def signal_pids(pids: list[int], signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass


def signal_tree(root: int, signum: int) -> None:
    signal_pids(process_tree(root), signum)


def pending_or_gone(pid: int, signum: int) -> bool:
    """Whether `signum` waits for a stopped process (its shared pending set) or the process has exited."""
    try:
        fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    except OSError:
        return True
    return fields["State"].split()[0] in ("Z", "X") or bool(int(fields["ShdPnd"], 16) & 1 << (signum - 1))


def signal_stopped_job(owner: int, job_id: str, scancel_args: list[str], signum: int) -> None:
    """scancel a job whose cycle process tree (under `owner`) is stopped, and let the tree run again once
    the signal waits for the owner: it handles the signal before it trains on."""
    tree = process_tree(owner)
    subprocess.run(["scancel", *scancel_args, job_id], check=True)
    wait_until(lambda: pending_or_gone(owner, signum), 120, f"signal {signum} to reach pid {owner}", interval=0.2)
    signal_pids(tree, signal.SIGCONT)  # the tree as it was: an owner gone has left its children to init


def latest_step(run_dir: Path) -> int:
    complete = run_dir.glob("train/checkpoint-*/trainer_state.json")
    return max((int(path.parent.name.removeprefix("checkpoint-")) for path in complete), default=0)


def test_killed_jobs_are_recorded_failed_a_requeue_resumes_and_a_rerun_completes(tmp_path, tiny_cache):
    steps = 6
    args = [*SLURM, f"train.max_steps={steps}", "seed=1,2,3"]
    sweep = start_sweep(args, tmp_path, tiny_cache, tmp_path / "sweep.log")
    runs = lambda: run_dirs(tmp_path)

    def training_with_checkpoint(seed: int) -> bool:
        run = runs().get(seed)
        return run is not None and has_checkpoint(run, 1) and status(run).get("state") == "training"

    # The node runs two jobs at once: seeds 1 and 2 first. Each cycle's processes are stopped (SIGSTOP) as
    # soon as it has a checkpoint: the first to get there would otherwise train to its end while the other
    # catches up, and a rerun of a finished training has nothing to resume (as happened under load).
    frozen: dict[int, dict] = {}

    def freeze_when_training(seed: int) -> bool:
        if seed not in frozen and training_with_checkpoint(seed):
            frozen[seed] = status(runs()[seed])
            signal_tree(frozen[seed]["pid"], signal.SIGSTOP)
        return seed in frozen

    wait_until(lambda: all([freeze_when_training(1), freeze_when_training(2)]), 600, "seeds 1 and 2 to train")
    cancelled, killed = frozen[1], frozen[2]
    signal_stopped_job(cancelled["pid"], cancelled["job_id"], [], signal.SIGTERM)  # cancel one
    signal_tree(killed["pid"], signal.SIGKILL)  # SIGKILL the other's processes, as the OOM killer would

    # Seed 3 then starts; USR2 is what SLURM sends before the time limit: submitit checkpoints + requeues.
    wait_until(lambda: freeze_when_training(3), 600, "seed 3 to train")
    preempted = frozen[3]["job_id"]
    signal_stopped_job(frozen[3]["pid"], preempted, ["--signal=USR2"], signal.SIGUSR2)
    wait_until(lambda: job_state(preempted) == "PENDING", 120, "the requeue", interval=0.5)
    # A requeued job waits ~2 minutes before it may start again; let it start now, but only once the
    # ended incarnation is gone and cleaned up: started at once, the new incarnation (same job id) was
    # cancelled at launch now and then under load (sacct: FAILED 1:0, batch CANCELLED, no step).
    wait_until(lambda: not job_processes_alive(preempted) and not completing_jobs(), 120,
               "the ended incarnation to exit and be cleaned up", interval=0.5)
    time.sleep(3)  # slurmd's own clean-up of the job id follows the last process by a moment
    subprocess.run(["scontrol", "update", f"JobId={preempted}", "StartTime=now"], check=True)
    assert sweep.wait(600) == 1
    output = (tmp_path / "sweep.log").read_text()

    assert "2 job(s) of the sweep failed" in output, output + "\n" + "\n".join(
        f"seed {seed}: {status(run)}" for seed, run in sorted(runs().items()))
    for run_dir, record in ((runs()[1], cancelled), (runs()[2], killed)):
        s = status(run_dir)
        assert s["state"] == "failed", s
        assert record["job_id"] in output.split("of the sweep failed")[1]
    assert re.search(rf"SLURM job {killed['job_id']} ended FAILED", status(runs()[2])["error"]["message"])
    third = status(runs()[3])
    assert third["state"] == "done" and third["attempts"] == 2 and third["job_id"] == preempted
    restart = re.search(r"resumed from \S+ at step (\d+)", (runs()[3] / "logs/train.log").read_text())
    assert restart and int(restart.group(1)) >= 1
    assert max(steps_logged(runs()[3])) == steps

    left_at = {seed: latest_step(runs()[seed]) for seed in (1, 2)}
    killed_at = left_at[2]
    assert 1 <= killed_at < steps  # stopped at its first checkpoint seen, killed there: training unfinished
    again = run_sweep([*args, "rerun_failed=true"], tmp_path, tiny_cache)
    assert again.returncode == 0, (again.stdout + again.stderr)[-4000:]
    assert "skipped (already done)" in again.stdout + again.stderr  # seed 3
    for seed in (1, 2):
        s = status(runs()[seed])
        assert s["state"] == "done" and s["attempts"] == 2
        assert max(steps_logged(runs()[seed])) == steps
    # The killed cycle resumes from the checkpoint it left; the cancelled one ran on for a moment after its
    # SIGCONT, and resumes too unless it finished training before its SIGTERM was handled.
    assert re.search(rf"resumed from \S+ at step {killed_at}\b", (runs()[2] / "logs/train.log").read_text())
    if left_at[1] < steps:
        assert re.search(rf"resumed from \S+ at step {left_at[1]}\b", (runs()[1] / "logs/train.log").read_text())


def test_a_claim_held_by_a_gone_slurm_job_is_taken_over(tmp_path):
    job = subprocess.run(["sbatch", "--parsable", "-c", "1", "--mem=50M", "-o", "/dev/null", "--wrap", "sleep 120"],
                         capture_output=True, text=True, check=True).stdout.strip()
    try:
        owner = {"host": "another-node", "pid": 1, "job_id": job, "nonce": "remote"}
        assert owner_alive(owner)  # pending or running: alive
        run_dir = RunDir(tmp_path / "run")
        run_dir.claims.mkdir(parents=True)
        (run_dir.claims / "00000001").write_text(json.dumps(owner))
        with pytest.raises(RunClaimedError, match=f"SLURM job {job}"):
            claim_run(run_dir)
    finally:
        subprocess.run(["scancel", job], check=True)
    wait_until(lambda: job_state(job) not in ("PENDING", "RUNNING", "COMPLETING"), 60, "the cancel", interval=0.5)
    assert not owner_alive(owner)
    release_run(claim_run(run_dir))
