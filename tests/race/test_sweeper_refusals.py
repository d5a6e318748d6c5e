"""`hydra/sweeper=race` refuses a race it cannot run before anything runs: the real
`python -m opsd_sweep -m hydra/sweeper=race ...` in a subprocess exits non-zero with the problem and "Nothing was
run or written." (no traceback) and leaves no file; the metric-scope rule is also checked on composed configs."""

from __future__ import annotations

import pytest

from tests.conftest import compose, run_sweep

RACE = ["-m", "hydra/sweeper=race", "executor=simulate", "learning_rate=1e-5,2e-5", "group=r1"]


def refused(tmp_path, cache_dir, extra: list[str]) -> str:
    """Run the race with `extra`; assert it was refused cleanly with nothing on disk; its stderr."""
    results = tmp_path / "results"
    proc = run_sweep([*RACE, *extra], results, cache_dir, timeout=120)
    assert proc.returncode != 0, proc.stdout[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "Nothing was run or written." in proc.stderr, proc.stderr[-3000:]
    written = [p for p in results.rglob("*") if p.is_file()] if results.exists() else []
    assert not written, written
    return proc.stderr


@pytest.mark.parametrize(("extra", "message"), [
    (["hydra.sweeper.baseline='learning_rate=5e-1'"], "hydra.sweeper.baseline='learning_rate=5e-1' matches 0 configs"),
    (["hydra.sweeper.baseline='clip=0.05'"], "'clip' is not a key that differs between the configs"),
    (["hydra.sweeper.min_seeds=1"], "min_seeds=1 must be >= 2"),
    (["hydra.sweeper.alpha=5"], "alpha=5.0 must be in (0, 1)"),
    (["hydra.sweeper.pairing=seeds"], "pairing='seeds' must be one of ['none', 'seed']"),
    (["hydra.sweeper.max_seeds=2"], "max_seeds=2 must be >= min_seeds=3"),
    (["seed=1,2"], "the race chooses seeds: remove seed=..."),
    (["group=a,b"], "one race per results folder"),
])
def test_a_bad_race_setting_is_refused_before_any_run(tmp_path, cache_dir, extra, message):
    assert message in refused(tmp_path, cache_dir, extra)


def test_every_problem_is_named_at_once(tmp_path, cache_dir):
    stderr = refused(tmp_path, cache_dir, ["hydra.sweeper.baseline='learning_rate=5e-1'", "hydra.sweeper.alpha=5"])
    assert "matches 0 configs" in stderr and "alpha=5.0 must be in (0, 1)" in stderr


@pytest.mark.parametrize(("extra", "said"), [
    (["eval.n_samples=auto", "hydra.sweeper.metric=maj_at_n"], ["eval.n_samples=auto", "majority vote"]),
    (["eval.allocation=neyman", "hydra.sweeper.metric=maj_at_n"], ["eval.allocation=neyman", "majority vote"]),
    (["eval.n_samples=4,11", "hydra.sweeper.metric=maj_at_n"],
     ["eval.n_samples=4 in learning_rate=1e-05 eval.n_samples=4", "eval.n_samples=11 in"]),
    (["eval.n_samples=auto", "hydra.sweeper.metric=pass_at_4"], ["pass@4 needs at least 4 samples", "smallest K 2"]),
    (["eval.allocation=neyman", "eval.allocation_floor=3", "hydra.sweeper.metric=pass_at_4"],
     ["eval.allocation_floor=3", "smallest K 3"]),
    (["eval.n_samples=3", "hydra.sweeper.metric=pass_at_4"], ["pass@4 needs at least 4 samples", "eval.n_samples=3"]),
])
def test_a_metric_whose_meaning_changes_with_k_is_refused(tmp_path, cache_dir, extra, said):
    stderr = refused(tmp_path, cache_dir, extra)
    metric = extra[-1].split("=", 1)[1]
    assert f"hydra.sweeper.metric={metric} cannot decide this race" in stderr
    assert "hydra.sweeper.metric=avg_at_n" in stderr  # the fix
    assert all(text in stderr for text in said), stderr


def test_a_refused_first_batch_leaves_no_race_log(tmp_path, cache_dir):
    """The launcher's own refusal (here its max_parallel) of a new race's first batch: no race.jsonl stays."""
    stderr = refused(tmp_path, cache_dir, ["hydra.launcher.max_parallel=0"])
    assert "hydra.launcher.max_parallel=0 must be >= 1" in stderr


def evals(*grid: list[str]) -> dict:
    return {" ".join(overrides): compose(list(overrides)).eval for overrides in grid}


def test_the_metric_scope_rule_on_composed_configs():
    from hydra_plugins.opsd_race_sweeper._metric_scope import race_metric_problem

    auto = evals(["eval.n_samples=auto"])
    assert race_metric_problem("avg_at_n", auto) is None  # the same quantity at any K
    assert race_metric_problem("pass_at_2", auto) is None  # 2 <= min(auto_k.first=4, auto_k.low=2)
    assert "pass@3" in race_metric_problem("pass_at_3", auto)
    assert "majority vote" in race_metric_problem("maj_at_n", auto)
    assert "majority vote" in race_metric_problem("aime24.maj_at_n", auto)  # a suite's metric, by its name
    fixed = evals(["learning_rate=1e-5"], ["learning_rate=2e-5"])
    assert race_metric_problem("maj_at_n", fixed) is None  # one K, uniform: one quantity
    assert race_metric_problem("pass_at_12", fixed) is None and race_metric_problem("pass_at_13", fixed)
    assert race_metric_problem("maj_at_n", evals(["eval.n_samples=4"], ["eval.n_samples=11"]))
