"""The local_gpus launcher on a minimal Hydra app, in-process: packing, ports, failures, Hydra's suites."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path

import pytest
from hydra.core.plugins import Plugins
from hydra.plugins.launcher import Launcher
import subprocess
import sys

from hydra_plugins.opsd_local_gpus._grid import JobFailedError, SweepConfigError
from hydra_plugins.opsd_local_gpus.local_launcher import LocalGpusLauncher


def test_discovery():
    assert LocalGpusLauncher.__name__ in [p.__name__ for p in Plugins.instance().discover(Launcher)]


def test_hydra_launcher_suite_passes():
    """Hydra's own LauncherTestSuite, in a fresh process: it checks per-job log files, which depend
    on process-wide logging state that earlier in-process Hydra runs of this session change."""
    suite = Path(__file__).with_name("hydra_launcher_suite.py")
    # -n 0: the suite runs in that one process, not in xdist workers of its own (pyproject's addopts)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0",
                           str(suite)], capture_output=True, text=True, check=False, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert re.search(r"\b9 passed", proc.stdout), proc.stdout[-2000:]


def observe(cfg) -> dict:
    """The app's task: note what the job saw, hold its slot a moment, fail when asked. It holds its slot
    until `together` jobs have started (at most 60 s), so jobs the launcher runs side by side overlap
    however slowly a loaded machine starts them."""
    started = time.time()
    if cfg.a == cfg.fail_on and cfg.how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    Path(cfg.out, f"{cfg.a}.started").touch()
    deadline = time.monotonic() + 60
    while len(list(Path(cfg.out).glob("*.started"))) < cfg.together and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.4)
    seen = {"a": cfg.a, "start": started, "end": time.time(), "pid": os.getpid(),
            **{k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "OPSD_MAIN_PORT", "VLLM_PORT", "OMP_NUM_THREADS")}}
    Path(cfg.out, f"{cfg.a}.json").write_text(json.dumps(seen))
    if cfg.a == cfg.fail_on and cfg.how == "raise":
        raise RuntimeError(f"job a={cfg.a} raised on purpose")
    if cfg.a == cfg.fail_on and cfg.how == "report":
        return {"state": "failed", "error": f"run a={cfg.a} reported failure"}
    return {"state": "done"}


def sweep(hydra_sweep_runner, tmp_path: Path, overrides: list[str]):
    out = tmp_path / "seen"
    out.mkdir(exist_ok=True)
    return hydra_sweep_runner(calling_file=__file__, calling_module=None, task_function=observe, config_path="app",
                              config_name="config", overrides=[f"out={out}", *overrides],
                              temp_dir=tmp_path / "sweep")


def seen(tmp_path: Path) -> list[dict]:
    return sorted((json.loads(p.read_text()) for p in (tmp_path / "seen").glob("*.json")), key=lambda s: s["a"])


def overlapping(jobs: list[dict]) -> list[tuple[dict, dict]]:
    return [(x, y) for i, x in enumerate(jobs) for y in jobs[i + 1:] if x["start"] < y["end"] and y["start"] < x["end"]]


def max_concurrent(jobs: list[dict]) -> int:
    return max(sum(j["start"] <= x["start"] < j["end"] for j in jobs) for x in jobs)


def test_one_gpu_jobs_are_packed_on_disjoint_gpus_with_distinct_ports(hydra_sweep_runner, tmp_path):
    with sweep(hydra_sweep_runner, tmp_path,
               ["a=0,1,2,3,4,5", "gpus=1", "hydra.launcher.gpus=[5,7]", "together=2"]) as s:
        returns = s.returns[0]
    assert [r.hydra_cfg.hydra.job.num for r in returns] == [0, 1, 2, 3, 4, 5]  # input order kept
    assert [r.overrides[1] for r in returns] == [f"a={i}" for i in range(6)]
    jobs = seen(tmp_path)
    assert {j["CUDA_VISIBLE_DEVICES"] for j in jobs} == {"5", "7"}
    assert max_concurrent(jobs) == 2
    pairs = overlapping(jobs)
    assert pairs, "two GPUs but the jobs never ran side by side"
    for x, y in pairs:
        assert x["CUDA_VISIBLE_DEVICES"] != y["CUDA_VISIBLE_DEVICES"]
        assert {x["OPSD_MAIN_PORT"], x["VLLM_PORT"]}.isdisjoint({y["OPSD_MAIN_PORT"], y["VLLM_PORT"]})


def test_two_gpu_jobs_and_cpu_jobs_share_the_machine(hydra_sweep_runner, tmp_path):
    with sweep(hydra_sweep_runner, tmp_path, ["a=0,1,2", "gpus=2", "hydra.launcher.gpus=[0,1,2,3]",
                                              "together=2"]):
        pass
    assert {j["CUDA_VISIBLE_DEVICES"] for j in seen(tmp_path)} == {"0,1", "2,3"}
    assert max_concurrent(seen(tmp_path)) == 2
    cpu = tmp_path / "cpu"
    cpu.mkdir()
    with sweep(hydra_sweep_runner, cpu, ["a=0,1,2,3,4,5", "hydra.launcher.max_parallel=3", "together=3"]):
        pass
    jobs = seen(cpu)
    assert max_concurrent(jobs) == 3
    assert {j["CUDA_VISIBLE_DEVICES"] for j in jobs} == {""}  # CPU-only jobs see no GPU
    assert {j["OMP_NUM_THREADS"] for j in jobs} == {str(max(1, len(os.sched_getaffinity(0)) // 3))}


@pytest.mark.parametrize("how, message", [("raise", "job a=1 raised on purpose"),
                                          ("kill", "was killed by SIGKILL before returning"),
                                          ("report", "run a=1 reported failure")])
def test_a_failed_job_is_listed_at_the_end_and_the_others_run(hydra_sweep_runner, tmp_path, how, message):
    with pytest.raises(JobFailedError) as failure:
        with sweep(hydra_sweep_runner, tmp_path, ["a=0,1,2,3", "fail_on=1", f"how={how}",
                                                  "hydra.launcher.max_parallel=1"]):
            pass
    assert "1 job(s) of the sweep failed" in str(failure.value)
    assert re.search(rf"#1 out=\S+ a=1 fail_on=1 how={how}: .*{message}", str(failure.value))
    assert [j["a"] for j in seen(tmp_path)] == ([0, 2, 3] if how == "kill" else [0, 1, 2, 3])


def test_fail_fast_starts_nothing_after_the_first_failure(hydra_sweep_runner, tmp_path):
    with pytest.raises(JobFailedError) as failure:
        with sweep(hydra_sweep_runner, tmp_path, ["a=0,1,2", "fail_on=0", "hydra.launcher.fail_fast=true",
                                                  "hydra.launcher.max_parallel=1"]):
            pass
    assert [j["a"] for j in seen(tmp_path)] == [0]
    assert re.search(r"#2 out=\S+ a=2 fail_on=0: not started: fail_fast stopped the sweep after #0 ",
                     str(failure.value))
    assert "3 job(s) of the sweep failed" in str(failure.value)


def test_jobs_needing_more_gpus_than_exist_fail_before_any_job(hydra_sweep_runner, tmp_path):
    with pytest.raises(SweepConfigError, match=r"needs 3 GPUs but the launcher \(GPUs \['0', '1'\]\) has 2"):
        with sweep(hydra_sweep_runner, tmp_path, ["a=0,1", "gpus=3", "hydra.launcher.gpus=[0,1]"]):
            pass
    assert seen(tmp_path) == []
