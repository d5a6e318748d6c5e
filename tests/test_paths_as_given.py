"""Paths spelled as the user gave the results root (issue 48): summary.md writes them from the roots it was given,
and so do confirm.md and status's table (they printed absolute paths); a confirmation's runs are named for
the suite they score (they printed the sweep's one benchmark)."""

from __future__ import annotations

import dataclasses

from opsd_sweep.testing.rundirs import base_run, write_run
from opsd_sweep.config import to_dict
from opsd_sweep.confirm import plan, report
from opsd_sweep.status import main as status


def test_status_titles_its_table_with_the_root_as_given(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")
    write_run(tmp_path / "results" / "g", learning_rate=1e-5, seed=1, correct=None)
    status(["results"])
    out = capsys.readouterr().out
    assert "runs under results" in out and str(tmp_path) not in out
    status([str(tmp_path / "results")])  # given absolute, shown absolute
    assert f"runs under {tmp_path / 'results'}" in capsys.readouterr().out


def arm(tmp_path) -> plan.Arm:
    run_dir = write_run(tmp_path / "results" / "g", learning_rate=1e-5, seed=1, correct=None).path
    config = to_dict(dataclasses.replace(base_run(), group="g", results_root=str(tmp_path / "results")))
    return plan.Arm("config", "lr=1e-05", config, [str(run_dir)], False)


def test_a_confirmation_run_is_named_for_the_suite_it_scores(tmp_path):
    tuning = plan.tuning_benchmarks(arm(tmp_path).config)
    locked = {"name": "aime25", "path": "yentinglin/aime_2025", "split": "train"}
    suite, _ = plan.suite_of(tuning, locked)
    config, group = plan.overlay(arm(tmp_path), suite)
    assert list(tuning) == ["aime24"] and arm(tmp_path).config["eval"]["name"] == "aime24"
    assert config["eval"]["name"] == "aime24 + aime25"  # what the evaluator prints and eval.json's dataset say
    assert group.startswith("g-confirm/lr_1e-05-")


def result(results_dir: str, folders: dict[str, str]) -> dict:
    """confirm's result dict as confirm/__main__.py builds it (the parts confirm.md reads)."""
    return {"verdict_line": "INCONCLUSIVE: ...", "metric": "avg_at_n", "level": 0.95, "sweep_estimate": {},
            "benchmarks": [], "locked": {"locked": True, "name": "aime25", "overrides": "eval=aime25"},
            "plan": {"config": "lr=2e-05", "baseline": "base model", "results_dir": results_dir,
                     "chosen_how": "the best mean", "baseline_how": "auto", "seeds": [4, 5, 6],
                     "seeds_how": "declared", "largest_sweep_seed": 3, "folders": folders}}


def test_confirm_md_names_the_runs_from_the_results_dir_as_given(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results" / "g").mkdir(parents=True)
    # confirm's folders are absolute (the overlay's results_root is resolved)
    folders = {role: str(tmp_path / "results" / "g-confirm" / f"{role}-1a2b3c4d") for role in ("config", "baseline")}
    text = report.markdown(result("results/g", folders))
    assert "- Sweep: results/g (metric avg_at_n)" in text
    assert "- Runs: results/g-confirm/config-1a2b3c4d and results/g-confirm/baseline-1a2b3c4d" in text
    assert str(tmp_path) not in text
    assert "- Runs: results/g-confirm/config-1a2b3c4d" in report.markdown(result("results", folders))
    given_absolute = report.markdown(result(str(tmp_path / "results" / "g"), folders))
    assert f"- Runs: {folders['config']} and {folders['baseline']}" in given_absolute
