"""`python -m opsd_sweep.status --json` scopes each summary to the runs it read: a group's summary.csv is made
stale only by runs under its own roots (not by a confirmation's runs in <group>-confirm/ beside it), and a
config's verdict comes from its group's own summary, not from a newer summary of the whole root. Real run dirs
(opsd_sweep.testing.rundirs), real summaries; the times are set, not waited for."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone

import numpy as np
import pytest

from opsd_sweep.testing.rundirs import draw_correct, write_run
from opsd_sweep.run.rundir import atomic_write_json
from opsd_sweep.status import main as status_main
from opsd_sweep.summary import main as summary_main

RAN, GROUP_SUMMARY, ROOT_SUMMARY, LATER = (datetime(2026, 1, d, tzinfo=timezone.utc) for d in (1, 2, 3, 4))


def run_ended(rng, difficulty, folder, lr, seed, shift, when: datetime) -> None:
    run_dir = write_run(folder, learning_rate=lr, seed=seed, correct=draw_correct(rng, difficulty, shift, 8), rng=rng)
    atomic_write_json(run_dir.status, {**json.loads(run_dir.status.read_text()), "ended_at": when.isoformat()})


def summarise(root, when: datetime, *flags: str) -> None:
    summary_main([str(root), "--anchor", "none", "--no-plots", *flags])
    os.utime(root / "summary.csv", (when.timestamp(), when.timestamp()))


@pytest.fixture
def results(tmp_path, capsys):
    """default/: lr 5e-06 (its baseline) and 1e-05, seeds 1-3, summarised; then a root summary against
    lr=1e-05; then confirmation-like runs in default-confirm/ (seeds 4, 5), all ended after both summaries."""
    rng = np.random.default_rng(3)
    difficulty = rng.normal(0, 1.5, 30)
    group = tmp_path / "default"
    for lr, shift in ((5e-6, 0.0), (1e-5, 0.5)):
        for seed in (1, 2, 3):
            run_ended(rng, difficulty, group, lr, seed, shift, RAN)
    summarise(group, GROUP_SUMMARY, "--baseline", "lr=5e-06")
    summarise(tmp_path, ROOT_SUMMARY, "--baseline", "lr=1e-05")
    for seed in (4, 5):
        run_ended(rng, difficulty, tmp_path / "default-confirm" / "arm", 1e-5, seed, 0.5, LATER)
    capsys.readouterr()
    return tmp_path


def status(root, capsys) -> dict:
    assert status_main([str(root), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_runs_beside_a_group_do_not_make_its_summary_stale(results, capsys):
    summaries = {s["path"]: s for s in status(results, capsys)["summaries"]}
    assert summaries["default/summary.csv"]["runs_ended_since"] == 0  # the 2 runs of default-confirm/ are not its
    assert summaries["summary.csv"]["runs_ended_since"] == 2  # the root's summary read default-confirm/ too


def test_a_run_in_the_group_still_makes_its_summary_stale(results, capsys):
    rng = np.random.default_rng(9)
    run_ended(rng, rng.normal(0, 1.5, 30), results / "default", 1e-5, 4, 0.5, LATER)
    summaries = {s["path"]: s for s in status(results, capsys)["summaries"]}
    assert summaries["default/summary.csv"]["runs_ended_since"] == 1


def test_a_group_reports_its_own_summarys_verdicts(results, capsys):
    out = status(results, capsys)
    configs = {c["config"].split("#")[0]: c for c in out["configs"]}
    base, trained = configs["default/lr5e-06-clip0.05"], configs["default/lr1e-05-clip0.05"]
    assert base["verdict"] == "baseline"  # default/summary.csv's, not the newer root summary's
    root = {v["label"]: v["verdict"] for v in
            next(s for s in out["summaries"] if s["path"] == "summary.csv")["verdicts"]}
    assert root[base["label"]] != "baseline"  # the root's summary, against lr=1e-05, says otherwise
    group = {v["label"]: v["verdict"] for v in
             next(s for s in out["summaries"] if s["path"] == "default/summary.csv")["verdicts"]}
    assert trained["verdict"] == group[trained["label"]]
    confirm = configs["default-confirm/arm/lr1e-05-clip0.05"]
    assert (confirm["label"], confirm["verdict"]) == (None, None)  # newer than every summary: none speaks for it
