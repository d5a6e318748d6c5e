"""Collapse on real tiny cycles: the demo's lr=0.03 breaks the model and is stopped early
(train.stop_on_collapse), recorded as collapsed and never retrained; lr=0.01 trains to the end unflagged;
the summary says both."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from opsd_sweep.summary import main as summary_main
from tests.conftest import run_sweep
from tests.orchestration.conftest import phase_starts, status

pytestmark = pytest.mark.slow

# The demo's cycles (20 steps of 8 problems, tiny profile), evaluated with 2 samples on 8 problems.
DEMO = ["-m", "profile=tiny", "+sweep=demo", "learning_rate=1e-2,3e-2", "seed=1", "train.stop_on_collapse=true",
        "eval.n_samples=2", "eval.max_problems=8"]


def by_lr(results) -> dict[float, object]:
    return {0.01 if "lr0.01" in d.name else 0.03: d for d in (results / "tiny-demo").glob("lr*")}


def test_the_demo_lr_that_breaks_the_model_is_stopped_at_its_collapse_and_the_other_is_not(tmp_path, tiny_cache):
    proc = run_sweep(DEMO, tmp_path, tiny_cache)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]  # a collapse is a finding, not a failure
    runs = by_lr(tmp_path)
    broken, healthy = status(runs[0.03]), status(runs[0.01])
    assert healthy["state"] == "done" and healthy["collapse"] is None
    assert broken["state"] == "collapsed" and broken["collapse"]["step"] <= 10, broken  # early, of 20 steps
    steps = [json.loads(line)["step"] for line in (runs[0.03] / "train/metrics.jsonl").open()]
    assert len(steps) < 20 and (runs[0.03] / f"train/checkpoint-{steps[-1]}").is_dir()  # its GPU time saved
    assert not (runs[0.03] / "eval/eval.json").exists() and phase_starts(runs[0.03], "evaluate") == 0

    again = run_sweep(DEMO, tmp_path, tiny_cache)  # a rerun does not retrain it
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert f"skip {runs[0.03].name}: collapsed at step {broken['collapse']['step']}" in again.stdout
    assert phase_starts(runs[0.03], "train") == 1 and status(runs[0.03])["state"] == "collapsed"

    summary_main([str(tmp_path / "tiny-demo"), "--baseline", "none", "--anchor", "none", "--out",
                  str(tmp_path / "summary")])
    table = pd.read_csv(tmp_path / "summary/runs.csv").set_index("cfg.learning_rate")
    assert table.loc[0.03, "collapse_step"] == broken["collapse"]["step"]  # the summary's rule = the trainer's
    assert pd.isna(table.loc[0.01, "collapse_step"])
    report = (tmp_path / "summary/summary.md").read_text()
    assert f"- lr=0.03: collapsed in 1 of 1 seed, at step {broken['collapse']['step']}" in report
    assert "- lr=0.01: no collapse in 1 seed" in report
    assert "stopped at its collapse (train.stop_on_collapse): no score" in report  # why it is left out of the verdicts
