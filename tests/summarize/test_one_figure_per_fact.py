"""One figure per fact in summary.md (issue 48). On the demo the seeds advice said "eval SD 1.17 at K = 8" while the
Noise table gave the config an eval-sampling SD of 2.34 (the advice's was capped at the run-to-run SD, silently),
and it priced collapses at a 50% rate no config had (0 of 3 seeds of one config pooled with 3 of 3 of another).
Now the advice's eval SD names the runs it is of and says when it is capped, collapses are priced per config,
and a config the Noise table and its plot leave out is named with the reason. The runs are hand-built with
deterministic correctness (no tiny run's learning decides a premise)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

from opsd_sweep.testing.rundirs import base_run, draw_correct, write_run
from opsd_sweep.summarize.collect import collect
from opsd_sweep.summarize.config_stats import analyse
from opsd_sweep.summary import main, parse_args
from tests.summarize.test_what_counts import collapsed_seed

K, PROBLEMS = 8, 30
COLLAPSED_K = 12  # tests.summarize.test_what_counts.collapsed_seed scores a collapsed seed 0 on 12 samples


def solved(counts: list[int], k: int = K) -> np.ndarray:
    """(PROBLEMS, k) correctness with counts[i] of problem i's k samples right."""
    return np.array([[j < c for j in range(k)] for c in counts])


def nearly_alike(root, lr: float, right: int) -> None:
    """3 seeds that solve `right` of K samples of every problem but one sample apart: run scores 1/240 apart, far
    less than K-sample eval noise predicts."""
    for seed, nudge in ((1, 0), (2, 1), (3, -1)):
        write_run(root / "g", learning_rate=lr, seed=seed, correct=solved([right + nudge] + [right] * (PROBLEMS - 1)))


def summary_of(root, *flags) -> tuple[str, pd.DataFrame, pd.DataFrame]:
    out = root / "out"
    main([str(root), "--out", str(out), "--anchor", "none", "--no-plots", *flags])
    return ((out / "summary.md").read_text(), pd.read_csv(out / "summary.csv").set_index("label"),
            pd.read_csv(out / "runs.csv"))


def seeds_line(text: str, start: str) -> str:
    section = text.split("## How many seeds", 1)[1].split("\n## ", 1)[0]
    [line] = [line for line in section.splitlines() if line.startswith(f"- {start}")]
    return line


def test_an_eval_sd_capped_at_the_run_sd_says_so_and_what_it_pools(tmp_path):
    nearly_alike(tmp_path, 1e-5, 4)
    nearly_alike(tmp_path, 2e-5, 5)
    text, table, runs = summary_of(tmp_path, "--baseline", "lr=1e-05")
    pooled = math.sqrt((table.loc["lr=1e-05", "sd"] ** 2 + table.loc["lr=2e-05", "sd"] ** 2) / 2)
    eval_sd = math.sqrt(runs["eval_var"].mean())  # the 6 runs of the pool
    assert eval_sd > 5 * pooled  # the premise: the runs spread far less than eval sampling predicts
    line = seeds_line(text, "Eval sampling")
    assert line.startswith(f"- Eval sampling makes all of the run-to-run variance: the eval-sampling SD at K = 8 is "
                           f"{eval_sd:.2f} (the mean eval-sampling variance of the 6 runs of 2 configs (lr=1e-05, "
                           f"lr=2e-05) the SD comes from; the Noise table gives each config's own), above the pooled "
                           f"run-to-run SD (4 df) of {pooled:.2f}")
    assert f"so the advice takes eval SD {pooled:.2f}, the whole run-to-run SD" in line
    for label in ("lr=1e-05", "lr=2e-05"):  # each config's own figure, in its Noise table row
        assert f"| {label} | 3 | {table.loc[label, 'sd']:.2f} | {table.loc[label, 'eval_sd']:.2f} |" in text


def test_the_eval_sd_of_one_config_is_its_noise_table_figure(tmp_path):
    rng = np.random.default_rng(7)
    difficulty = rng.normal(0.0, 1.5, PROBLEMS)
    untrained = dataclasses.replace(base_run().train, max_steps=0)
    for seed, shift in ((1, 0.0), (2, 0.8), (3, 1.6)):  # far apart: training-seed noise on top of eval noise
        write_run(tmp_path / "g", learning_rate=1e-5, seed=seed, correct=draw_correct(rng, difficulty, 0.0, K),
                  rng=rng, train=untrained)
        write_run(tmp_path / "g", learning_rate=2e-5, seed=seed, correct=draw_correct(rng, difficulty, shift, K),
                  rng=rng)
    text, table, _ = summary_of(tmp_path, "--baseline", "max_steps=0")
    row = table.loc["lr=2e-05 max_steps=100"]
    assert row["eval_sd"] < row["sd"]  # the premise: not capped
    line = seeds_line(text, "Eval sampling")
    assert (f"(eval SD {row['eval_sd']:.2f} at K = 8, of the 3 runs of lr=2e-05 max_steps=100, as in the Noise "
            "table)") in line
    assert f"| lr=2e-05 max_steps=100 | 3 | {row['sd']:.2f} | {row['eval_sd']:.2f} |" in text


