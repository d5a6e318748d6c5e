"""Claims: one owner at a time, stale owners taken over exactly once, live owners respected."""

from __future__ import annotations

import json
import multiprocessing
import os
import socket
import subprocess
from pathlib import Path

import pytest

from opsd_sweep.run.claims import (RunClaimedError, _process_start, claim_run, current_owner, owner_alive,
                                   owner_info, release_run)
from opsd_sweep.run.rundir import RunDir
from tests.orchestration.conftest import wait_until


def _contend(path: str, start, results, finish) -> None:
    start.wait()
    try:
        claim_run(RunDir(Path(path)))
        results.put(("won", os.getpid()))
    except RunClaimedError as err:
        results.put(("lost", str(err)))
    finish.wait(60)  # stay alive until every contender has tried: a dead winner's claim is stale


def race(run_dir: RunDir, n: int = 8) -> list[str]:
    """n live processes claim the same run at the same moment; each exits without releasing."""
    ctx = multiprocessing.get_context("fork")
    start, finish, results = ctx.Event(), ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_contend, args=(str(run_dir.path), start, results, finish)) for _ in range(n)]
    for p in procs:
        p.start()
    start.set()
    outcomes = sorted(results.get(timeout=60)[0] for _ in procs)
    finish.set()
    for p in procs:
        p.join(60)
    return outcomes


def dead_owner() -> dict:
    """The owner record of a process of this host that has exited."""
    ctx = multiprocessing.get_context("fork")
    proc = ctx.Process(target=lambda: None)
    proc.start()
    proc.join()
    return {"host": socket.gethostname(), "pid": proc.pid, "pid_start": None, "job_id": None, "nonce": "gone"}


def test_concurrent_claims_of_a_fresh_run_have_one_winner(tmp_path):
    assert race(RunDir(tmp_path / "run")) == ["lost"] * 7 + ["won"]


def test_a_stale_claim_is_taken_over_by_exactly_one_claimer(tmp_path):
    run_dir = RunDir(tmp_path / "run")
    run_dir.claims.mkdir(parents=True)
    (run_dir.claims / "00000001").write_text(json.dumps(dead_owner()))
    assert race(run_dir) == ["lost"] * 7 + ["won"]
    assert [p.name for p in run_dir.claims.iterdir()] == ["00000002"]  # the stale claim is cleaned up


def test_a_live_claim_is_respected_and_released_by_its_owner(tmp_path):
    run_dir = RunDir(tmp_path / "run")
    claim = claim_run(run_dir)
    assert current_owner(run_dir)["pid"] == os.getpid()
    with pytest.raises(RunClaimedError, match=f"is being run by {socket.gethostname()} pid {os.getpid()}"):
        claim_run(run_dir)
    release_run(claim)
    assert current_owner(run_dir) is None
    release_run(claim_run(run_dir))


def test_release_leaves_a_claim_that_took_over_alone(tmp_path):
    run_dir = RunDir(tmp_path / "run")
    mine = claim_run(run_dir)
    taker = dead_owner() | {"pid": os.getppid(), "nonce": "taker"}  # a live process that took over
    (run_dir.claims / "00000002").write_text(json.dumps(taker))
    mine.path.unlink()  # what the taker's cleanup does
    release_run(mine)
    assert current_owner(run_dir)["nonce"] == "taker"


def test_a_reused_pid_is_not_a_live_owner():
    me = owner_info()
    assert owner_alive(me)
    assert not owner_alive(me | {"pid_start": "1"})  # same pid, another process start time
    assert not owner_alive(dead_owner())


def test_an_owner_on_another_host_without_slurm_counts_as_alive():
    assert owner_alive({"host": "elsewhere", "pid": 1, "job_id": None})


def test_a_killed_owner_left_as_an_unreaped_zombie_is_not_a_live_owner():
    # After kill -9 of a sweep in a container whose PID 1 never reaps, its job processes stay zombies.
    child = subprocess.Popen(["sleep", "60"])
    try:
        owner = {"host": socket.gethostname(), "pid": child.pid, "pid_start": _process_start(child.pid)}
        assert owner_alive(owner)
        child.kill()  # not waited for: a zombie until reaped
        wait_until(lambda: Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z",
                   10, "the killed child to become a zombie")
        assert not owner_alive(owner)
    finally:
        child.kill()
        child.wait()
