"""Run dirs written before a change of the run key (run/takeover.py): a rerun takes over its finished run
instead of repeating it, and a summary counts one config and seed once.

The fixture is a simulated run dir written by the last release (8c295b5), whose key left out the paths
and the knobs added since (teacher, eval.checkpoints, eval.suite, ...).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from opsd_sweep.summarize.collect import collect
from opsd_sweep.run.keys import cycle_key
from opsd_sweep.run.rundir import RunDir
from opsd_sweep.run.takeover import saved_run_config
from tests.conftest import run_sweep

FIXTURE = Path(__file__).parent / "fixtures" / "lr1e-05-clip0.05-s1-9c431698"
SWEEP = ["-m", "executor=simulate", "group=g", "learning_rate=1e-5", "seed=1"]


def earlier_run(results: Path) -> Path:
    target = results / "g" / FIXTURE.name
    shutil.copytree(FIXTURE, target)
    return target


def test_the_saved_config_of_the_last_release_loads_with_todays_schema():
    # fails when a config field is added without its old value in run/added.py
    run = saved_run_config(RunDir(FIXTURE))
    assert run is not None
    assert (run.train.teacher, run.eval.checkpoints, run.eval.suite) == ("fixed", "final", None)


def test_a_run_dir_written_before_the_anchor_was_renamed_reads_its_baseline_section_as_the_anchor():
    # the fixture's config.yaml holds `baseline:` (the published anchor's section before conf/anchor/)
    assert "\nbaseline:\n" in (FIXTURE / "config.yaml").read_text()
    run = saved_run_config(RunDir(FIXTURE))
    assert (run.anchor.label, run.anchor.mean, run.anchor.n) == ("OPSD paper recipe (Qwen3-1.7B)", 54.22, 5)
    # the anchor is no part of the run key: the rename keeps the key this dir had (computed on main before it)
    assert cycle_key(run) == "a299f40cc0ded4c6"
    assert collect([str(FIXTURE.parent)]).anchors[0]["label"] == "OPSD paper recipe (Qwen3-1.7B)"


def test_a_rerun_takes_over_the_finished_run_of_the_earlier_key_and_keeps_its_results(tmp_path, cache_dir):
    results = tmp_path / "results"
    old = earlier_run(results)
    scores = json.loads((old / "eval" / "eval.json").read_text())["metrics"]
    proc = run_sweep(SWEEP, results, cache_dir)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    dirs = [p for p in (results / "g").iterdir() if not p.name.startswith(".")]
    assert len(dirs) == 1 and dirs[0].name != old.name, dirs  # renamed to today's key, no second run
    assert f"{old.name} was written before a change of the run key" in proc.stdout
    assert "already done" in proc.stdout
    status = json.loads((dirs[0] / "status.json").read_text())
    assert status["key"][:8] == dirs[0].name[-8:] and status["earlier_key"][:8] == old.name[-8:]
    assert json.loads((dirs[0] / "eval" / "eval.json").read_text())["metrics"] == scores  # not drawn again


def test_a_summary_counts_a_config_and_seed_found_in_two_dirs_once(tmp_path, cache_dir):
    results = tmp_path / "results"
    old = earlier_run(results)
    (results / "g" / "new").mkdir()
    # the same run written again under today's key (what a rerun without the takeover would have done)
    proc = run_sweep(SWEEP + ["group=g/new"], results, cache_dir)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    collection = collect([str(results)])
    done = collection.runs[collection.runs["state"] == "done"]
    assert len(done) == 1 and done["label"].nunique() == 1
    repeated = collection.skipped[collection.skipped["state"] == "repeated"]
    assert list(repeated["path"]) == [str(old)]
    assert "counted once" in repeated["reason"].iloc[0]
