"""A race over real tiny cycles in which a config collapses (train.stop_on_collapse): the collapse is a finding
about the config, not a failed run. Its seeds are not replaced, the log counts them, and the summary's race
section says how many seeds collapsed and how the race judged the config."""

from __future__ import annotations

import json

import pytest

from opsd_sweep.summary import main as summary_main
from tests.conftest import run_sweep
from tests.orchestration.conftest import tiny_cache  # noqa: F401  (the fixture)
from tests.premises import run_dir_of, start_at_band

pytestmark = pytest.mark.slow

# The demo's lr=0.03 for 20 steps is the config that collapses. Whether a tiny run collapses is the CPU's (what
# it learns differs between CPU kernels), so both of its seeds start at step 2 with the rule's early band built
# (tests/premises.py): steps 1-2 of a 2-step donor run with a mean completion of 100 tokens, which no completion
# of rollout.max_new_tokens=24 is within 25% of. Out of band from step 3 on, each collapses at step 3 (stopped
# after the rule's patience, 5 steps). Stopped after 3 steps a run cannot collapse (the rule needs 2 early steps
# and then 5 out of band in a row): that config is the in-sweep baseline, named by the selector's dotted tail.
RUN = ["profile=tiny", "+sweep=demo", "group=collapse-race", "learning_rate=3e-2", "train.stop_on_collapse=true",
       "eval.n_samples=2", "eval.max_problems=8"]
RACE = ["-m", "hydra/sweeper=race", "hydra/launcher=basic", *RUN, "train.max_steps=3,20",
        "hydra.sweeper.baseline='max_steps=3'", "hydra.sweeper.min_seeds=2", "hydra.sweeper.max_seeds=2",
        "hydra.sweeper.confirm_seeds=0"]
BROKEN, BASE = "train.max_steps=20", "train.max_steps=3"
BAND = {"rollout_len": 100.0}


def test_a_collapsing_config_keeps_its_seeds_and_the_race_and_summary_say_so(tmp_path, tiny_cache):  # noqa: F811
    donors = tmp_path / "donors"
    proc = run_sweep(["-m", *RUN, "train.max_steps=2", "seed=1,2"], donors, tiny_cache)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for donor in (donors / "collapse-race").glob("lr*"):
        seed = int(donor.name.rsplit("-", 2)[1].removeprefix("s"))
        start_at_band(run_dir_of([*RUN, BROKEN, f"seed={seed}"], tmp_path, tiny_cache), donor, **BAND)
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
    assert steps == [3, 3]
    for r in broken:  # the step is the one the trainer stopped at, resumed from the built band
        run_dir = tmp_path / "collapse-race" / r["run_dir"].rsplit("/", 1)[1]
        status = json.loads((run_dir / "status.json").read_text())
        assert status["state"] == "collapsed" and status["collapse"]["step"] == r["collapse_step"]
        assert "checkpoint-2 at step 2" in (run_dir / "logs/train.log").read_text()
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
