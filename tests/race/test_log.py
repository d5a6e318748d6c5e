"""race.jsonl and reading runs back from run dirs: what a restarted race relies on."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from omegaconf import OmegaConf

from opsd_sweep.config import load_run_config, to_dict
from opsd_sweep.cycle import locate_run
from opsd_sweep.race import RaceSettings, RaceSpec, RaceState, RunResult
from opsd_sweep.race.log import RaceLog
from opsd_sweep.race.results import read_run_result
from opsd_sweep.run.rundir import RunDir, atomic_write_text, read_json
from opsd_sweep.simulate import simulate_run
from tests.conftest import compose
from tests.race.test_policy import SETTINGS


def simulated_run_dir(tmp_path, seed: int) -> RunDir:
    run = load_run_config(compose(["executor=simulate", f"results_root={tmp_path}", f"seed={seed}"]))
    _, run_dir = locate_run(run)
    atomic_write_text(run_dir.config, OmegaConf.to_yaml(OmegaConf.create(to_dict(run))))  # as the cycle does
    simulate_run(run, run_dir)
    run_dir.update_status(state="done", gpu_hours={"train": 4.5, "evaluate": 1.5})
    return run_dir


def test_a_done_run_reads_back_with_its_score(tmp_path):
    run_dir = simulated_run_dir(tmp_path, 1)
    result = read_run_result(run_dir.path, "cfg", 1, "race", "avg_at_n")
    assert result.state == "done" and result.gpu_hours == 6.0
    assert result.score == pytest.approx(read_json(run_dir.eval_json)["metrics"]["avg_at_n"])
    other = read_run_result(run_dir.path, "cfg", 1, "race", "maj_at_n")
    assert other.score == pytest.approx(read_json(run_dir.eval_json)["metrics"]["maj_at_n"])


def test_unfinished_or_broken_runs_read_back_as_failed_with_the_reason(tmp_path):
    run_dir = simulated_run_dir(tmp_path, 2)
    assert "no metric 'nope'" in read_run_result(run_dir.path, "c", 2, "race", "nope").error
    run_dir.eval_json.unlink()
    assert "eval.json" in read_run_result(run_dir.path, "c", 2, "race", "avg_at_n").error
    run_dir.update_status(state="failed", error={"message": "train phase exited with code 1", "log": None})
    failed = read_run_result(run_dir.path, "c", 2, "race", "avg_at_n")
    assert failed.state == "failed" and failed.error == "train phase exited with code 1"


def test_the_log_restores_state_and_runs_and_refuses_another_race(tmp_path):
    spec = RaceSpec(("a", "b"), "a", None, RaceSettings(**SETTINGS))
    log = RaceLog(tmp_path / "race.jsonl")
    assert log.start_or_resume(spec, "avg_at_n") == (RaceState(), [])
    run_dir = simulated_run_dir(tmp_path, 3)
    log.append(read_run_result(run_dir.path, "a", 3, "race", "avg_at_n").to_record())
    log.append(RunResult("b", 1, "race", "failed", error="boom").to_record())
    log.append(RaceState(round=2, eliminated={"c": 1}).to_record())
    with open(log.path, "a") as handle:
        handle.write('{"type": "state", "round": 3')  # a line cut short by a kill
    state, results = log.start_or_resume(spec, "avg_at_n")
    assert state == RaceState(round=2, eliminated={"c": 1})
    assert [(r.config, r.state) for r in results] == [("a", "done"), ("b", "failed")]
    assert np.isfinite(results[0].score)
    log.append(RaceState(round=4).to_record())  # appends after the cut line stay readable
    assert log.start_or_resume(spec, "avg_at_n")[0] == RaceState(round=4)
    other = dataclasses.replace(spec, configs=("a", "b", "c"))
    with pytest.raises(ValueError, match="logs another race .* group=<name>"):
        log.start_or_resume(other, "avg_at_n")


def test_changed_settings_on_resume_are_said_and_a_finished_race_is_not_reopened(tmp_path, caplog):
    spec = RaceSpec(("a", "b"), "a", None, RaceSettings(**SETTINGS))
    log = RaceLog(tmp_path / "race.jsonl")
    log.start_or_resume(spec, "avg_at_n")
    log.append(RaceState(round=2).to_record())
    more = dataclasses.replace(spec, settings=dataclasses.replace(spec.settings, max_seeds=spec.settings.max_seeds + 2))
    with caplog.at_level("WARNING", logger="opsd_sweep.race.log"):
        log.start_or_resume(more, "avg_at_n")
    assert f"(max_seeds {spec.settings.max_seeds} -> {spec.settings.max_seeds + 2}); they apply from round 2 on" in caplog.text
    log.append(RaceState(round=3, phase="done", stop_reason="max_seeds: 8 seeds per config").to_record())
    caplog.clear()
    with caplog.at_level("WARNING", logger="opsd_sweep.race.log"):
        assert log.start_or_resume(spec, "avg_at_n")[0].phase == "done"
    assert "but this race has ended (max_seeds: 8 seeds per config): a finished race is not reopened" in caplog.text
    assert "group=<name>" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="opsd_sweep.race.log"):
        log.start_or_resume(spec, "avg_at_n")  # the same settings again: nothing to say
    assert "settings changed" not in caplog.text
