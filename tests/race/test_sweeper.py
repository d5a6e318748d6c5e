"""`hydra/sweeper=race` for real: `python -m opsd_sweep -m hydra/sweeper=race executor=simulate ...` in a
subprocess, checked against the pure policy driven in-process on the same configs and seeds."""

from __future__ import annotations

import json

import pytest
from hydra.core.plugins import Plugins
from hydra.plugins.sweeper import Sweeper
from omegaconf import OmegaConf

from opsd_sweep.config import ConfigError, load_run_config, to_dict
from opsd_sweep.cycle import locate_run
from opsd_sweep.inference.arms import Anchor
from opsd_sweep.race import RaceSettings, RaceSpec, RunResult, run_race
from opsd_sweep.race.results import read_run_result
from opsd_sweep.run.rundir import atomic_write_text
from opsd_sweep.simulate import simulate_run
from tests.conftest import compose, run_sweep
from tests.orchestration.test_slurm import slurm_missing

pytestmark = pytest.mark.slow

# One config is invalid (learning_rate=-1): its jobs raise in the task, the race drops it and goes on.
AXIS = ["learning_rate=-1,2e-6,5e-6,2e-5"]
FIXED = ["executor=simulate", "group=race", "simulate.lr_curvature=6", "simulate.train_seed_sd=2"]
RACE = ["hydra.sweeper.baseline='learning_rate=5e-6'", "hydra.sweeper.max_seeds=5", "hydra.sweeper.confirm_seeds=2"]


def race_command(launcher: str = "basic") -> list[str]:
    return ["-m", "hydra/sweeper=race", f"hydra/launcher={launcher}", *FIXED, *AXIS, *RACE]


def records(results) -> list[dict]:
    return [json.loads(line) for line in (results / "race" / "race.jsonl").read_text().splitlines()]


def decisions(recs: list[dict]) -> list[tuple]:
    return [(r["round"], r["phase"], r["config"], r.get("n"), round(r.get("mean") or 0, 9), r["action"])
            for r in recs if r["type"] == "decision"]


@pytest.fixture(scope="module")
def raced(tmp_path_factory, cache_dir):
    results = tmp_path_factory.mktemp("race_results")
    proc = run_sweep(race_command(), results, cache_dir, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return results, proc


def test_the_sweeper_plugin_is_discovered():
    assert "RaceSweeper" in [p.__name__ for p in Plugins.instance().discover(Sweeper)]


def test_race_logs_every_decision_and_drops_the_failing_config(raced):
    results, proc = raced
    recs = records(results)
    assert recs[0]["type"] == "race" and recs[0]["baseline"] == "learning_rate=5e-06"
    assert recs[0]["configs"] == ["learning_rate=-1", "learning_rate=2e-06", "learning_rate=5e-06",
                                  "learning_rate=2e-05"]
    drop = [r for r in recs if r.get("action") == "drop"]
    assert [r["config"] for r in drop] == ["learning_rate=-1"]
    failed = [r for r in recs if r["type"] == "run" and r["state"] == "failed"]
    assert failed and all("learning_rate=-1.0 must be > 0" in r["error"] for r in failed)
    assert [r for r in recs if r["type"] == "stop"], "the race must stop"
    final = [r for r in recs if r["type"] == "decision" and r["phase"] == "final"]
    assert final and all({"n", "mean", "ci", "p_baseline", "p_anchor", "action"} <= set(r) for r in final)
    for run in (r for r in recs if r["type"] == "run" and r["state"] == "done"):
        status = json.loads((results / "race" / run["run_dir"].rsplit("/", 1)[1] / "status.json").read_text())
        assert status["simulated"] is True and status["state"] == "done"
    assert "race: done" in proc.stdout + proc.stderr


def test_the_sweeper_decides_exactly_as_the_pure_policy(raced, tmp_path):
    """The same configs and seeds, simulated in-process and raced by run_race, give the same decisions."""
    results, _ = raced
    header = records(results)[0]
    assert header["settings"]["max_seeds"] == 5 and header["settings"]["confirm_seeds"] == 2  # the overrides
    spec = RaceSpec(tuple(header["configs"]), header["baseline"], Anchor(**header["anchor"]),
                    RaceSettings(**header["settings"]))

    def execute(requests):
        out = []
        for q in requests:
            cfg = compose([*FIXED, q.config, f"seed={q.seed}", f"results_root={tmp_path}"])
            try:
                run = load_run_config(cfg)
            except ConfigError as err:
                out.append(RunResult(q.config, q.seed, q.phase, "failed", error=str(err)))
                continue
            _, run_dir = locate_run(run)
            atomic_write_text(run_dir.config, OmegaConf.to_yaml(OmegaConf.create(to_dict(run))))  # as the cycle does
            simulate_run(run, run_dir)
            run_dir.update_status(state="done", gpu_hours=run.simulate.gpu_hours_per_run)
            out.append(read_run_result(run_dir.path, q.config, q.seed, q.phase, "avg_at_n"))
        return out

    pure = []
    run_race(spec, execute, emit=pure.append)
    assert decisions(pure) == decisions(records(results))


def test_a_cut_race_resumes_from_its_log(raced, cache_dir):
    """Cut race.jsonl in the middle (as a kill would), rerun the command: same decisions, no run twice."""
    results, _ = raced
    log = results / "race" / "race.jsonl"
    whole = log.read_text().splitlines()
    complete = decisions(records(results))
    cut = next(i for i, line in enumerate(whole) if '"round": 1' in line and '"decision"' in line)
    log.write_text("\n".join(whole[:cut]) + "\n")
    proc = run_sweep(race_command(), results, cache_dir, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "race: resuming" in proc.stdout + proc.stderr
    resumed = records(results)
    assert decisions(resumed) == complete
    statuses = [json.loads(s.read_text()) for s in (results / "race").glob("*/status.json")]
    assert statuses and all(s["attempts"] == 1 for s in statuses)  # finished runs were not run again


@pytest.mark.parametrize("launcher", [
    "local_gpus",
    pytest.param("slurm_ci", marks=[pytest.mark.slurm,
                                    pytest.mark.skipif(slurm_missing() is not None, reason=str(slurm_missing()))]),
])
def test_race_runs_on_the_gpu_slot_and_slurm_launchers(launcher, tmp_path, cache_dir):
    """The same race through the local GPU-slot launcher (subprocess workers) and through SLURM; simulated
    cycles of the 4-GPU default recipe ask for no GPU (this machine has none)."""
    args = ["-m", "hydra/sweeper=race", f"hydra/launcher={launcher}", "executor=simulate", "group=slots", "learning_rate=5e-6,1e-5",
            "hydra.sweeper.baseline='learning_rate=5e-6'", "hydra.sweeper.max_seeds=3", "hydra.sweeper.confirm_seeds=1"]
    proc = run_sweep(args, tmp_path, cache_dir, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    recs = [json.loads(line) for line in (tmp_path / "slots" / "race.jsonl").read_text().splitlines()]
    runs = [r for r in recs if r["type"] == "run"]
    assert all(r["state"] == "done" for r in runs) and len(runs) in (6, 7)  # 2 x 3 seeds (+1 confirmation)
    assert [r["reason"] for r in recs if r["type"] == "stop"] == ["max_seeds: 3 seeds per config"]
