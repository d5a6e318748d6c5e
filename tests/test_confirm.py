"""The locked confirmation stage (python -m opsd_sweep.confirm): the verdict on hand-made score arrays, the
plan's pure parts, the tiny world's locked set, and (slow) a confirmation of a real tiny sweep: fresh seeds,
a benchmark the sweep saw named as not locked, a rerun that starts no new cycle."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy import stats as sps

from opsd_sweep.confirm import plan
from opsd_sweep.confirm.verdict import (CONFIRMED, INCONCLUSIVE, NOT_CONFIRMED, paired_difference, verdict,
                                        verdict_line)
from opsd_sweep.tiny import all_problems, locked_problems, make_datasets
from tests.conftest import REPO

# --- the verdict on hand-made scores ---------------------------------------------------------------


def test_verdict_reads_the_paired_interval():
    assert verdict(0.1, 3.0) == CONFIRMED
    assert verdict(0.0, 3.0) == INCONCLUSIVE  # a lower bound of exactly 0 does not exclude "no gain"
    assert verdict(-1.0, 3.0) == INCONCLUSIVE
    assert verdict(-3.0, 0.0) == NOT_CONFIRMED  # no improvement is inside the interval
    assert verdict(-3.0, -0.5) == NOT_CONFIRMED
    assert verdict(float("nan"), float("nan")) == INCONCLUSIVE  # fewer than 2 pairs


def test_paired_interval_matches_scipy_and_pairing_removes_shared_seed_noise():
    base = np.array([40.0, 50.0, 60.0, 45.0])  # seed noise shared by both arms
    config = base + np.array([2.0, 3.0, 2.5, 3.5])
    diff = paired_difference(config, base, 0.95)
    ref = sps.ttest_rel(config, base)
    low, high = ref.confidence_interval(0.95)
    assert diff.n == 4 and diff.delta == pytest.approx(2.75)
    assert (diff.paired_low, diff.paired_high, diff.paired_p) == pytest.approx((low, high, ref.pvalue))
    welch = sps.ttest_ind(config, base, equal_var=False)
    assert (diff.welch_low, diff.welch_high) == pytest.approx(tuple(welch.confidence_interval(0.95)))
    assert diff.welch_p == pytest.approx(welch.pvalue)
    assert verdict(diff.paired_low, diff.paired_high) == CONFIRMED  # paired: a sure +2.75
    assert diff.welch_low < 0  # unpaired, the seeds' spread hides it
    assert diff.correlation > 0.99


def test_worse_config_is_not_confirmed_and_a_wide_one_is_inconclusive():
    worse = paired_difference(np.array([30.0, 31.0, 29.0]), np.array([35.0, 35.5, 34.0]))
    assert verdict(worse.paired_low, worse.paired_high) == NOT_CONFIRMED
    wide = paired_difference(np.array([50.0, 40.0, 58.0]), np.array([45.0, 47.0, 44.0]))
    assert wide.paired_low < 0 < wide.paired_high
    assert verdict(wide.paired_low, wide.paired_high) == INCONCLUSIVE


def test_degenerate_pairs():
    one = paired_difference(np.array([50.0]), np.array([40.0]))
    assert one.n == 1 and one.delta == 10 and one.paired_low != one.paired_low  # nan: no interval
    assert verdict(one.paired_low, one.paired_high) == INCONCLUSIVE
    same = paired_difference(np.array([50.0, 60.0]), np.array([48.0, 58.0]))  # every difference +2: SD 0
    assert (same.paired_low, same.paired_high, same.paired_p) == (2.0, 2.0, 0.0)
    assert verdict(same.paired_low, same.paired_high) == CONFIRMED
    with pytest.raises(ValueError):
        paired_difference(np.array([1.0, 2.0]), np.array([1.0]))


def test_verdict_line_says_when_the_benchmark_was_not_locked():
    diff = paired_difference(np.array([50.0, 52.0, 51.0]), np.array([45.0, 46.0, 47.0]))
    locked = verdict_line(CONFIRMED, "aime25", diff, True, 0, "avg_at_n")
    assert locked.startswith("CONFIRMED: config - baseline on aime25") and "NOT from a locked" not in locked
    seen = verdict_line(CONFIRMED, "aime25", diff, False, 6, "avg_at_n")
    assert "NOT from a locked benchmark: 6 run(s) of the sweep evaluated aime25" in seen


# --- the plan's pure parts -------------------------------------------------------------------------


def test_fresh_seeds_start_above_the_sweep():
    assert plan.fresh_seeds(3, 3) == [4, 5, 6]
    with pytest.raises(plan.ConfirmError, match="at least 2"):
        plan.fresh_seeds(3, 1)


def test_sweep_roots_leave_out_confirmation_folders(tmp_path):
    for name in ("tiny-demo", "tiny-demo-confirm", ".hidden"):
        (tmp_path / name).mkdir()
    assert plan.sweep_roots(tmp_path) == [str(tmp_path / "tiny-demo")]
    assert plan.sweep_roots(tmp_path / "tiny-demo") == [str(tmp_path / "tiny-demo")]


def test_suite_adds_the_locked_benchmark_unless_it_is_a_tuning_one(tmp_path):
    heldout = {"name": "tiny-arith-heldout", "path": str(tmp_path / "eval.jsonl"), "split": "train"}
    locked = {"name": "tiny-arith-locked", "path": str(tmp_path / "locked.jsonl"), "split": "train"}
    suite, name = plan.suite_of({"tiny-arith-heldout": heldout}, locked)
    assert name == "tiny-arith-locked" and list(suite) == ["tiny-arith-heldout", "tiny-arith-locked"]
    suite, name = plan.suite_of({"tiny-arith-heldout": heldout}, {**heldout, "name": "local"})  # same path
    assert name == "tiny-arith-heldout" and list(suite) == ["tiny-arith-heldout"]


def test_locked_benchmark_composes_an_eval_group_and_keeps_only_its_dataset():
    locked = plan.locked_benchmark(["eval=aime25"], {"tiny": None, "eval": {}})
    assert locked == {"name": "aime25", "path": "yentinglin/aime_2025", "split": "train", "problem_field": "problem",
                      "answer_field": "answer", "id_field": None}
    tiny = plan.locked_benchmark(["eval=tiny_locked"], {"tiny": {"dir": "/w/tiny"}, "eval": {}})
    assert tiny["path"] == "/w/tiny/locked.jsonl" and tiny["name"] == "tiny-arith-locked"
    with pytest.raises(plan.ConfirmError, match="no eval group"):
        plan.locked_benchmark(["eval.n_samples=4"], {})
    with pytest.raises(plan.ConfirmError, match="suite"):
        plan.locked_benchmark(["eval=math_suite"], {})


# --- the tiny world's locked set -------------------------------------------------------------------


def test_tiny_locked_set_is_disjoint_deterministic_and_made_of_known_facts():
    locked = locked_problems()
    assert locked == locked_problems() and len(locked) >= 20
    train, held_out = make_datasets(112, 32, seed=0)
    used = {p["problem"] for p in all_problems()} | {p["problem"] for p in train + held_out}
    assert not {p["problem"] for p in locked} & used
    assert len({p["id"] for p in locked}) == len(locked)
    for row in locked:
        a, bc = row["problem"].removesuffix("=?").split("+")
        b, c = map(int, bc.split("*"))
        assert int(row["answer"]) == int(a) + b * c


# --- a real tiny sweep, confirmed ------------------------------------------------------------------


def run(module: str, *args: str, cache: Path, code: int = 0) -> subprocess.CompletedProcess:
    env = dict(os.environ, OPSD_CACHE=str(cache), PYTHONUNBUFFERED="1")
    proc = subprocess.run([sys.executable, "-m", module, *args], cwd=REPO, text=True, capture_output=True, env=env,
                          timeout=900, check=False)
    assert proc.returncode == code, proc.stdout[-4000:] + proc.stderr[-4000:]
    return proc


SMALL = ["profile=tiny", "+sweep=demo", "train.max_steps=4", "train.save_steps=4", "eval.n_samples=2"]


@pytest.fixture(scope="module")
def swept(tmp_path_factory, cache_dir) -> Path:
    """A reduced demo: the base model (seeds 1, 2) and OPSD at lr 1e-2 (seeds 1, 2), 4 steps, avg@2."""
    results = tmp_path_factory.mktemp("confirm_results")
    where = [f"results_root={results}", f"cache_dir={cache_dir}"]
    run("opsd_sweep.evaluate", "-m", *SMALL, "train.max_steps=0", "seed=1,2", *where, cache=cache_dir)
    run("opsd_sweep", "-m", *SMALL, "learning_rate=1e-2", "seed=1,2", *where, cache=cache_dir)
    return results / "tiny-demo"


@pytest.fixture(scope="module")
def confirmed(swept, cache_dir) -> tuple[Path, subprocess.CompletedProcess]:
    proc = run("opsd_sweep.confirm", str(swept), "--locked", "eval=tiny_locked", "--seeds", "2", cache=cache_dir)
    return swept, proc


def confirm_run_dirs(swept: Path) -> list[Path]:
    return sorted(p.parent for p in (swept.parent / "tiny-demo-confirm").rglob("status.json"))


@pytest.mark.slow
def test_confirm_runs_fresh_seeds_of_both_arms_on_the_locked_and_tuning_sets(confirmed):
    swept, proc = confirmed
    result = json.loads((swept / "confirm.json").read_text())
    sweep_seeds = {yaml.safe_load((d / "config.yaml").read_text())["seed"] for d in swept.iterdir()
                   if (d / "config.yaml").exists()}
    assert sweep_seeds == {1, 2}
    assert result["plan"]["seeds"] == [3, 4] and result["plan"]["largest_sweep_seed"] == 2
    dirs = confirm_run_dirs(swept)
    configs = [yaml.safe_load((d / "config.yaml").read_text()) for d in dirs]
    assert len(dirs) == 4 and sorted(c["seed"] for c in configs) == [3, 3, 4, 4]
    assert not {c["seed"] for c in configs} & sweep_seeds  # really fresh
    assert all(json.loads((d / "status.json").read_text())["state"] == "done" for d in dirs)
    assert sorted(c["train"]["max_steps"] for c in configs) == [0, 0, 4, 4]  # the base model and the trained config
    assert all(list(c["eval"]["suite"]) == ["tiny-arith-heldout", "tiny-arith-locked"] for c in configs)
    assert result["plan"]["config"] == "lr=0.01 max_steps=4" and result["plan"]["baseline"] == "base model"
    assert result["locked"]["locked"] and result["from_locked_benchmark"]
    assert [b["role"] for b in result["benchmarks"]] == ["tuning", "locked"]
    assert all(b["difference"]["n"] == 2 and b["seeds"] == [3, 4] for b in result["benchmarks"])
    assert result["verdict"] in (CONFIRMED, NOT_CONFIRMED, INCONCLUSIVE)
    assert result["sweep_estimate"]["selected"] and result["sweep_estimate"]["n"] == 2
    assert result["verdict"].upper() + ": config - baseline on tiny-arith-locked" in proc.stdout
    assert "selected" in (swept / "confirm.md").read_text()
    assert "is locked: no run of the sweep evaluated it" in proc.stdout


def attempt(run_dir: Path) -> tuple:
    """What a new attempt changes: the attempt count (a cycle's) and the start time (any run's)."""
    status = json.loads((run_dir / "status.json").read_text())
    return status.get("attempts"), status.get("started_at")


@pytest.mark.slow
def test_a_rerun_of_the_same_confirmation_starts_no_new_cycle(confirmed, cache_dir):
    swept, _ = confirmed
    before = {d: attempt(d) for d in confirm_run_dirs(swept)}
    proc = run("opsd_sweep.confirm", str(swept), "--locked", "eval=tiny_locked", "--seeds", "2", cache=cache_dir)
    after = {d: attempt(d) for d in confirm_run_dirs(swept)}
    assert after == before and len(after) == 4  # the same runs, not one attempted again
    assert json.loads((swept / "confirm.json").read_text())["plan"]["seeds"] == [3, 4]  # its own runs take no seeds
    assert "[confirm] fresh seeds [3, 4]" in proc.stdout


@pytest.mark.slow
def test_a_benchmark_the_sweep_evaluated_is_named_as_not_locked(swept, cache_dir):
    heldout = yaml.safe_load(next(swept.glob("lr*/config.yaml")).read_text())["eval"]["path"]
    proc = run("opsd_sweep.confirm", str(swept), "--locked", f"eval=local eval.path={heldout}", "--seeds", "2",
               "--report-only", cache=cache_dir, code=1)  # 1: its runs (another suite) are not run yet
    assert "eval=local" in proc.stdout and "is not locked: 4 run(s) of this sweep evaluated" in proc.stdout
    result = json.loads((swept / "confirm.json").read_text())
    assert result["locked"]["locked"] is False and result["locked"]["seen_runs"] == 4
    assert result["from_locked_benchmark"] is False
    assert "NOT from a locked benchmark" in result["verdict_line"]
    assert "is not locked: 4 run(s) of this sweep evaluated" in (swept / "confirm.md").read_text()
