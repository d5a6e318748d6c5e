"""Per-problem transitions vs the in-sweep baseline, on hand-built run dirs with known per-problem counts."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from opsd_sweep.summarize.collect import collect
from opsd_sweep.summarize.transitions import (MAX_PANELS, classify, jitter, markdown_lines, mcnemar_exact,
                                              plot_transitions, transitions)
from opsd_sweep.summary import main
from opsd_sweep.testing.rundirs import write_run

K, SEEDS = 12, (1, 2)  # samples per problem per run (the config's eval.n_samples), runs per config
BASELINE, BETTER, MIXED = 5e-6, 1e-5, 2e-5

# eighths of each problem's samples solved (12 problems, p00..p11; a config has 2 x 12 = 24 samples of each),
# chosen so that the classes at t = 0.5 are known
SOLVED = {
    BASELINE: [0, 1, 2, 3, 1, 2, 3, 0, 4, 8, 6, 6],
    # p00-p06 improved (p03: 3/8 -> 4/8, a rate equal to t is solved), p08 and p11 degraded (p08: 4/8 -> 3/8),
    # p09, p10 both correct, p07 both wrong
    BETTER: [5, 6, 7, 4, 8, 8, 5, 1, 3, 8, 7, 2],
    # p00 improved; p08, p09, p10 degraded; p11 both correct; p01-p07 both wrong
    MIXED: [4, 1, 2, 3, 1, 2, 3, 0, 2, 3, 1, 5],
}


def runs_correct(eighths: list[int]) -> list[np.ndarray]:
    """Per run, a (problems, K) correctness array; together the runs solve `eighths` / 8 of each problem's
    samples (the first run filled first)."""
    solved = np.array(eighths) * len(SEEDS) * K // 8
    arrays = []
    for run in range(len(SEEDS)):
        count = np.clip(solved - run * K, 0, K)
        arrays.append(np.arange(K)[None, :] < count[:, None])
    return arrays


def write_configs(root, solved=SOLVED):
    for lr, counts in solved.items():
        for seed, correct in zip(SEEDS, runs_correct(counts)):
            write_run(root, learning_rate=lr, seed=seed, correct=correct)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp("results")
    write_configs(root / "lr")
    return root


def expected_classes(base: list[int], config: list[int], threshold: float) -> list[str]:
    out = []
    for b, c in zip(base, config):
        b_ok, c_ok = b / 8 >= threshold, c / 8 >= threshold
        out.append("both correct" if b_ok and c_ok else "improved" if c_ok else "degraded" if b_ok else "both wrong")
    return out


def test_known_counts_and_the_exact_p(sweep):
    collection = collect([str(sweep)])
    result = transitions(collection.samples, collection.runs, ["lr=1e-05", "lr=2e-05", "lr=5e-06"], "lr=5e-06", 0.5)
    counts = result.counts.set_index("config")
    better, mixed = counts.loc["lr=1e-05"], counts.loc["lr=2e-05"]
    assert (better["improved"], better["degraded"], better["both_correct"], better["both_wrong"]) == (7, 2, 2, 1)
    assert (mixed["improved"], mixed["degraded"], mixed["both_correct"], mixed["both_wrong"]) == (1, 3, 1, 7)
    assert better["p"] == pytest.approx(2 * 46 / 512)  # P(X >= 7 of 9 at 1/2) = (36 + 9 + 1) / 512, two-sided
    assert better["p"] == pytest.approx(sps.binomtest(7, 9, 0.5).pvalue)
    assert mixed["p"] == pytest.approx(2 * 5 / 16)  # 1 of 4: P(X <= 1) = 5/16, two-sided
    assert mixed["p"] == pytest.approx(sps.binomtest(1, 4, 0.5).pvalue)
    assert counts["p_holm"].tolist() == pytest.approx([2 * 2 * 46 / 512, 0.625])  # Holm over the 2 configs
    assert (better["runs"], better["baseline_runs"], better["problems"]) == (2, 2, 12)
    table = result.table[result.table["config"] == "lr=1e-05"]
    assert table["problem"].tolist() == [f"p{i:02d}" for i in range(12)]
    assert table["class"].tolist() == expected_classes(SOLVED[BASELINE], SOLVED[BETTER], 0.5)
    assert table["baseline_rate"].tolist() == pytest.approx([c / 8 for c in SOLVED[BASELINE]])
    assert table["config_rate"].tolist() == pytest.approx([c / 8 for c in SOLVED[BETTER]])
    assert "lr=5e-06" not in set(result.table["config"])


def test_the_classes_at_the_threshold_and_mcnemar_without_discordant_problems():
    base = np.array([0.25, 0.5, 0.5, 0.75, 0.1, 0.3])
    config = np.array([0.5, 0.25, 0.5, 0.875, 0.2, 0.3])
    assert classify(base, config, 0.5).tolist() == ["improved", "degraded", "both correct", "both correct",
                                                    "both wrong", "both wrong"]
    assert classify(np.array([0.1 + 0.2]), np.array([0.0]), 0.3).tolist() == ["degraded"]  # float rounding at t
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(5, 0) == pytest.approx(2 / 32)


def test_jitter_never_crosses_the_threshold():
    values = np.array([0.5] * 50 + [0.49] * 50 + [0.0] * 50 + [1.0] * 50)
    moved = jitter(values, 0.5, 0.02, np.random.default_rng(0))
    assert np.abs(moved - values).max() <= 0.02
    assert ((moved >= 0.5) == (values >= 0.5)).all()
    assert (moved != values).all()


def test_the_summary_writes_the_csv_the_section_and_the_plot(sweep, tmp_path):
    main([str(sweep), "--out", str(tmp_path), "--baseline", "lr=5e-06"])
    csv = pd.read_csv(tmp_path / "transitions.csv")
    assert len(csv) == 2 * 12  # one row per config x problem, the baseline's own row left out
    assert list(csv.columns) == ["config", "baseline", "problem", "problem_index", "baseline_rate", "config_rate",
                                 "baseline_samples", "config_samples", "class"]
    row = csv[(csv["config"] == "lr=1e-05") & (csv["problem"] == "p03")].iloc[0]
    assert (row["baseline_rate"], row["config_rate"], row["class"], row["config_samples"]) == (3 / 8, 4 / 8, "improved",
                                                                                              24)
    report = (tmp_path / "summary.md").read_text()
    section = report[report.index("## Per-problem transitions vs the baseline"):]
    assert report.index("## Verdicts") < report.index("## Per-problem transitions") < report.index("## Anchor")
    assert "threshold t = 0.5" in section and "the verdict remains the run-level test" in section
    assert ("- **lr=1e-05** (2 runs vs the baseline's 2, 12 problems): 7 improved, 2 degraded, 2 both correct, "
            "1 both wrong; exact McNemar p 0.180 (Holm 0.359).") in section
    assert "  - improved: p00, p01, p02, p03, p04, p05, p06\n  - degraded: p08, p11\n" in section
    assert "  - improved: p00\n  - degraded: p08, p09, p10\n" in section
    assert (tmp_path / "plots" / "transitions.png").stat().st_size > 10_000
    assert "plots/transitions.png" in section and "![transitions](plots/transitions.png)" in report


def test_the_threshold_is_a_setting(sweep, tmp_path):
    main([str(sweep), "--out", str(tmp_path), "--no-plots", "--baseline", "lr=5e-06", "--transition-threshold",
          "0.75"])
    csv = pd.read_csv(tmp_path / "transitions.csv")
    better = csv[csv["config"] == "lr=1e-05"]
    assert better["class"].tolist() == expected_classes(SOLVED[BASELINE], SOLVED[BETTER], 0.75)
    assert "threshold t = 0.75" in (tmp_path / "summary.md").read_text()
    with pytest.raises(SystemExit, match="transition_threshold=0.0 must be in"):
        main([str(sweep), "--out", str(tmp_path), "--transition-threshold", "0"])


def test_no_baseline_no_section(sweep, tmp_path):
    main([str(sweep), "--out", str(tmp_path), "--baseline", "none"])
    assert "Per-problem transitions" not in (tmp_path / "summary.md").read_text()
    assert not (tmp_path / "transitions.csv").exists() and not (tmp_path / "plots" / "transitions.png").exists()


def test_more_configs_than_panels_draws_the_best_by_mean(tmp_path):
    rng = np.random.default_rng(3)
    solved = {BASELINE: list(rng.integers(0, 9, 12))}
    solved |= {lr: list(rng.integers(0, 9, 12)) for lr in (1e-6, 2e-6, 3e-6, 4e-6, 6e-6, 7e-6, 8e-6)}
    write_configs(tmp_path / "runs", solved)
    collection = collect([str(tmp_path / "runs")])
    order = [f"lr={lr:g}" for lr in sorted(solved, key=lambda lr: -sum(solved[lr]))]  # best mean first
    result = transitions(collection.samples, collection.runs, order, "lr=5e-06", 0.5)
    drawn = plot_transitions(result, tmp_path / "transitions.png")
    assert drawn == [label for label in order if label != "lr=5e-06"][:MAX_PANELS]
    assert (tmp_path / "transitions.png").exists()


def test_runs_without_samples_are_named(sweep):
    collection = collect([str(sweep)])
    runs = pd.concat([collection.runs, pd.DataFrame({"run_id": ["stopped"], "label": ["lr=1e-05"]})])
    result = transitions(collection.samples, runs, ["lr=1e-05"], "lr=5e-06", 0.5)
    assert result.counts["runs"].tolist() == [2] and result.counts["runs_without_samples"].tolist() == [1]
    assert "1 run(s) of the two arms in the Verdicts table have no per-sample data" in "\n".join(
        markdown_lines(result))