def test_collapses_are_priced_per_config_never_at_a_pooled_rate(tmp_path):
    """The demo's shape: one config never collapses (0 of 3), one always does (3 of 3, trained on and scored
    0); and one that collapses in 1 of 3 seeds, priced at its own rate and gap."""
    working = lambda lr, seed, shift: write_run(  # noqa: E731
        tmp_path / "g", learning_rate=lr, seed=seed, correct=solved([8 + shift] * PROBLEMS, COLLAPSED_K))
    for seed in (1, 2, 3):
        working(1e-5, seed, seed % 2)
        collapsed_seed(tmp_path / "g", 3e-5, seed, 9, stopped=False)
    working(2e-5, 1, 1)
    working(2e-5, 2, 2)
    collapsed_seed(tmp_path / "g", 2e-5, 3, 9, stopped=False)
    settings = parse_args([str(tmp_path), "--anchor", "none", "--baseline", "lr=1e-05"])
    analysis = analyse(collect(settings.roots).runs, settings, None)
    p = analysis.power
    by_label = {c["label"]: c for c in p["collapses"]}
    assert set(by_label) == {"lr=2e-05", "lr=3e-05"}  # lr=1e-05 never collapsed: nothing to price
    always, once = by_label["lr=3e-05"], by_label["lr=2e-05"]
    assert (always["collapsed"], always["judged"], always["sd_collapsing"]) == (3, 3, None)
    survivors = 100 * np.mean([9 / 12, 10 / 12])
    assert (once["collapsed"], once["judged"]) == (1, 3) and once["rate"] == pytest.approx(1 / 3)
    assert once["gap"] == pytest.approx(survivors - 0.0)
    assert once["sd_collapsing"] == pytest.approx(math.sqrt(2 / 3 * p["sd"] ** 2 + 2 / 9 * survivors ** 2))
    text, _, _ = summary_of(tmp_path, "--baseline", "lr=1e-05")
    line = seeds_line(text, "Collapses")
    assert "50%" not in line and "of the 9 trained runs" not in line  # no rate over configs
    assert "lr=3e-05 collapsed in 3 of 3 seeds: collapsing is what it does, not noise a seeds figure prices" in line
    assert (f"lr=2e-05 collapsed in 1 of 3 seeds, {survivors:.1f} points below its other seeds: a config that "
            f"collapses at that rate (33%, from 3 seeds) has a run-to-run SD of {once['sd_collapsing']:.2f} and needs "
            f"**{once['seeds_collapsing']} seeds** for the same effect") in line


def test_a_config_left_out_of_the_noise_split_is_named_with_why(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    from opsd_sweep.summarize import plots

    rng = np.random.default_rng(8)
    for seed in (1, 2, 3):
        write_run(tmp_path / "g", learning_rate=1e-5, seed=seed, rng=rng,
                  correct=draw_correct(rng, rng.normal(0.0, 1.5, PROBLEMS), 0.0, COLLAPSED_K))
        collapsed_seed(tmp_path / "g", 3e-5, seed, 9, stopped=False)  # every sample wrong: nothing to split
    for seed in (1, 2):
        write_run(tmp_path / "g", learning_rate=2e-5, seed=seed, correct=solved([4] * PROBLEMS, COLLAPSED_K))
    drawn = {}
    monkeypatch.setattr(plots, "_save", lambda fig, path: drawn.__setitem__(path.name, fig))
    main([str(tmp_path), "--out", str(tmp_path / "out"), "--anchor", "none", "--baseline", "lr=1e-05"])
    noise = (tmp_path / "out" / "summary.md").read_text().split("## Noise", 1)[1].split("\n## ", 1)[0]
    assert "| lr=1e-05 | 3 |" in noise and "| lr=3e-05 |" not in noise and "| lr=2e-05 |" not in noise
    assert ("Not split, so in neither the table nor its plot: lr=2e-05 (2 runs: the split needs 3); lr=3e-05 (no "
            "noise to split: its 3 runs scored 0.00, each problem's samples alike; collapsed in 3 of 3 seeds).") \
        in noise
    title = drawn["variance_decomposition.png"].axes[0].get_title()
    assert "not shown: lr=2e-05 (2 runs: the split needs 3)" in title
    assert "not shown: lr=3e-05 (no noise to split: its 3 runs scored 0.00" in title
    plt.close("all")
