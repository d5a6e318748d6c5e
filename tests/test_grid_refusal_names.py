"""Issue 48, item (b): a refused grid names, for each problem, the overrides it comes from and every job it hits; a
job with two problems is listed under both, never only under another job's message."""

from __future__ import annotations

from hydra_plugins.opsd_local_gpus._grid import describe_problems, name_jobs, problems_of
from opsd_sweep.config import ConfigError
from tests.conftest import run_sweep

GRID = [["profile=tiny", "learning_rate=-1", "seed=-1"], ["profile=tiny", "learning_rate=-1", "seed=1"],
        ["profile=tiny", "learning_rate=0.001", "seed=-1"], ["profile=tiny", "learning_rate=0.001", "seed=1"]]


def test_each_problem_of_a_config_error_is_its_own():
    err = ConfigError("invalid run config:\n  - learning_rate=-1.0 must be > 0\n  - seed=-1 must be in [0, 4294967295]")
    assert problems_of(err) == ["learning_rate=-1.0 must be > 0", "seed=-1 must be in [0, 4294967295]"]
    assert problems_of(ValueError("one problem\nover two lines")) == ["one problem\nover two lines"]


def test_jobs_are_named_by_the_overrides_they_share_that_not_every_job_has():
    assert name_jobs([0, 1], GRID) == "learning_rate=-1 (#0, #1)"
    assert name_jobs([0, 2], GRID) == "seed=-1 (#0, #2)"
    assert name_jobs([3], GRID) == "#3 learning_rate=0.001 seed=1"
    assert name_jobs([0, 3], GRID) == "#0 learning_rate=-1 seed=-1, #3 learning_rate=0.001 seed=1"
    assert name_jobs([0, 1, 2, 3], GRID) == "every job (#0, #1, #2, #3)"
    assert name_jobs([0], GRID[:1]) == "#0 profile=tiny learning_rate=-1 seed=-1"  # a grid of one: all its overrides
    assert name_jobs([5, 6], [["a=1"], ["a=2"], ["a=2"]], initial_job_idx=4) == "a=2 (#5, #6)"  # a later batch


def test_the_count_is_of_jobs_not_of_problems():
    text = describe_problems({"p": ["learning_rate=-1 (#0, #1)"], "q": ["seed=-1 (#0, #2)"]}, 4, refused=3)
    assert text.splitlines()[0] == "the sweep was not started: 3 of 4 jobs cannot run."


def test_a_job_with_two_problems_is_named_under_each(tmp_path, cache_dir):
    proc = run_sweep(["-m", "executor=simulate", "group=names", "learning_rate=-1,1e-3", "seed=-1,1"], tmp_path,
                     cache_dir, timeout=120)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    assert "the sweep was not started: 3 of 4 jobs cannot run." in output
    assert "* learning_rate=-1 (#0, #1):\n    learning_rate=-1.0 must be > 0" in output, output
    assert "* seed=-1 (#0, #2):\n    seed=-1 must be in [0, 4294967295]" in output, output
    assert "invalid run config" not in output  # each problem on its own, not one job's whole message
