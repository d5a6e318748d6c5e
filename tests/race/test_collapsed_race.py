"""A race over real tiny cycles in which a config collapses (train.stop_on_collapse): the collapse is a finding
about the config, not a failed run. Its seeds are not replaced, the log counts them, and the summary's race
section says how many seeds collapsed and how the race judged the config."""

from __future__ import annotations

import json

import pytest

from opsd_sweep.summary import main as summary_main
from tests.conftest import run_sweep
from tests.orchestration.conftest import tiny_cache  # noqa: F401  (the fixture)

pytestmark = pytest.mark.slow

# The demo's lr=0.03 breaks the tiny model within its first 10 of 20 steps. Stopped after 3 steps it cannot
# collapse (the rule needs 2 early steps and then 2 out of band in a row): that config is the in-sweep
# baseline, named by the selector's dotted tail.
RACE = ["-m", "hydra/sweeper=race", "hydra/launcher=basic", "profile=tiny", "+sweep=demo", "group=collapse-race",
        "learning_rate=3e-2", "train.max_steps=3,20", "train.stop_on_collapse=true", "eval.n_samples=2",
        "eval.max_problems=8", "hydra.sweeper.baseline='max_steps=3'", "hydra.sweeper.min_seeds=2",
        "hydra.sweeper.max_seeds=2", "hydra.sweeper.confirm_seeds=0"]
BROKEN, BASE = "train.max_steps=20", "train.max_steps=3"


def test_a_collapsing_config_keeps_its_seeds_and_the_race_and_summary_say_so(tmp_path, tiny_cache):  # noqa: F811
    proc = run_sweep(RACE, tmp_path, tiny_cache, timeout=900)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    recs = [json.loads(line) for line in (tmp_path / "collapse-race" / "race.jsonl").read_text().splitlines()]
    assert recs[0]["baseline"] == BASE
    runs = [r for r in recs if r["type"] == "run"]
    broken = [r for r in runs if r["config"] == BROKEN]
    assert [r["state"] for r in broken] == ["collapsed", "collapsed"], broken
    assert sorted(r["seed"] for r in broken) == [1, 2]  # not replaced by fresh seeds
    steps = sorted(r["collapse_step"] for r in broken)
    assert all(1 <= s <= 10 for s in steps)
    for r in broken:  # the step is the one the trainer stopped at
        status = json.loads((tmp_path / "collapse-race" / r["run_dir"].rsplit("/", 1)[1] / "status.json").read_text())
        assert status["state"] == "collapsed" and status["collapse"]["step"] == r["collapse_step"]
    assert all(r["state"] == "done" for r in runs if r["config"] == BASE)
    drop = [r for r in recs if r.get("action") == "drop"]
    counted = f"collapsed in 2 of 2 seeds, at steps {steps[0]}, {steps[1]}"
    assert [r["config"] for r in drop] == [BROKEN]  # judged on no seed that collapsed: it leaves the race
    assert drop[0]["reason"].startswith(f"{counted}; 2 stopped there with no score: declare hydra.sweeper.collapsed_score")
    assert "collapsed at step" in output and "not replaced" in output  # the race's log says it as it happens

    summary_main([str(tmp_path / "collapse-race"), "--out", str(tmp_path / "summary"), "--no-plots"])
    report = (tmp_path / "summary" / "summary.md").read_text()
    race = report[report.index("## Race"):]
    assert f"- {BROKEN}: {counted}" in race
    assert "The race counts a collapsed seed as one of its config's seeds and does not replace it" in race
    assert "2 stopped at a collapse, 0 failed" in race
