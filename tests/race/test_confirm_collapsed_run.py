"""Confirmation runs stopped at their collapse (train.stop_on_collapse), on a real tiny confirmation. Such a run
has finished, with no score: it is not a run that "did not finish" (a rerun skips it), and the verdict may not
judge the arm on the seeds that did not collapse. Without a declared score there is no verdict and the report
says how to declare one; with --collapsed-score the collapsed runs enter at it.

Whether a tiny run collapses is the CPU's (the demo's lr=0.03 breaks the model within its first 10 of 20 steps
on the CPUs measured, but what a tiny run learns differs between CPU kernels), so the config's confirmation runs
start at step 2 with the rule's early band built (tests/premises.py): a mean completion of 100 tokens, which no
completion of rollout.max_new_tokens=24 is within 25% of. Trained on from there, each collapses at step 3."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from opsd_sweep.config import load_run_config
from opsd_sweep.confirm import plan
from opsd_sweep.cycle import locate_run
from tests.premises import fix_outcomes, start_at_band
from tests.test_confirm import run

pytestmark = pytest.mark.slow

SMALL = ["profile=tiny", "+sweep=demo", "eval.n_samples=2", "eval.max_problems=8"]
LOCKED = "eval=tiny_locked"
CONFIRM = ["--config", "lr=0.03", "--locked", LOCKED, "--seeds", "2", "--", "train.stop_on_collapse=true"]


@pytest.fixture(scope="module")
def swept(tmp_path_factory, cache_dir) -> Path:
    """The base model (seeds 1, 2) and lr=0.03 for 20 steps (seeds 1, 2, trained on through their collapse)."""
    results = tmp_path_factory.mktemp("confirm_collapse")
    where = [f"results_root={results}", f"cache_dir={cache_dir}"]
    run("opsd_sweep.evaluate", "-m", *SMALL, "train.max_steps=0", "seed=1,2", *where, cache=cache_dir)
    run("opsd_sweep", "-m", *SMALL, "learning_rate=3e-2", "train.max_steps=20", "seed=1,2", *where, cache=cache_dir)
    return results / "tiny-demo"


def start_config_runs_at_band(swept: Path, cache_dir: Path, donors: Path) -> list[Path]:
    """Build the early band into the run dirs the confirmation will run for the config (the arm's overlay, as
    confirm writes it, with each fresh seed); the folder is checked against the one confirm --report-only names."""
    planned = json.loads((swept / "confirm.json").read_text())["plan"]
    arm_dir = next(d for d in sorted(swept.glob("lr0.03-*")) if (d / "eval" / "eval.json").exists())
    saved = yaml.safe_load((arm_dir / "config.yaml").read_text())
    suite, _ = plan.suite_of(plan.tuning_benchmarks(saved), plan.locked_benchmark([LOCKED], saved))
    config, group = plan.overlay(plan.Arm("config", planned["config"], saved, [str(arm_dir)], False), suite)
    assert Path(config["results_root"]) / group == Path(planned["folders"]["config"])
    where = [f"results_root={donors}", f"cache_dir={cache_dir}"]
    seeds = ",".join(map(str, planned["seeds"]))
    run("opsd_sweep", "-m", *SMALL, "learning_rate=3e-2", "train.max_steps=2", f"seed={seeds}", *where, cache=cache_dir)
    started = []
    for seed in planned["seeds"]:
        (donor,) = (donors / "tiny-demo").glob(f"lr0.03-*-s{seed}-*")
        job = config | {"seed": seed, "force": False, "rerun_failed": False,  # (launch knobs overlay drops)
                        "train": config["train"] | {"stop_on_collapse": True}}
        run_dir = locate_run(load_run_config(job))[1].path
        start_at_band(run_dir, donor, rollout_len=100.0)
        started.append(run_dir)
    return started


def test_collapsed_confirmation_runs_withhold_the_verdict_and_are_not_called_unfinished(swept, cache_dir,
                                                                                         tmp_path):
    run("opsd_sweep.confirm", str(swept), *CONFIRM[:-2], "--report-only", cache=cache_dir, code=1)  # the plan
    started = start_config_runs_at_band(swept, cache_dir, tmp_path / "donors")
    proc = run("opsd_sweep.confirm", str(swept), *CONFIRM, cache=cache_dir, code=1)
    result = json.loads((swept / "confirm.json").read_text())
    states = [json.loads(p.read_text())["state"] for p in (swept.parent / "tiny-demo-confirm").rglob("status.json")]
    assert sorted(states) == ["collapsed", "collapsed", "done", "done"], states  # the config's 2 runs collapsed
    for run_dir in started:  # each resumed from the built band and collapsed at its first step out of it
        assert "checkpoint-2 at step 2" in (run_dir / "logs" / "train.log").read_text()
        assert json.loads((run_dir / "status.json").read_text())["collapse"]["step"] == 3
    assert result["unfinished_runs"] == [] and "did not finish" not in proc.stdout  # finished: a rerun skips them
    assert result["collapsed_runs"] == ["config seed 3", "config seed 4"]
    assert result["verdict"] is None and result["verdict_line"].startswith("NO VERDICT on tiny-arith-locked: 2 "
                                                                           "confirmation run(s) stopped at a collapse")
    assert "--collapsed-score 0" in proc.stdout
    assert "config seed 3; config seed 4: with no declared score" in (swept / "confirm.md").read_text()

    # the base model solves some of the locked set: what it draws is the CPU's, so its outcomes are fixed, half of
    # every problem's samples right (a score of 50 for both seeds)
    base_runs = [p.parent.parent for p in (swept.parent / "tiny-demo-confirm").rglob("eval/eval.json")]
    assert len(base_runs) == 2
    for run_dir in base_runs:
        evaluation = json.loads((run_dir / "eval" / "eval.json").read_text())
        fix_outcomes(run_dir / "eval" / "eval.json", [1] * len(evaluation["problems"]))
    proc = run("opsd_sweep.confirm", str(swept), "--collapsed-score", "0", *CONFIRM, cache=cache_dir)
    result = json.loads((swept / "confirm.json").read_text())
    locked = result["benchmarks"][1]
    assert locked["seeds"] == [3, 4] and locked["config_scores"] == [0.0, 0.0]
    assert locked["baseline_scores"] == [50.0, 50.0]
    assert result["verdict"] == "not confirmed"  # the base model solves some of the locked set
    assert "each enters both benchmarks at the declared score 0" in (swept / "confirm.md").read_text()
