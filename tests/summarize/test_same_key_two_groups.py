"""One config and seed run in two groups: two dirs with one run key, summarised together (real run dirs).

The run key leaves the group out, so results/g1/<slug>-<key8> and results/g2/<slug>-<key8> share it: each dir
must keep its own row and its own samples, a failed copy must not hide a finished one, and of two finished
copies the one that finished last counts; one dir seen twice (overlapping roots, a link) is one dir.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from opsd_sweep.summarize.collapses import console_line
from opsd_sweep.summarize.collect import collect
from opsd_sweep.testing.rundirs import base_run, draw_correct, write_run

DIFFICULTY = np.linspace(-2.5, 2.5, 10)
K = 4
SAMPLES = len(DIFFICULTY) * K  # of one run


def _ended(run, at: str):
    run.status.write_text(json.dumps(json.loads(run.status.read_text()) | {"ended_at": at}))
    return run


def _finished(group, seed, ended_at, shift=0.0):
    rng = np.random.default_rng([seed, int(shift * 100)])
    correct = draw_correct(rng, DIFFICULTY, shift, K)
    return _ended(write_run(group, learning_rate=1e-5, seed=seed, correct=correct, rng=rng), ended_at)


def _failed(group, seed):
    evaluation = dataclasses.replace(base_run().eval, n_samples=K)  # the finished copies' K: one key
    run = write_run(group, learning_rate=1e-5, seed=seed, correct=None, state="failed", eval=evaluation)
    return _ended(run, "2026-01-01T00:00:00+00:00")


def _correct_of(run) -> list[bool]:
    """The correctness of every sample in a run's eval.json, problem by problem."""
    return [s["correct"] for p in json.loads(run.eval_json.read_text())["problems"] for s in p["samples"]]


def _samples_of(collection, run) -> list[bool]:
    run_id = collection.runs.set_index("run_dir").loc[str(run.path), "run_id"]
    own = collection.samples[collection.samples["run_id"] == run_id]
    return own.sort_values(["problem_index", "sample"])["correct"].tolist()


def test_a_failed_copy_in_another_group_does_not_hide_the_finished_one(tmp_path):
    g1, g2 = tmp_path / "results" / "g1", tmp_path / "results" / "g2"
    failed = _failed(g1, seed=1)
    other_seed = _finished(g1, seed=2, ended_at="2026-01-02T00:00:00+00:00")
    finished = _finished(g2, seed=1, ended_at="2026-01-03T00:00:00+00:00", shift=1.0)
    assert failed.path.name == finished.path.name  # one key, two groups

    c = collect([str(g1), str(g2)])
    runs = c.runs.set_index("run_dir")
    assert runs["run_id"].is_unique and len(runs) == 3
    assert runs.loc[str(failed.path), "state"] == "failed" and not runs.loc[str(failed.path), "counts"]
    assert runs.loc[str(finished.path), "counts"]
    assert sorted(runs.loc[runs["counts"].astype(bool), "cfg.seed"]) == [1, 2]  # seed 1 counts once, from g2
    assert list(c.skipped["path"]) == [str(failed.path)] and list(c.skipped["state"]) == ["failed"]
    # each dir keeps its own samples; the failed one has none
    assert _samples_of(c, finished) == _correct_of(finished)
    assert _samples_of(c, other_seed) == _correct_of(other_seed)
    assert _samples_of(c, failed) == [] and len(c.samples) == 2 * SAMPLES


@pytest.mark.parametrize("later_group", ["g1", "g2"])
@pytest.mark.parametrize("root_order", [("g1", "g2"), ("g2", "g1")])
def test_of_two_finished_copies_the_later_counts_and_the_other_is_listed(tmp_path, later_group, root_order):
    results = tmp_path / "results"
    earlier_group = "g2" if later_group == "g1" else "g1"
    ended = {earlier_group: "2026-01-02T00:00:00+00:00", later_group: "2026-01-03T00:00:00+00:00"}
    copies = {group: _finished(results / group, seed=1, ended_at=ended[group], shift=shift)
              for group, shift in (("g1", 0.0), ("g2", 1.0))}
    later, earlier = copies[later_group], copies[earlier_group]

    c = collect([str(results / group) for group in root_order])
    assert list(c.runs["run_dir"]) == [str(later.path)]
    assert list(c.skipped["path"]) == [str(earlier.path)] and list(c.skipped["state"]) == ["repeated"]
    assert str(later.path) in c.skipped["reason"].iloc[0]
    # only the counted copy's samples, unmixed with its twin's
    assert _samples_of(c, later) == _correct_of(later) and len(c.samples) == SAMPLES


def test_one_dir_under_overlapping_roots_counts_once_beside_its_twin_in_another_group(tmp_path):
    results = tmp_path / "results"
    failed = _failed(results / "g1", seed=1)
    finished = _finished(results / "g2", seed=1, ended_at="2026-01-03T00:00:00+00:00")
    link = tmp_path / "also-results"
    link.symlink_to(results)  # the same dirs under another name: a distinct path string, one dir

    c = collect([str(results / "*"), str(results), str(link / "g2"), str(link / "g1")])
    found = sorted(Path(p).resolve() for p in c.runs["run_dir"])
    assert found == [failed.path.resolve(), finished.path.resolve()]
    assert c.runs["run_id"].is_unique and c.runs.set_index("state").loc["done", "counts"]
    assert [Path(p).resolve() for p in c.skipped["path"]] == [failed.path.resolve()]
    assert list(c.skipped["state"]) == ["failed"]
    assert c.samples.groupby("run_id").size().tolist() == [SAMPLES]


def test_the_collapse_line_counts_a_seed_run_in_two_groups_once(tmp_path):
    """A seed that failed after 3 steps in g1 and finished in g2 is one judged seed, not one judged and one not."""
    g1, g2 = tmp_path / "results" / "g1", tmp_path / "results" / "g2"
    evaluation = dataclasses.replace(base_run().eval, n_samples=K)
    early = write_run(g1, learning_rate=1e-5, seed=1, correct=None, state="failed", steps=3, eval=evaluation)
    _ended(early, "2026-01-01T00:00:00+00:00")
    _finished(g1, seed=2, ended_at="2026-01-02T00:00:00+00:00")
    _finished(g2, seed=1, ended_at="2026-01-03T00:00:00+00:00")

    line = console_line(collect([str(g1), str(g2)]).runs)
    assert line.endswith("no collapse in 2 seeds"), line
