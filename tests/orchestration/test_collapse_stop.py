"""Collapse on real tiny cycles: a run found collapsed is stopped at its collapse (train.stop_on_collapse),
recorded as collapsed and never retrained; a run that did not collapse trains to the end unflagged; the
summary says both.

Whether a tiny run collapses is the CPU's: the demo's lr=0.03 breaks the model on the CPUs measured
(BENCHMARKS.md), but what a tiny run learns differs between CPU kernels. So each run here starts at step 2 with
the early band of its collapse rule built (tests/premises.py: a donor's checkpoint of step 2 and its steps 1-2
with the band's signals replaced), and its steps from 3 on, all trained here, are judged against a band that
none of them can be in (lr=0.03) or that holds every value they can log (lr=0.01)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from opsd_sweep.summary import main as summary_main
from tests.conftest import run_sweep
from tests.orchestration.conftest import phase_starts, status
from tests.premises import run_dir_of, start_at_band

pytestmark = pytest.mark.slow

# The demo's cycles (20 steps of 8 problems, tiny profile), evaluated with 2 samples on 8 problems; the rule's
# rollout_len band is 100% of the early mean either way (rollout.max_new_tokens=24: lengths 1 to 24).
RULE = ["profile=tiny", "+sweep=demo", "seed=1", "train.stop_on_collapse=true", "train.collapse.length_band=1.0"]
RUNS = [*RULE, "eval.n_samples=2", "eval.max_problems=8"]
DEMO = ["-m", *RUNS, "learning_rate=1e-2,3e-2"]
# early steps with a mean completion of 0.25 tokens: every step is more than 100% away (none is shorter than 1);
# a mean of 12 tokens, a capped share of 0.75 and a KL of 1e9: no step leaves 0-24 tokens, a share of 1, 1.5e9
BANDS = {0.03: {"rollout_len": 0.25}, 0.01: {"rollout_len": 12.0, "rollout_cap_frac": 0.75, "kl_true": 1e9}}
STOPPED_AT = 7  # out of band from step 3, stopped after 5 steps in a row (the recipe's patience)


def by_lr(results) -> dict[float, object]:
    return {0.01 if "lr0.01" in d.name else 0.03: d for d in (results / "tiny-demo").glob("lr*")}


def test_a_run_found_collapsed_is_stopped_at_its_collapse_and_one_that_is_not_trains_on(tmp_path, tiny_cache):
    donors = tmp_path / "donors"  # 2 steps of each learning rate: the checkpoints the runs resume from
    proc = run_sweep(["-m", *RULE, "learning_rate=1e-2,3e-2", "train.max_steps=2", "eval.n_samples=1",
                      "eval.max_problems=1"], donors, tiny_cache)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for lr, donor in by_lr(donors).items():
        start_at_band(run_dir_of([*RUNS, f"learning_rate={lr}"], tmp_path, tiny_cache), donor, **BANDS[lr])

    proc = run_sweep(DEMO, tmp_path, tiny_cache)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]  # a collapse is a finding, not a failure
    runs = by_lr(tmp_path)
    assert all("checkpoint-2 at step 2" in (d / "logs/train.log").read_text() for d in runs.values())  # resumed
    broken, healthy = status(runs[0.03]), status(runs[0.01])
    assert healthy["state"] == "done" and healthy["collapse"] is None
    assert broken["state"] == "collapsed" and broken["collapse"]["step"] == 3, broken
    assert "rollout_len" in broken["collapse"]["reason"]
    steps = [json.loads(line)["step"] for line in (runs[0.03] / "train/metrics.jsonl").open()]
    assert steps == list(range(1, STOPPED_AT + 1)) and (runs[0.03] / f"train/checkpoint-{STOPPED_AT}").is_dir()
    assert not (runs[0.03] / "eval/eval.json").exists() and phase_starts(runs[0.03], "evaluate") == 0  # GPU time saved
    assert len(list((runs[0.01] / "train/metrics.jsonl").open())) == 20 and (runs[0.01] / "eval/eval.json").exists()

    again = run_sweep(DEMO, tmp_path, tiny_cache)  # a rerun does not retrain it
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert f"skip {runs[0.03].name}: collapsed at step 3" in again.stdout
    assert phase_starts(runs[0.03], "train") == 1 and status(runs[0.03])["state"] == "collapsed"

    summary_main([str(tmp_path / "tiny-demo"), "--baseline", "none", "--anchor", "none", "--out",
                  str(tmp_path / "summary")])
    table = pd.read_csv(tmp_path / "summary/runs.csv").set_index("cfg.learning_rate")
    assert table.loc[0.03, "collapse_step"] == 3  # the summary's rule = the trainer's
    assert pd.isna(table.loc[0.01, "collapse_step"])
    report = (tmp_path / "summary/summary.md").read_text()
    assert "- lr=0.03: collapsed in 1 of 1 seed, at step 3" in report
    assert "- lr=0.01: no collapse in 1 seed" in report
    assert "stopped at its collapse (train.stop_on_collapse): no score" in report  # why it is left out of the verdicts
