"""`python -m opsd_sweep.confirm --report-only` on a sweep of real run dirs (opsd_sweep.testing.rundirs): before any
confirmation run exists it gives no verdict word, counts runs (not seed x benchmark pairs), says how to run
them, writes nothing beside the runs and exits 1, as a confirmation that is not complete does."""

from __future__ import annotations

import json

import numpy as np
import pytest

from opsd_sweep.testing.rundirs import draw_correct, write_run
from opsd_sweep.confirm import __main__ as confirm_cli
from opsd_sweep.confirm import report, seeds
from opsd_sweep.confirm.verdict import CONFIRMED, INCONCLUSIVE, NOT_CONFIRMED


@pytest.fixture
def sweep(tmp_path):
    """Group `default` (the composed config's group): lr 5e-06 (the baseline) and 1e-05, seeds 1-3 each."""
    rng = np.random.default_rng(0)
    difficulty = rng.normal(0, 1.5, 30)
    group = tmp_path / "default"
    for lr, shift in ((5e-6, 0.0), (1e-5, 0.6)):
        for seed in (1, 2, 3):
            write_run(group, learning_rate=lr, seed=seed, correct=draw_correct(rng, difficulty, shift, 8), rng=rng)
    return group


def test_report_only_before_any_run_gives_no_verdict_and_counts_runs(sweep, capsys):
    code = confirm_cli.main([str(sweep), "--baseline", "lr=5e-06", "--seeds", "12", "--report-only"])
    out = capsys.readouterr().out
    assert code == 1  # not complete, as a failed launch
    assert "none of the 24 confirmation runs (12 fresh seeds x 2 arms) has finished" in out
    assert "run the same command without --report-only to run them" in out
    assert "48" not in out  # 12 seeds x 2 arms x 2 benchmarks (tuning + locked) is not a count of runs
    assert not any(word.upper() + ":" in out for word in (CONFIRMED, NOT_CONFIRMED, INCONCLUSIVE))
    assert "nan" not in out
    result = json.loads((sweep / "confirm.json").read_text())
    assert result["verdict"] is None and result["verdict_line"].startswith("NO VERDICT YET")
    assert len(result["unfinished_runs"]) == 24 and "config seed 4" in result["unfinished_runs"]
    assert not (sweep.parent / "default-confirm").exists()  # report-only writes no overlay beside the runs


def test_unfinished_runs_count_each_run_once_over_its_benchmarks():
    missing = [("config", 4, "aime24"), ("config", 4, "aime25"), ("baseline", 4, "aime25"), ("baseline", 5, "aime24")]
    assert report.unfinished_runs(missing) == ["baseline seed 4", "baseline seed 5", "config seed 4"]


def test_no_verdict_line_with_some_runs_finished_says_how_many_did_not():
    line = report.no_verdict_line(3, 6, False, "aime25", False, 2)
    assert line.startswith("NO VERDICT YET on aime25: 3 of the 6 confirmation runs (3 fresh seeds x 2 arms) did "
                           "not finish")
    assert "rerun the same command" in line and "NOT from a locked benchmark: 2 run(s)" in line


def test_a_seeds_advice_above_the_cap_is_refused_before_any_run(tmp_path, capsys):
    """With no --seeds, confirm took the summary's advice however large (up to 10000 per arm): a noisy sweep's
    advice (hundreds of seeds) is refused before anything runs, naming the advised count and --seeds N."""
    rng = np.random.default_rng(0)
    difficulty = rng.normal(0, 1.5, 30)
    group = tmp_path / "default"
    for lr, shift in ((5e-6, 0.0), (1e-5, 0.6)):
        for seed in (1, 2, 3):  # a seed moves the whole run (training noise) and 2 samples per problem add more
            correct = draw_correct(rng, difficulty, shift + rng.normal(0, 0.5), 2)
            write_run(group, learning_rate=lr, seed=seed, correct=correct, rng=rng)
    with pytest.raises(SystemExit) as refused:
        # --report-only: the seed count is planned as for a real launch, and a confirm without the cap fails this
        # test by reporting 2 x hundreds of planned runs instead of launching them
        confirm_cli.main([str(group), "--baseline", "lr=5e-06", "--report-only"])
    message = str(refused.value)
    advised = int(message.split("the paired seeds advice is ")[1].split()[0])
    assert advised > seeds.MAX_ADVISED_SEEDS, message
    assert f"more than the {seeds.MAX_ADVISED_SEEDS}" in message and "--seeds N" in message
    assert "[confirm] fresh seeds" not in capsys.readouterr().out  # refused while planning the seeds
    assert not (tmp_path / "default-confirm").exists() and not (group / "confirm.json").exists()
