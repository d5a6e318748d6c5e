"""`python -m opsd_sweep.status --json` labels a run from the summary row of its own dir, not by its run key.

The run key leaves the group out, so one config and seed run in two groups share it (a/<slug>-<key8> and
b/<slug>-<key8>), and a summary's runs.csv lists the second dir it meets under '<group>/<key>'. Looking a run up
by its key alone gave the run in b/ the label and verdict of a/'s summary, which never read it, and let a/'s
summary count b/'s runs as its own when it asked whether it is stale. Real run dirs (opsd_sweep.testing.rundirs), real
summaries; the times are set, not waited for."""

from __future__ import annotations

import json
import os
import shutil
from datetime import datetime, timezone

import numpy as np
import pytest

from opsd_sweep.testing.rundirs import draw_correct, write_run
from opsd_sweep.run.rundir import atomic_write_json
from opsd_sweep.status import main as status_main
from opsd_sweep.summary import main as summary_main

RAN, A_SUMMARY, B_RAN, ROOT_SUMMARY = (datetime(2026, 1, d, tzinfo=timezone.utc) for d in (1, 2, 3, 4))
DIFFICULTY = np.random.default_rng(3).normal(0, 1.5, 30)
SHARED = "b/lr1e-05-clip0.05-s1"  # the run of b/ whose key a/'s lr=1e-05 seed 1 also has


def run_ended(folder, lr, seed, shift, when: datetime, **fields):
    rng = np.random.default_rng([seed, int(lr * 1e7), int(shift * 10) + 100])
    run_dir = write_run(folder, learning_rate=lr, seed=seed, correct=draw_correct(rng, DIFFICULTY, shift, 8),
                        rng=rng, **fields)
    atomic_write_json(run_dir.status, {**json.loads(run_dir.status.read_text()), "ended_at": when.isoformat()})
    return run_dir


def summarise(folder, when: datetime, *flags: str) -> None:
    summary_main([str(folder), "--anchor", "none", "--no-plots", *flags])
    os.utime(folder / "summary.csv", (when.timestamp(), when.timestamp()))


@pytest.fixture
def results(tmp_path, capsys):
    """a/: lr 5e-06 and 1e-05 (clip 0.05), seeds 1-3, summarised in a/ (labels 'lr=...'). b/, later: lr 1e-05
    seed 1 again (a/'s key, another group) and lr 1e-05 clip 0.1, seeds 1-2; no summary of its own yet."""
    for lr, shift in ((5e-6, 0.0), (1e-5, 0.5)):
        for seed in (1, 2, 3):
            run_ended(tmp_path / "a", lr, seed, shift, RAN)
    summarise(tmp_path / "a", A_SUMMARY, "--baseline", "lr=5e-06")
    shared = run_ended(tmp_path / "b", 1e-5, 1, -1.5, B_RAN)
    assert (tmp_path / "a" / shared.path.name).is_dir()  # one key, two groups
    for seed in (1, 2):
        run_ended(tmp_path / "b", 1e-5, seed, -1.0, B_RAN, clip=0.1)
    capsys.readouterr()
    return tmp_path


def status(root, capsys) -> dict:
    assert status_main([str(root), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def run_of(out: dict, prefix: str) -> dict:
    return next(r for r in out["runs"] if r["run"].startswith(prefix))


def config_of(out: dict, prefix: str) -> dict:
    return next(c for c in out["configs"] if c["config"].startswith(prefix + "#"))


def test_a_run_no_summary_read_has_no_label_though_its_key_is_listed_elsewhere(results, capsys):
    out = status(results, capsys)
    assert run_of(out, "a/lr1e-05-clip0.05-s1")["label"] == "lr=1e-05"  # a/'s summary read this one
    assert run_of(out, SHARED)["label"] is None  # same key, but a/'s summary never read b/
    shared = config_of(out, "b/lr1e-05-clip0.05")
    assert (shared["label"], shared["verdict"]) == (None, None)


def test_a_run_takes_the_label_of_the_summary_that_lists_its_dir(results, capsys):
    """The root's summary reads a/ and b/: its runs.csv lists b/'s copy under 'b/<key>' (a/'s copy took the
    key first, then was left out as repeated: b/'s finished later) and labels it by lr and clip."""
    summarise(results, ROOT_SUMMARY, "--baseline", "lr=5e-06 clip=0.05")
    capsys.readouterr()
    listed = {row.split(",")[0] for row in (results / "runs.csv").read_text().splitlines()[1:]}
    key = json.loads(next(results.glob(f"{SHARED}-*/status.json")).read_text())["key"]
    assert f"b/{key}" in listed and key not in listed
    out = status(results, capsys)
    assert run_of(out, SHARED)["label"] == "lr=1e-05 clip=0.05"  # the root summary's label, not a/'s 'lr=1e-05'
    root_verdicts = {v["label"]: v["verdict"] for s in out["summaries"] if s["path"] == "summary.csv"
                     for v in s["verdicts"]}
    assert config_of(out, "b/lr1e-05-clip0.05")["verdict"] == root_verdicts["lr=1e-05 clip=0.05"]
    assert run_of(out, "a/lr1e-05-clip0.05-s1")["label"] == "lr=1e-05"  # its group's own summary first


def test_a_run_in_another_group_does_not_make_a_summary_stale(results, capsys):
    summaries = {s["path"]: s for s in status(results, capsys)["summaries"]}
    assert summaries["a/summary.csv"]["runs_ended_since"] == 0  # b/'s 3 runs ended later, but are not a/'s


def test_labels_survive_a_moved_results_root(results, tmp_path_factory, capsys):
    """runs.csv holds the dirs where the summary read them; after the root moves, a run is matched by its path
    under the root (b/'s copy of the key still takes no label from a/'s summary)."""
    moved = tmp_path_factory.mktemp("elsewhere") / "results"
    shutil.move(results, moved)
    out = status(moved, capsys)
    assert run_of(out, "a/lr1e-05-clip0.05-s1")["label"] == "lr=1e-05"
    assert run_of(out, "a/lr5e-06-clip0.05-s2")["label"] == "lr=5e-06"
    assert run_of(out, SHARED)["label"] is None
    summaries = {s["path"]: s for s in out["summaries"]}
    assert summaries["a/summary.csv"]["runs_ended_since"] == 0
