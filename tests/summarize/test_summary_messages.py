"""What the summary says when it cannot summarise (issue 48): no progress bar before the error of a missing root,
the empty root's folders as a person writes them (no Python list), and a --baseline error that offers a
selector for each config, the untrained base model's max_steps=0 among them, and never describes it by a
learning rate it was not trained with."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from opsd_sweep.testing.rundirs import base_run, draw_correct, write_run
from opsd_sweep.summary import main

DIFFICULTY = np.random.default_rng(0).normal(0.0, 1.5, 30)


def test_a_missing_root_is_refused_before_any_progress_bar(tmp_path, capsys):
    (tmp_path / "there").mkdir()
    with pytest.raises(SystemExit) as err:
        main([str(tmp_path / "nowhere"), str(tmp_path / "there")])
    assert str(err.value).startswith(f"no results root at {tmp_path / 'nowhere'}: give the folder a sweep wrote")
    assert capsys.readouterr().err == ""  # no "reading run dirs: 0it" bar drawn first


def test_an_empty_root_names_its_folders_as_given(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    with pytest.raises(SystemExit) as err:
        main(["a", "b"])
    assert str(err.value).startswith("no readable run directories under a, b (0 skipped)")
    assert "[" not in str(err.value) and capsys.readouterr().err == ""


@pytest.fixture
def with_base_model(tmp_path):
    rng = np.random.default_rng(1)
    untrained = dataclasses.replace(base_run().train, max_steps=0)
    for seed in (1, 2, 3):  # the base model's config holds the default learning rate, which it never used
        write_run(tmp_path / "g", learning_rate=1e-5, seed=seed, correct=draw_correct(rng, DIFFICULTY, 0.0, 8),
                  rng=rng, train=untrained)
        for lr in (2e-5, 3e-5):
            write_run(tmp_path / "g", learning_rate=lr, seed=seed, correct=draw_correct(rng, DIFFICULTY, 0.5, 8),
                      rng=rng)
    return tmp_path


def test_a_baseline_that_picks_no_config_offers_one_for_each(with_base_model):
    with pytest.raises(SystemExit) as err:
        main([str(with_base_model), "--out", str(with_base_model / "out"), "--no-plots", "--anchor", "none",
              "--baseline", "lr=1e-05"])
    message = str(err.value)
    assert "--baseline='lr=1e-05' matches 0 configs" in message  # the base model was not trained at 1e-05
    assert "base model (learning_rate=unused (no training))" in message and "learning_rate=1e-05" not in message
    assert ("A --baseline for each config: max_steps=0 (base model); 'lr=2e-05 max_steps=100'; "
            "'lr=3e-05 max_steps=100'") in message


@pytest.mark.parametrize("choice, label", [("max_steps=0", "base model"),
                                           ("lr=2e-05 max_steps=100", "lr=2e-05 max_steps=100")])
def test_each_offered_baseline_picks_its_config(with_base_model, choice, label):
    out = with_base_model / "out"
    main([str(with_base_model), "--out", str(out), "--no-plots", "--anchor", "none", "--baseline", choice])
    table = pd.read_csv(out / "summary.csv").set_index("label")
    assert table.loc[label, "verdict"] == "baseline"
