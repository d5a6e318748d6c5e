"""`make summary` after `make demo` (issue 48): the results root then holds two sets of problems, the sweep's
(results/tiny-demo: the tuning benchmark) and the confirmation's (results/tiny-demo-confirm/<arm>: the tuning
benchmark + the locked one, one suite). A score over other problems is another quantity, so each set is
summarised apart, in the folder of its runs, and the console and each summary.md say so; nothing is written at
the root. Two sets in one folder are refused, writing nothing. The runs are hand-built in the demo's shape."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest

from opsd_sweep.testing.rundirs import base_run, draw_correct, write_run
from opsd_sweep.summary import main

TUNING = np.random.default_rng(0).normal(0.0, 1.5, 30)
LOCKED = np.random.default_rng(1).normal(-1.0, 1.5, 20)
UNTRAINED = dataclasses.replace(base_run().train, max_steps=0)


def suite_run(group, *, learning_rate: float, seed: int, shift: float, rng, **fields):
    """A run scored on a suite of the tuning problems (t00..) and the locked ones (l00..), as confirm's are."""
    run_dir = write_run(group, learning_rate=learning_rate, seed=seed, rng=rng,
                        correct=draw_correct(rng, np.concatenate([TUNING, LOCKED]), shift, 8), **fields)
    evaluation = json.loads(run_dir.eval_json.read_text())
    for i, problem in enumerate(evaluation["problems"]):
        benchmark = "tuning" if i < TUNING.size else "locked"
        problem.update(benchmark=benchmark, id=f"{benchmark}/{benchmark[0]}{i:02d}")
    run_dir.eval_json.write_text(json.dumps(evaluation))
    return run_dir


@pytest.fixture
def demo_root(tmp_path):
    """results/: the sweep (base model + 2 learning rates x 3 seeds) and its confirmation (seeds 4-6 of the
    winner and the base model, each arm in its own folder under tiny-demo-confirm/)."""
    rng = np.random.default_rng(2)
    results = tmp_path / "results"
    for seed in (1, 2, 3):
        write_run(results / "tiny-demo", learning_rate=1e-3, seed=seed, correct=draw_correct(rng, TUNING, 0.0, 8),
                  rng=rng, train=UNTRAINED)
        for lr, shift in ((1e-2, 2.0), (3e-2, -3.0)):
            write_run(results / "tiny-demo", learning_rate=lr, seed=seed, correct=draw_correct(rng, TUNING, shift, 8),
                      rng=rng)
    for seed in (4, 5, 6):
        suite_run(results / "tiny-demo-confirm" / "lr_0.01-1a2b3c4d", learning_rate=1e-2, seed=seed, shift=2.0,
                  rng=rng)
        suite_run(results / "tiny-demo-confirm" / "base_model-5e6f7a8b", learning_rate=1e-3, seed=seed, shift=0.0,
                  rng=rng, train=UNTRAINED)
    return results


def test_a_root_of_a_sweep_and_its_confirmation_is_summarised_set_by_set(demo_root, monkeypatch, capsys):
    monkeypatch.chdir(demo_root.parent)
    main(["results", "--no-plots", "--anchor", "none"])
    out = capsys.readouterr().out
    assert "the runs under results scored 2 different sets of problems" in out
    assert ("summarised apart: results/tiny-demo/summary.md (aime24 (30), 9 runs); "
            "results/tiny-demo-confirm/summary.md (tuning (30) + locked (20), 6 runs)") in out
    assert not any((demo_root / name).exists() for name in ("runs.csv", "samples.parquet", "summary.md"))
    sweep = pd.read_csv(demo_root / "tiny-demo" / "summary.csv").set_index("label")
    assert sorted(sweep.index) == ["base model", "lr=0.01 max_steps=100", "lr=0.03 max_steps=100"]
    assert set(sweep["n"]) == {3}
    assert sweep.loc["base model", "verdict"] == "baseline"  # --baseline auto, as the demo's own summary
    confirmation = pd.read_csv(demo_root / "tiny-demo-confirm" / "summary.csv").set_index("label")
    assert sorted(confirmation.index) == ["base model", "lr=0.01 max_steps=100"] and set(confirmation["n"]) == {3}
    assert len(pd.read_csv(demo_root / "tiny-demo-confirm" / "runs.csv")) == 6
    text = (demo_root / "tiny-demo-confirm" / "summary.md").read_text()
    assert "Generated" in text and "from results/tiny-demo-confirm." in text
    assert ("> The runs under results scored 2 different sets of problems; this summary holds those in "
            "results/tiny-demo-confirm (tuning (30) + locked (20)); the other set: results/tiny-demo/summary.md "
            "(aime24 (30), 9 runs).") in text
    # each set alone gives the summary it gives inside the root
    main(["results/tiny-demo", "--no-plots", "--anchor", "none", "--out", "alone"])
    alone = pd.read_csv(demo_root.parent / "alone" / "summary.csv").set_index("label")
    pd.testing.assert_frame_equal(alone.sort_index(), sweep.sort_index())


def test_with_out_each_set_goes_to_its_folder_under_it(demo_root, tmp_path):
    main([str(demo_root), "--no-plots", "--anchor", "none", "--out", str(tmp_path / "out")])
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["tiny-demo", "tiny-demo-confirm"]
    assert (tmp_path / "out" / "tiny-demo-confirm" / "summary.csv").exists()
    assert not (demo_root / "tiny-demo" / "summary.csv").exists()


def test_two_sets_in_one_folder_are_refused_writing_nothing(demo_root, tmp_path):
    rng = np.random.default_rng(3)
    for seed in (1, 2):  # a suite run beside the sweep's runs in its own group
        suite_run(demo_root / "tiny-demo", learning_rate=2e-2, seed=seed, shift=0.0, rng=rng)
    with pytest.raises(SystemExit) as err:
        main([str(demo_root), "--no-plots", "--anchor", "none"])
    message = str(err.value)
    assert "the runs scored 2 different sets of problems" in message and "(here two sets share a folder)" in message
    assert not [p for p in demo_root.rglob("*") if p.name in ("runs.csv", "samples.parquet", "summary.csv")]
