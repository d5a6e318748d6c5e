"""Issue 40, item 1: eval.n_samples=auto. The K rule on hand-built pools (checked against design.choose_k with
inputs computed here), then real simulated sweeps: the first runs use eval.auto_k.first, a later run the pool's
cost-optimal K with its reason and sources, a resumed run its recorded K; the key holds the declared setting;
bad values are refused before any work."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from opsd_sweep.config import AutoKConfig, ConfigError, load_run_config
from opsd_sweep.cycle import locate_run, run_cycle
from opsd_sweep.evaluate.sampling_plan import PoolRun, choose_k, plan_path, sample_gpu_seconds
from opsd_sweep.inference import design
from opsd_sweep.run.keys import cycle_key
from opsd_sweep.run.rundir import RunDir
from tests.conftest import compose, run_sweep

AUTO = AutoKConfig(first=4, low=2, high=16, min_runs=4)
PRICED = ["executor=simulate", "eval.n_samples=auto", "simulate.train_gpu_hours=0.15"]


def pool_run(run_id: str, config: str, correct, k: int, train_h=0.15, eval_h=0.2) -> PoolRun:
    correct = np.asarray(correct)
    return PoolRun(run_id, config, k, tuple(f"p{i}" for i in range(correct.size)), correct,
                   np.full(correct.size, k), None, train_h, eval_h)


# --- the rule ------------------------------------------------------------------------------------

def test_below_min_runs_k_is_first_and_the_reason_counts_the_pool():
    pool = [pool_run(f"r{i}", "a", [1, 2, 3], 4) for i in range(3)]
    choice = choose_k(pool, AUTO)
    assert choice["k"] == 4 and choice["pool_runs"] == 3 and choice["source"] == ["r0", "r1", "r2"]
    assert "3 of eval.auto_k.min_runs = 4 pool runs with GPU-hours per phase" in choice["reason"]


def test_runs_without_gpu_hours_are_no_price_and_the_reason_says_so():
    pool = [pool_run(f"r{i}", "a", [1, 2, 3], 4, train_h=0.0, eval_h=0.0) for i in range(6)]
    choice = choose_k(pool, AUTO)
    assert choice["k"] == 4 and choice["pool_runs"] == 0 and "no GPU-hours measured" in choice["reason"]


def test_without_a_config_of_two_runs_there_is_no_run_variance():
    pool = [pool_run(f"r{i}", f"config{i}", [1, 2, 3], 4) for i in range(5)]
    choice = choose_k(pool, AUTO)
    assert choice["k"] == 4 and "no config" in choice["reason"]


def test_a_priced_pool_gives_design_choose_k_of_its_pooled_components():
    # two configs, runs at K = 4 and K = 8; 3 problems
    a = [pool_run("a1", "a", [1, 2, 3], 4, eval_h=0.20), pool_run("a2", "a", [3, 4, 2], 4, eval_h=0.24),
         pool_run("a3", "a", [0, 1, 4], 4, eval_h=0.22)]
    b = [pool_run("b1", "b", [8, 2, 5], 8, eval_h=0.40), pool_run("b2", "b", [4, 6, 7], 8, eval_h=0.44)]
    choice = choose_k(a + b, AUTO)
    score = lambda r: (r.correct / r.k).mean()  # noqa: E731
    eval_var = lambda r: ((r.correct / r.k) * (1 - r.correct / r.k) / (r.k - 1)).sum() / 9  # noqa: E731
    ss = sum(((np.array([score(r) for r in g]) - np.mean([score(r) for r in g])) ** 2).sum() for g in (a, b))
    pooled_var = ss / (2 + 1)
    train_var = pooled_var - np.mean([eval_var(r) for r in a + b])
    k_ref = 4  # median of 4, 4, 4, 8, 8
    expected = design.choose_k(np.mean([eval_var(r) * r.k for r in a + b]) / k_ref, k_ref, train_var,
                               0.15, np.mean([r.eval_h / r.k for r in a + b]) * k_ref, (2, 16))
    assert choice["k"] == expected.k and choice["reason"].startswith(expected.reason)
    assert choice["pool_runs"] == 5 and choice["source"] == ["a1", "a2", "a3", "b1", "b2"]


def test_the_eval_step_model_prices_a_sample_by_its_length_squared():
    # 20k tokens: 5.56 ms / 64 per token plus 27 ms per million KV tokens read over the sequence, ~7.1 s
    assert float(sample_gpu_seconds(20_000)) == pytest.approx(5.56e-3 / 64 * 2e4 + 27e-9 * 2e4 * 20_001 / 2)
    assert 6.5 < float(sample_gpu_seconds(20_000)) < 7.5
    assert float(sample_gpu_seconds(40_000)) > 3 * float(sample_gpu_seconds(20_000))


# --- real runs -----------------------------------------------------------------------------------

def simulated(results: Path, seed: int, *extra: str):
    return load_run_config(compose([*PRICED, f"results_root={results}", "group=g", f"seed={seed}", *extra]))


def eval_of(run) -> dict:
    return json.loads(locate_run(run)[1].eval_json.read_text())


def test_first_runs_use_first_then_the_pools_k_and_a_resume_keeps_its_k(tmp_path):
    runs = [simulated(tmp_path, seed) for seed in range(1, 7)]
    for run in runs:
        assert run_cycle(run)["state"] == "done"
    evals = [eval_of(run) for run in runs]
    assert [e["n_samples"] for e in evals[:4]] == [4, 4, 4, 4]
    assert all(e["k_choice"]["reason"].startswith("eval.auto_k.first = 4") for e in evals[:4])
    fifth, sixth = evals[4]["k_choice"], evals[5]["k_choice"]
    assert fifth["pool_runs"] == 4 and sixth["pool_runs"] == 5
    assert fifth["source"] == [locate_run(r)[0] for r in runs[:4]]  # the earlier runs, by run id
    assert not sixth["reason"].startswith("eval.auto_k.first") and 2 <= sixth["k"] <= 16
    assert evals[5]["n_samples"] == sixth["k"] and all(len(p["samples"]) == sixth["k"] for p in evals[5]["problems"])
    # the plan was written once in the run dir, before the eval, and eval.json records it
    run_dir = locate_run(runs[5])[1]
    assert json.loads(plan_path(run_dir).read_text())["k"] == sixth["k"]
    # resume: its eval is lost, more runs finish (the pool would say something else now); it keeps its K
    run_dir.update_status(state="failed")
    run_dir.eval_json.unlink()
    for seed in (7, 8):
        run_cycle(simulated(tmp_path, seed))
    assert run_cycle(simulated(tmp_path, 6, "rerun_failed=true"))["state"] == "done"
    assert eval_of(runs[5])["k_choice"] == sixth and eval_of(runs[5])["n_samples"] == sixth["k"]


def test_the_key_holds_the_declared_setting_not_the_resolved_k(tmp_path):
    auto, twelve = simulated(tmp_path, 1), simulated(tmp_path, 1, "eval.n_samples=12")
    assert cycle_key(auto) != cycle_key(twelve)
    assert cycle_key(simulated(tmp_path, 1, "eval.auto_k.first=3")) != cycle_key(auto)
    # auto_k is no part of a run that does not use it: earlier runs keep their keys
    assert cycle_key(simulated(tmp_path, 1, "eval.n_samples=12", "eval.auto_k.first=3")) == cycle_key(twelve)
    run_cycle(auto)
    plan = json.loads(plan_path(locate_run(auto)[1]).read_text())
    assert plan["declared"]["n_samples"] == "auto" and locate_run(auto)[0] == cycle_key(auto)


def test_simulated_runs_without_a_cost_model_keep_first_and_say_why(tmp_path):
    runs = [simulated(tmp_path, seed, "simulate.train_gpu_hours=null") for seed in range(1, 6)]
    for run in runs:
        run_cycle(run)
    last = eval_of(runs[-1])["k_choice"]
    assert last["k"] == 4 and "no GPU-hours measured" in last["reason"]


def test_a_hydra_sweep_with_auto_k_prices_its_later_runs(tmp_path, cache_dir):
    proc = run_sweep(["-m", *PRICED, "group=auto", "eval.auto_k.min_runs=3", "seed=1,2,3,4,5",
                      "hydra.launcher.max_parallel=1"], tmp_path, cache_dir)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    choices = sorted((json.loads((d / "eval/eval.json").read_text())["k_choice"]
                      for d in (tmp_path / "auto").iterdir() if (d / "eval/eval.json").exists()),
                     key=lambda c: c["pool_runs"])
    assert [c["pool_runs"] for c in choices] == [0, 1, 2, 3, 4]  # one after another, each seeing the earlier
    assert [c["k"] for c in choices[:3]] == [4, 4, 4]
    priced = choices[3:]
    assert all(not c["reason"].startswith("eval.auto_k.first") and 2 <= c["k"] <= 16 for c in priced)
    assert "eval plan K = 4 (eval.auto_k.first = 4" in proc.stdout


# --- refused before any work ---------------------------------------------------------------------

@pytest.mark.parametrize("override, said", [
    ("eval.n_samples=-3", "eval.n_samples=-3 must be a whole number >= 1 (e.g. eval.n_samples=12) or auto"),
    ("eval.n_samples=abc", "eval.n_samples='abc' must be a whole number >= 1"),
    ("eval.allocation=foo", "eval.allocation='foo' is not one of ['uniform', 'neyman']"),
    ("eval.allocation_floor=0", "eval.allocation_floor=0 must be >= 1"),
    ("eval.auto_k.low=5", "eval.auto_k.low=5 and eval.auto_k.high=16 must satisfy 1 <= low <= high"),
])
def test_bad_values_are_named_with_their_fix(override, said):
    overrides = [override, "eval.n_samples=auto", "eval.auto_k.high=4"] if "auto_k" in override else [override]
    with pytest.raises(ConfigError) as err:
        load_run_config(compose(overrides))
    assert said.replace("high=16", "high=4") in str(err.value)


def test_a_sweep_with_bad_values_is_refused_before_any_run_dir(tmp_path, cache_dir):
    proc = run_sweep(["-m", "executor=simulate", "group=bad", "eval.n_samples=abc", "eval.allocation=foo",
                      "eval.allocation_floor=0", "seed=1,2"], tmp_path, cache_dir)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "eval.n_samples='abc'" in out and "eval.allocation='foo'" in out and "eval.allocation_floor=0" in out
    assert not (tmp_path / "bad").exists() or not any(p for p in (tmp_path / "bad").iterdir()
                                                       if not p.name.startswith("."))


def test_the_checkpoint_race_refuses_a_sampling_plan():
    for plan in ("eval.n_samples=auto", "eval.allocation=neyman"):
        with pytest.raises(ConfigError, match="the race's rounds need one fixed K for every problem"):
            load_run_config(compose(["eval.checkpoints=race", plan]))


def test_run_dir_of_a_plain_run_has_no_plan(tmp_path):
    run = simulated(tmp_path, 1, "eval.n_samples=12")
    run_cycle(run)
    assert not plan_path(RunDir(locate_run(run)[1].path)).exists() and "k_choice" not in eval_of(run)


def test_a_forced_rerun_plans_its_samples_again_from_todays_pool(tmp_path):
    """The case that must NOT reuse: force=true reruns a finished run from scratch, so its plan (K = first, made
    when the pool was empty) is not kept: it is planned again from the pool as it is now."""
    runs = [simulated(tmp_path, seed) for seed in range(1, 7)]
    for run in runs:
        assert run_cycle(run)["state"] == "done"
    first = eval_of(runs[0])["k_choice"]
    assert first["k"] == 4 and first["pool_runs"] == 0
    assert run_cycle(simulated(tmp_path, 1, "force=true"))["state"] == "done"
    again = eval_of(runs[0])["k_choice"]
    assert again["pool_runs"] == 5 and not again["reason"].startswith("eval.auto_k.first")
    assert json.loads(plan_path(locate_run(runs[0])[1]).read_text())["k"] == again["k"] == eval_of(runs[0])["n_samples"]
