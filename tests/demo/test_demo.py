"""The demo's world in CI: the default warm start makes a competent teacher and a fallible student on
held-out problems, and a reduced demo (one learning rate, two seeds, the base model three times, avg@4) runs to a verdict."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from opsd_sweep.config import RunConfig, load_run_config
from opsd_sweep.evaluate.evaluator import evaluate
from opsd_sweep.summary import main as summary_main
from opsd_sweep.tiny import ensure_tiny_assets
from tests.summarize.test_scripts import check_all_scripts
from tests.conftest import REPO, compose


@pytest.fixture(scope="module")
def tiny(cache_dir) -> RunConfig:
    """The default tiny profile; its world is built once per session and shared with the whole suite."""
    run = load_run_config(compose(["profile=tiny", f"cache_dir={cache_dir}", "eval.n_samples=4"]))
    ensure_tiny_assets(run.tiny)
    return run


def teacher_view(run: RunConfig, path: Path) -> RunConfig:
    """An eval config whose prompts are the trainer's teacher prompts: problem + reference solution."""
    rows = [json.loads(line) for line in Path(run.eval.path).read_text().splitlines()]
    t = run.train
    path.write_text("".join(json.dumps({"id": r["id"], "answer": r["answer"],
                                        "problem": t.teacher_prompt.format(problem=r["problem"], solution=r["solution"])})
                            + "\n" for r in rows))
    overrides = [f"eval.path={path}", "eval.prompt='{problem}'", f"eval.thinking={t.teacher_thinking}"]
    return load_run_config(compose(["profile=tiny", f"cache_dir={Path(run.cache_dir)}", "eval.n_samples=4", *overrides]))


def test_warm_start_makes_a_competent_teacher_and_a_fallible_student_on_held_out_problems(tiny, tmp_path):
    student = evaluate(tiny, None, tmp_path / "student")
    teacher = evaluate(teacher_view(tiny, tmp_path / "teacher.jsonl"), None, tmp_path / "teacher")
    assert student["n_problems"] == teacher["n_problems"] == tiny.tiny.n_eval  # the held-out problems
    s, t = student["metrics"]["avg_at_n"], teacher["metrics"]["avg_at_n"]
    assert t >= 85, f"teacher (reference in context) avg@4 {t:.1f}: the warm start should make it nearly always right"
    assert 15 <= s <= 70, f"student avg@4 {s:.1f}: it should solve part of the problems, leaving room to grow"
    assert t - s >= 25, (t, s)


def run_module(module: str, *args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", module, "-m", *args], cwd=REPO, text=True, capture_output=True,
                          env=dict(os.environ, PYTHONUNBUFFERED="1"), timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


@pytest.mark.slow
def test_reduced_demo_runs_to_verdicts_and_opsd_beats_the_base_model(tiny, tmp_path):
    where = [f"results_root={tmp_path}", f"cache_dir={Path(tiny.cache_dir)}", "eval.n_samples=4"]
    # three evaluations of the base model (6 s each): with two, its SD has one degree of freedom, and a
    # Welch interval on 1 + 1 df spans +-12.7 SE whatever the difference
    run_module("opsd_sweep.evaluate", "profile=tiny", "+sweep=demo", "train.max_steps=0", "seed=1,2,3", *where)
    run_module("opsd_sweep", "profile=tiny", "+sweep=demo", "learning_rate=1e-2", "seed=1,2", *where)
    # no --baseline: as `make summary` after `make demo`, auto picks the untrained base model; the anchor
    # is the one the runs were configured with (tiny's)
    summary_main([str(tmp_path / "tiny-demo"), "--out", str(tmp_path / "summary")])
    table = pd.read_csv(tmp_path / "summary/summary.csv")
    assert len(table) == 2 and sorted(table["n"]) == [2, 3]
    # the base model's evaluations read no data and name no checkpoint of a cycle: that is no input
    # "edited in place" to name in the labels (the labels once read 'lr=0.01 ... checkpoint=nan#9b2d5b46 ...')
    assert sorted(table["label"]) == ["base model", "lr=0.01 max_steps=20"], table["label"].tolist()
    base = table[table["verdict"] == "baseline"].iloc[0]
    opsd = table[table["verdict"] != "baseline"].iloc[0]
    assert opsd["delta_baseline"] > 20 and opsd["verdict"] == "better", table.to_string()
    assert {"ci_low", "ci_high", "baseline_low", "baseline_high", "delta_anchor"} <= set(table.columns)
    assert base["mean"] < opsd["mean"]
    assert opsd["delta_anchor"] == pytest.approx(opsd["mean"] - tiny.anchor.mean)
    assert list((tmp_path / "summary/plots").glob("*.png"))
    check_all_scripts(tmp_path / "tiny-demo", tmp_path / "analysis", "max_steps=0", "lr=0.01")  # analysis/*.py
