"""`python -m opsd_sweep.summary` end to end on run dirs written per the run-dir contract."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from opsd_sweep.config import BaselineConfig
from opsd_sweep.summary import main
from tests.analysis.rundirs import draw_correct, write_run

DIFFICULTY = np.random.default_rng(0).normal(0.0, 1.5, 30)
EFFECTS = {5e-6: 0.0, 1e-5: 1.2, 2e-5: 0.0}  # logit shifts: 1e-5 is ~+25 points better, 2e-5 equal


def write_sweep(root, effects=EFFECTS, seeds=(1, 2, 3, 4), simulated=False, k=12, **fields):
    rng = np.random.default_rng(1 + simulated)
    for lr, effect in effects.items():
        for seed in seeds:
            correct = draw_correct(rng, DIFFICULTY, effect + rng.normal(0, 0.1), k)
            write_run(root, learning_rate=lr, seed=seed, correct=correct, simulated=simulated, rng=rng,
                      kl_final=0.3 - 0.1 * effect + rng.normal(0, 0.01), **fields)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp("results")
    write_sweep(root / "lr")
    return root


def test_baseline_verdicts_files_and_plots(sweep, tmp_path, capsys):
    main([str(sweep), "--out", str(tmp_path), "--baseline", "cfg.learning_rate=5e-06", "--bootstrap-reps", "200"])
    summary = pd.read_csv(tmp_path / "summary.csv").set_index("label")
    assert summary.index[0] == "lr=1e-05"  # sorted by mean, best first
    assert summary.loc["lr=1e-05", "verdict"] == "better"
    assert summary.loc["lr=2e-05", "verdict"] == "inconclusive"
    assert summary.loc["lr=5e-06", "verdict"] == "baseline"
    assert summary.loc["lr=1e-05", "vs_baseline"] == "paired by problem"
    assert summary.loc["lr=1e-05", "p_baseline_holm"] <= 0.05 < summary.loc["lr=2e-05", "p_baseline_holm"]
    assert (summary["n"] == 4).all() and summary["verdict_vs"].eq("in-sweep baseline").all()
    for column in ("cfg.learning_rate", "mean", "ci_low", "ci_high", "sd", "eval_sd", "train_sd", "delta_anchor",
                   "p_anchor_holm", "q_baseline_bh", "mde", "seeds_needed", "seeds_needed_holm",
                   "boot_delta_low", "flags"):
        assert column in summary, column
    assert "winner's curse" in summary.loc["lr=1e-05", "flags"]
    runs = pd.read_csv(tmp_path / "runs.csv")
    assert len(runs) == 12 and {"label", "cfg.seed", "state", "avg_at_n", "train.kl_true.tail"} <= set(runs.columns)
    assert len(pd.read_parquet(tmp_path / "samples.parquet")) == 12 * 30 * 12
    report = (tmp_path / "summary.md").read_text()
    for heading in ("## Verdicts", "## Anchor", "## How many seeds", "## Noise: eval sampling vs training seed"):
        assert heading in report
    assert "**Better** than the in-sweep baseline" in report and "lr=1e-05" in report
    plots = sorted(p.name for p in (tmp_path / "plots").glob("*.png"))
    assert plots == ["score_per_config.png", "score_vs_kl_true.png", "score_vs_lr.png", "variance_decomposition.png"]
    assert all(f"plots/{name}" in report for name in plots)
    printed = capsys.readouterr().out
    assert "lr=1e-05" in printed and "better" in printed


def test_anchor_is_the_reference_without_an_in_sweep_baseline(sweep, tmp_path):
    main([str(sweep), "--out", str(tmp_path), "--no-plots", "--bootstrap-reps", "0"])
    summary = pd.read_csv(tmp_path / "summary.csv")
    assert summary["verdict_vs"].eq("anchor").all() and "delta_baseline" not in summary
    report = (tmp_path / "summary.md").read_text()
    assert "verdicts below are against this anchor" in report and "--baseline" in report


def test_one_run_configs_use_an_assumed_sd_and_say_so(tmp_path):
    write_sweep(tmp_path / "single", seeds=(1,))
    main([str(tmp_path / "single"), "--out", str(tmp_path / "out"), "--no-plots", "--assumed-sd", "3.0"])
    summary = pd.read_csv(tmp_path / "out" / "summary.csv")
    assert summary["sd_source"].eq("assumed (1 run)").all() and summary["sd_used"].eq(3.0).all()
    assert summary["flags"].str.contains("1 run: no own SD, used assumed SD 3.00").all()
    assert summary["ci_low"].notna().all()


def test_pooled_sd_option(sweep, tmp_path):
    main([str(sweep), "--out", str(tmp_path), "--no-plots", "--pool-sd", "--baseline", "lr=5e-06"])
    summary = pd.read_csv(tmp_path / "summary.csv")
    assert summary["sd_source"].eq("pooled").all() and summary["sd_used"].nunique() == 1
    assert set(summary["vs_baseline"].dropna()) == {"is baseline", "pooled t (runs)"}


def test_simulated_runs_are_marked_everywhere(tmp_path, capsys):
    write_sweep(tmp_path / "mixed", effects={5e-6: 0.0}, seeds=(1, 2))
    write_sweep(tmp_path / "mixed", effects={5e-6: 0.0}, seeds=(1, 2), simulated=True)
    main([str(tmp_path / "mixed"), "--out", str(tmp_path / "out"), "--bootstrap-reps", "0"])
    summary = pd.read_csv(tmp_path / "out" / "summary.csv").set_index("label")
    assert set(summary.index) == {"lr=5e-06", "lr=5e-06 [simulated]"}
    assert summary.loc["lr=5e-06 [simulated]", "simulated"] and not summary.loc["lr=5e-06", "simulated"]
    assert "SIMULATED data" in summary.loc["lr=5e-06 [simulated]", "flags"]
    assert "SIMULATED DATA: 2 of the runs" in (tmp_path / "out" / "summary.md").read_text()
    assert "lr=5e-06 [simulated]" in capsys.readouterr().out  # printed, not eaten as rich markup


def test_external_results_enter_the_comparison(sweep, tmp_path):
    csv = tmp_path / "other_tool.csv"
    pd.DataFrame({"config": ["other tool"] * 3, "run_id": ["a", "b", "c"],
                  "avg_at_n": [40.0, 42.0, 41.0]}).to_csv(csv, index=False)
    main([str(sweep), "--out", str(tmp_path / "out"), "--no-plots", "--external", str(csv),
          "--baseline", "cfg.learning_rate=5e-06"])
    summary = pd.read_csv(tmp_path / "out" / "summary.csv").set_index("label")
    row = summary.loc["other tool [external]"]
    assert row["external"] and row["n"] == 3 and row["vs_baseline"] == "Welch (runs)"
    assert row["mean"] == pytest.approx(41.0)


def test_auto_anchor_is_the_one_the_runs_were_configured_with(tmp_path):
    tiny_anchor = BaselineConfig(label="tiny base model", metric="avg_at_n", mean=38.5, sd=2.9, n=10,
                                 note="Measured here, on 10 seeds.")
    write_sweep(tmp_path / "tiny", effects={5e-6: 0.0}, seeds=(1, 2), baseline=tiny_anchor)
    main([str(tmp_path / "tiny"), "--out", str(tmp_path / "out"), "--no-plots", "--bootstrap-reps", "0"])
    summary = pd.read_csv(tmp_path / "out" / "summary.csv")
    assert summary["delta_anchor"].iloc[0] == pytest.approx(summary["mean"].iloc[0] - 38.5)
    report = (tmp_path / "out" / "summary.md").read_text()
    assert "Anchor: tiny base model, avg_at_n = 38.50 (SD 2.90 over 10 runs). Measured here, on 10 seeds." in report
    assert "1.48" not in report  # the paper anchor's own caveat belongs to the paper anchor

    write_sweep(tmp_path / "tiny", effects={1e-5: 0.0}, seeds=(1, 2))  # configured with the paper's anchor
    with pytest.raises(SystemExit, match=r"configured with 2 different anchors .*--anchor NAME"):
        main([str(tmp_path / "tiny"), "--out", str(tmp_path / "out"), "--no-plots"])
    main([str(tmp_path / "tiny"), "--out", str(tmp_path / "out"), "--no-plots", "--anchor", "tiny"])


@pytest.mark.parametrize("args, message", [
    (["--baseline", "cfg.learning_rate=7e-06"], "matches 0 configs"),
    (["--baseline", "warmup=0.1"], "is not a label or a column=value term"),
    (["--metric", "avg_at_64"], "metric 'avg_at_64' is in no run; use one of"),
    (["--alpha", "5"], "alpha=5.0 must be in (0, 1)"),
    (["--anchor", "nowhere"], "anchor 'nowhere'"),
])
def test_bad_settings_fail_with_the_fix(sweep, tmp_path, args, message):
    with pytest.raises(SystemExit) as err:
        main([str(sweep), "--out", str(tmp_path), "--no-plots", *args])
    assert message in str(err.value)


def test_no_runs_is_a_clear_error(tmp_path):
    with pytest.raises(SystemExit, match="no readable run directories"):
        main([str(tmp_path / "empty"), "--out", str(tmp_path)])


def test_other_metric_skips_the_anchor_and_pairing(sweep, tmp_path):
    main([str(sweep), "--out", str(tmp_path), "--no-plots", "--metric", "pass_at_4", "--baseline", "lr=5e-06"])
    summary = pd.read_csv(tmp_path / "summary.csv")
    assert "delta_anchor" not in summary and set(summary["vs_baseline"]) == {"is baseline", "Welch (runs)"}
    assert "The anchor reports avg_at_n, not pass_at_4" in (tmp_path / "summary.md").read_text()


@pytest.mark.parametrize("selector", ["lr=5e-06 clip=0.1", "lr=5e-6,clip=0.1", "cfg.learning_rate=5e-06, clip=0.10",
                                      "learning_rate=0.000005,clip=0.1"])
def test_baseline_selector_forms(selector):
    from opsd_sweep.analysis.config_stats import select_baseline

    table = pd.DataFrame({"label": ["lr=5e-06 clip=0.1", "lr=5e-06 clip=0.2", "lr=1e-05 clip=0.1"],
                          "cfg.learning_rate": [5e-6, 5e-6, 1e-5], "cfg.clip": [0.1, 0.2, 0.1]})
    assert select_baseline(table, selector) == "lr=5e-06 clip=0.1"
    with pytest.raises(ValueError, match="matches 2 configs"):
        select_baseline(table, "lr=5e-06")


def test_a_narrow_terminal_gets_the_columns_the_verdict_rests_on():
    from opsd_sweep.analysis.report import printed_columns

    full = ["config", "n", "mean", "95% CI", "SD", "Δ vs baseline [CI]", "p Holm (base)", "Δ vs anchor [CI]",
            "p Holm (anchor)", "verdict", "MDE", "seeds needed", "flags"]
    assert printed_columns(full, 200) == list(range(len(full)))
    assert [full[i] for i in printed_columns(full, 100)] == ["config", "n", "mean", "95% CI", "Δ vs baseline [CI]",
                                                            "p Holm (base)", "verdict"]
    no_baseline = [c for c in full if "base" not in c or "anchor" in c]
    assert [no_baseline[i] for i in printed_columns(no_baseline, 100)] == ["config", "n", "mean", "95% CI",
                                                                          "Δ vs anchor [CI]", "p Holm (anchor)",
                                                                          "verdict"]
