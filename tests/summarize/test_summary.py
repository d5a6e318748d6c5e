"""`python -m opsd_sweep.summary` end to end on run dirs written per the run-dir contract."""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from opsd_sweep.summarize.collect import collect
from opsd_sweep.inference.design import cost_optimal_k
from opsd_sweep.summarize.config_stats import analyse, phase_costs
from opsd_sweep.summarize.report import samples_cost_statement
from opsd_sweep.config import AnchorConfig
from opsd_sweep.summary import main, parse_args
from opsd_sweep.testing.rundirs import base_run, draw_correct, write_run

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
    main([str(sweep), "--out", str(tmp_path), "--baseline", "cfg.learning_rate=5e-06"])
    summary = pd.read_csv(tmp_path / "summary.csv").set_index("label")
    assert summary.index[0] == "lr=1e-05"  # sorted by mean, best first
    assert summary.loc["lr=1e-05", "verdict"] == "better"
    assert summary.loc["lr=2e-05", "verdict"] == "inconclusive"
    assert summary.loc["lr=5e-06", "verdict"] == "baseline"
    assert summary.loc["lr=1e-05", "vs_baseline"] == "run scores"
    assert summary.loc["lr=1e-05", "p_baseline_holm"] <= 0.05 < summary.loc["lr=2e-05", "p_baseline_holm"]
    assert (summary["n"] == 4).all() and summary["verdict_vs"].eq("in-sweep baseline").all()
    for column in ("cfg.learning_rate", "mean", "ci_low", "ci_high", "sd", "eval_sd", "train_sd", "delta_anchor",
                   "p_anchor_holm", "q_baseline_bh", "mde", "seeds_needed", "seeds_needed_bonferroni",
                   "verdict_holds_to_sd", "verdict_sd", "train_sd_low", "train_sd_high", "flags"):
        assert column in summary, column
    assert "winner's curse" in summary.loc["lr=1e-05", "flags"]
    runs = pd.read_csv(tmp_path / "runs.csv")
    assert len(runs) == 12 and {"label", "cfg.seed", "state", "avg_at_n", "train.kl_true.tail"} <= set(runs.columns)
    assert len(pd.read_parquet(tmp_path / "samples.parquet")) == 12 * 30 * 12
    report = (tmp_path / "summary.md").read_text()
    for heading in ("## Verdicts", "## Anchor", "## How many seeds", "## Noise: eval sampling vs training seed"):
        assert heading in report
    assert "**Better** than the in-sweep baseline: lr=1e-05" in report
    assert f"stays better for any run-to-run SD up to {summary.loc['lr=1e-05', 'verdict_holds_to_sd']:.1f} points" \
        in report
    plots = sorted(p.name for p in (tmp_path / "plots").glob("*.png"))
    assert plots == ["decision_cost_by_k.png", "score_per_config.png", "score_vs_kl_true.png", "score_vs_lr.png",
                     "transitions.png", "variance_decomposition.png"]
    assert all(f"plots/{name}" in report for name in plots)
    printed = capsys.readouterr().out
    assert "lr=1e-05" in printed and "better" in printed


def test_anchor_is_the_reference_without_an_in_sweep_baseline(sweep, tmp_path):
    main([str(sweep), "--out", str(tmp_path), "--no-plots"])
    summary = pd.read_csv(tmp_path / "summary.csv")
    assert summary["verdict_vs"].eq("anchor").all() and "delta_baseline" not in summary
    report = (tmp_path / "summary.md").read_text()
    assert "verdicts below are against this anchor" in report and "--baseline" in report


def test_one_run_configs_use_a_declared_sd_and_say_so(tmp_path):
    write_sweep(tmp_path / "single", seeds=(1,))
    main([str(tmp_path / "single"), "--out", str(tmp_path / "out"), "--no-plots", "--assumed-sd", "3.0"])
    summary = pd.read_csv(tmp_path / "out" / "summary.csv")
    assert summary["sd_source"].eq("known").all() and summary["sd_used"].eq(3.0).all()
    assert summary["flags"].str.contains("1 run: no own SD, used known SD 3.00").all()
    half = summary["ci_high"] - summary["mean"]
    assert half.to_numpy() == pytest.approx(1.959964 * 3.0)  # known SD: normal quantiles, R = 1
    main([str(tmp_path / "single"), "--out", str(tmp_path / "none"), "--no-plots"])
    alone = pd.read_csv(tmp_path / "none" / "summary.csv")
    assert alone["ci_low"].isna().all() and alone["flags"].str.contains("no test").all()


def test_pooled_sd_option(sweep, tmp_path):
    main([str(sweep), "--out", str(tmp_path), "--no-plots", "--pool-sd", "--baseline", "lr=5e-06"])
    summary = pd.read_csv(tmp_path / "summary.csv")
    assert summary["sd_source"].eq("pooled").all() and summary["sd_used"].nunique() == 1
    assert summary["sd_df"].eq(9).all()  # 3 configs x (4 - 1)
    row = summary.set_index("label").loc["lr=1e-05"]
    base = summary.set_index("label").loc["lr=5e-06"]
    se = row["sd_used"] * (1 / 4 + 1 / 4) ** 0.5
    assert row["p_baseline"] == pytest.approx(2 * sps.t.sf(abs(row["mean"] - base["mean"]) / se, 9))


def test_simulated_runs_are_marked_everywhere(tmp_path, capsys):
    write_sweep(tmp_path / "mixed", effects={5e-6: 0.0}, seeds=(1, 2))
    write_sweep(tmp_path / "mixed", effects={5e-6: 0.0}, seeds=(1, 2), simulated=True)
    main([str(tmp_path / "mixed"), "--out", str(tmp_path / "out")])
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
    assert row["external"] and row["n"] == 3 and row["vs_baseline"] == "run scores"
    assert row["mean"] == pytest.approx(41.0)


def test_auto_anchor_is_the_one_the_runs_were_configured_with(tmp_path):
    tiny_anchor = AnchorConfig(label="tiny base model", metric="avg_at_n", mean=38.5, sd=2.9, n=10,
                               note="Measured here, on 10 seeds.")
    write_sweep(tmp_path / "tiny", effects={5e-6: 0.0}, seeds=(1, 2), anchor=tiny_anchor)
    main([str(tmp_path / "tiny"), "--out", str(tmp_path / "out"), "--no-plots"])
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
    (["--baseline", "warmup=0.1"], "'warmup' is not a key that differs between the configs"),
    (["--metric", "avg_at_64"], "metric 'avg_at_64' is in no run; use one of"),
    (["--metric", "cfg.learning_rate"], "metric 'cfg.learning_rate' is in no run; use one of"),
    (["--alpha", "5"], "alpha=5.0 must be in (0, 1)"),
    (["--anchor", "nowhere"], "anchor 'nowhere'"),
])
def test_bad_settings_fail_with_the_fix(sweep, tmp_path, args, message):
    with pytest.raises(SystemExit) as err:
        main([str(sweep), "--out", str(tmp_path), "--no-plots", *args])
    assert message in str(err.value)


def test_no_runs_is_a_clear_error(tmp_path):
    with pytest.raises(SystemExit, match="no results root at .*nowhere: give the folder a sweep wrote"):
        main([str(tmp_path / "nowhere"), "--out", str(tmp_path)])
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit, match="no readable run directories"):
        main([str(tmp_path / "empty"), "--out", str(tmp_path)])


def test_a_sweep_whose_runs_all_failed_says_so_not_that_the_metric_is_missing(tmp_path):
    for seed in (1, 2):
        write_run(tmp_path / "g", learning_rate=1e-5, seed=seed, correct=None, state="failed")
    with pytest.raises(SystemExit, match=r"no run finished with scores that count \(2 failed\)"):
        main([str(tmp_path), "--out", str(tmp_path / "out"), "--no-plots"])


def test_the_metric_list_offers_scores_not_config_values(sweep, tmp_path):
    with pytest.raises(SystemExit) as err:
        main([str(sweep), "--out", str(tmp_path), "--no-plots", "--metric", "not_a_score"])
    offered = str(err.value).split("use one of ", 1)[1]
    assert "avg_at_n" in offered and "mean_tokens" in offered and "cfg." not in offered


def test_other_metric_skips_the_anchor_and_pairing(sweep, tmp_path):
    main([str(sweep), "--out", str(tmp_path), "--no-plots", "--metric", "pass_at_4", "--baseline", "lr=5e-06"])
    summary = pd.read_csv(tmp_path / "summary.csv")
    assert "delta_anchor" not in summary and set(summary["vs_baseline"]) == {"is baseline", "run scores"}
    assert "The anchor reports avg_at_n, not pass_at_4" in (tmp_path / "summary.md").read_text()


@pytest.mark.parametrize("selector", ["lr=5e-06 clip=0.1", "lr=5e-6,clip=0.1", "cfg.learning_rate=5e-06, clip=0.10",
                                      "learning_rate=0.000005,clip=0.1"])
def test_baseline_selector_forms(selector):
    from opsd_sweep.summarize.config_stats import select_baseline

    table = pd.DataFrame({"label": ["lr=5e-06 clip=0.1", "lr=5e-06 clip=0.2", "lr=1e-05 clip=0.1"],
                          "cfg.learning_rate": [5e-6, 5e-6, 1e-5], "cfg.clip": [0.1, 0.2, 0.1]})
    assert select_baseline(table, selector) == ("lr=5e-06 clip=0.1", f"--baseline {selector}")
    with pytest.raises(ValueError, match="matches 2 configs"):
        select_baseline(table, "lr=5e-06")
    assert select_baseline(table, "auto")[0] is None and select_baseline(table, "none")[0] is None
    with_base = pd.concat([table, pd.DataFrame({"label": ["base model"], "cfg.learning_rate": [5e-6]})])
    assert select_baseline(with_base, "auto")[0] == "base model"


def test_a_narrow_terminal_gets_the_columns_the_verdict_rests_on():
    from opsd_sweep.summarize.report import printed_columns

    full = ["config", "n", "mean", "95% CI", "SD", "Δ vs baseline [CI]", "p Holm (base)", "Δ vs anchor [CI]",
            "p Holm (anchor)", "verdict", "MDE", "seeds needed", "flags"]
    assert printed_columns(full, 200) == list(range(len(full)))
    assert [full[i] for i in printed_columns(full, 100)] == ["config", "n", "mean", "95% CI", "Δ vs baseline [CI]",
                                                            "p Holm (base)", "verdict"]
    no_baseline = [c for c in full if "base" not in c or "anchor" in c]
    assert [no_baseline[i] for i in printed_columns(no_baseline, 100)] == ["config", "n", "mean", "95% CI",
                                                                          "Δ vs anchor [CI]", "p Holm (anchor)",
                                                                          "verdict"]


@pytest.mark.parametrize("reference", [["--baseline", "lr=5e-06"], ["--baseline", "none"],
                                       ["--baseline", "none", "--pool-anchor"]])
def test_verdict_holds_to_sd_is_where_a_declared_sd_turns_the_verdict(sweep, tmp_path, reference):
    """verdict_holds_to_sd = the largest X for which --assumed-sd X --no-pool-sd keeps the verdict, against
    the in-sweep baseline and against the anchor (its own SD, or the shared one with --pool-anchor)."""
    args = [str(sweep), "--no-plots", *reference]
    main(args + ["--out", str(tmp_path / "a")])
    summary = pd.read_csv(tmp_path / "a" / "summary.csv").set_index("label")
    decided = summary[summary["verdict"].isin(["better", "worse"])]
    assert not decided.empty and decided["verdict_holds_to_sd"].notna().all()
    assert summary.loc[~summary.index.isin(decided.index), "verdict_holds_to_sd"].isna().all()
    label = decided.index[0]
    holds = decided.loc[label, "verdict_holds_to_sd"]
    for factor, same in ((0.99, True), (1.01, False)):
        main(args + ["--out", str(tmp_path / "b"), "--assumed-sd", str(holds * factor)])
        declared = pd.read_csv(tmp_path / "b" / "summary.csv").set_index("label")
        assert declared["sd_source"].eq("known").all()
        assert (declared.loc[label, "verdict"] == decided.loc[label, "verdict"]) == same, factor
        assert declared.loc[label, "verdict_sd"] == f"known SD {holds * factor:.2f}"


def test_a_declared_sd_changes_a_one_run_verdict_even_when_others_could_be_pooled(tmp_path):
    """Issue 15, 2: one run at lr=1e-05 beside 4-run configs got a pooled SD; a declared SD now decides."""
    write_sweep(tmp_path / "mix", effects={5e-6: 0.0, 2e-5: 0.0})
    write_sweep(tmp_path / "mix", effects={1e-5: 1.2}, seeds=(1,))
    args = [str(tmp_path / "mix"), "--no-plots", "--baseline", "lr=5e-06", "--pool-sd"]
    main(args + ["--out", str(tmp_path / "pooled")])
    pooled = pd.read_csv(tmp_path / "pooled" / "summary.csv").set_index("label")
    assert pooled.loc["lr=1e-05", "sd_source"] == "pooled" and pooled.loc["lr=1e-05", "sd_df"] == 6
    main(args + ["--out", str(tmp_path / "small"), "--assumed-sd", "1.0"])
    small = pd.read_csv(tmp_path / "small" / "summary.csv").set_index("label")
    assert small.loc["lr=1e-05", "sd_source"] == "known" and small.loc["lr=2e-05", "sd_source"] == "pooled"
    main(args + ["--out", str(tmp_path / "huge"), "--assumed-sd", "60"])
    huge = pd.read_csv(tmp_path / "huge" / "summary.csv").set_index("label")
    assert small.loc["lr=1e-05", "verdict"] == "better" and huge.loc["lr=1e-05", "verdict"] == "inconclusive"


def test_pool_anchor_adds_the_anchors_runs_to_the_pooled_sd(sweep, tmp_path):
    main([str(sweep), "--out", str(tmp_path), "--no-plots", "--pool-sd", "--pool-anchor", "--anchor",
          "qwen3-1.7b_aime24", "--baseline", "none"])
    summary = pd.read_csv(tmp_path / "summary.csv")
    assert summary["sd_df"].eq(9 + 4).all()  # 3 configs x 3 df + the anchor's 5 runs
    runs = pd.read_csv(tmp_path / "runs.csv")
    ss = sum(((g - g.mean()) ** 2).sum() for _, g in runs.groupby("label")["avg_at_n"]) + 4 * 1.48**2
    assert summary["sd_used"].iloc[0] == pytest.approx((ss / 13) ** 0.5)
    assert summary["verdict_vs"].eq("anchor").all()
    row = summary.iloc[0]  # vs the anchor with the shared SD: SE^2 = sd^2 (1/4 + 1/5), 13 df
    se = row["sd_used"] * (1 / 4 + 1 / 5) ** 0.5
    assert row["p_anchor"] == pytest.approx(2 * sps.t.sf(abs(row["mean"] - 54.22) / se, 13))


def test_a_failed_run_with_another_anchor_neither_decides_it_nor_stops_the_summary(tmp_path, capsys):
    """Issue 15, 4: one run failed before training, configured with another anchor section."""
    tiny_anchor = AnchorConfig(label="tiny base model", metric="avg_at_n", mean=38.5, sd=2.9, n=10,
                               note="Measured here.")
    write_sweep(tmp_path / "sweep", effects={5e-6: 0.0, 1e-5: 1.2}, seeds=(1, 2, 3), anchor=tiny_anchor)
    write_run(tmp_path / "sweep", learning_rate=2e-5, seed=1, correct=None, state="failed", steps=0)
    write_run(tmp_path / "sweep", learning_rate=2e-5, seed=2, correct=None, state="training", steps=3,
              anchor=tiny_anchor)
    main([str(tmp_path / "sweep"), "--out", str(tmp_path / "out"), "--no-plots", "--baseline", "lr=5e-06"])
    summary = pd.read_csv(tmp_path / "out" / "summary.csv")
    assert set(summary["label"]) == {"lr=5e-06", "lr=1e-05"} and summary["n"].eq(3).all()
    assert summary["delta_anchor"].iloc[0] == pytest.approx(summary["mean"].iloc[0] - 38.5)  # the finished runs' anchor
    printed = capsys.readouterr().out
    assert "2 run dirs left out of the statistics (1 failed, 1 training)" in printed
    report = (tmp_path / "out" / "summary.md").read_text()
    assert "2 run dirs are left out (1 failed, 1 training)" in report and "## Skipped or unfinished run dirs" in report


def test_a_collapsed_config_is_not_worth_more_seeds_and_seeds_figures_agree(tmp_path):
    write_sweep(tmp_path / "c", effects={5e-6: 0.0, 1e-5: 0.5, 2e-5: -6.0})  # 2e-5 collapses to ~0
    main([str(tmp_path / "c"), "--out", str(tmp_path / "out"), "--no-plots", "--baseline", "lr=5e-06"])
    summary = pd.read_csv(tmp_path / "out" / "summary.csv").set_index("label")
    assert summary.loc["lr=2e-05", "verdict"] == "worse" and summary.loc["lr=2e-05", "q_baseline_bh"] <= 0.05
    report = (tmp_path / "out" / "summary.md").read_text()
    assert not any("lr=2e-05" in line and "worth more seeds" in line for line in report.splitlines())
    seeds = summary["seeds_needed"].dropna().unique()
    assert len(seeds) == 1 and f"needs **{int(seeds[0])} seeds per config**" in report
    assert "pooled run-to-run SD (9 df)" in report


def test_the_untrained_base_model_is_the_baseline_without_a_flag(tmp_path):
    """`make summary` after `make demo`: no --baseline, and the demo's base model stays the baseline."""
    write_sweep(tmp_path / "demo", effects={1e-5: 1.2}, seeds=(1, 2, 3))
    write_sweep(tmp_path / "demo", effects={5e-6: 0.0}, seeds=(1, 2, 3), train=dataclasses.replace(
        base_run().train, max_steps=0))
    main([str(tmp_path / "demo"), "--out", str(tmp_path / "out"), "--no-plots"])
    summary = pd.read_csv(tmp_path / "out" / "summary.csv").set_index("label")
    assert summary.loc["base model", "verdict"] == "baseline"
    assert summary.loc["lr=1e-05 max_steps=100", "verdict"] == "better"
    report = (tmp_path / "out" / "summary.md").read_text()
    assert "auto: the untrained base model" in report
    # Its runs differ in eval sampling only: the noise split does not call their spread a training seed.
    noise_section = report.split("## Noise: eval sampling vs training seed")[1].split("\n## ")[0]
    noise = {row.split(" | ")[0].strip("| "): row for row in noise_section.splitlines()
             if row.startswith(("| base model ", "| lr=1e-05 "))}
    assert "untrained:" in noise["base model"] and "training seed" not in noise["base model"]
    assert "training seed" in noise["lr=1e-05 max_steps=100"]


def test_seeds_advice_is_unchanged_by_external_untrained_or_collapsed_runs(tmp_path):
    """Issue 22, 2: the pooled SD behind seeds needed and the MDE holds this pipeline's trained configs only
    (a collapsed config's runs sit at the floor: their zero spread would shrink it)."""
    write_sweep(tmp_path / "s", effects={5e-6: 0.0, 1e-5: 0.3}, seeds=(1, 2, 3))
    csv = tmp_path / "other_lab.csv"
    pd.DataFrame({"config": ["other lab"] * 3, "run_id": ["a", "b", "c"], "avg_at_n": [20.0, 60.0, 40.0]}).to_csv(csv)
    base = ["--no-plots", "--baseline", "lr=5e-06"]

    def advice(out: str, *extra: str) -> tuple[float, str]:
        main([str(tmp_path / "s"), "--out", str(tmp_path / out), *base, *extra])
        summary = pd.read_csv(tmp_path / out / "summary.csv")
        [seeds] = summary.loc[summary["label"].str.startswith("lr=1e-05"), "seeds_needed"]
        return seeds, (tmp_path / out / "summary.md").read_text()

    alone, report_alone = advice("alone")
    with_external, report_external = advice("external", "--external", str(csv))
    write_sweep(tmp_path / "s", effects={1e-6: 0.0}, seeds=(1, 2, 3), train=dataclasses.replace(
        base_run().train, max_steps=0))
    with_base, report_base = advice("base")
    assert with_external == alone and with_base == alone
    assert "Pooled run-to-run SD" in report_alone and "(4 df): the 6 runs of 2 configs" in report_alone
    assert "left out: 3 external runs (--pool-include external" in report_external
    assert "left out: 3 untrained base-model runs" in report_base
    for seed in (1, 2, 3):  # a config whose runs collapsed: every score at the floor, no spread
        collapsed = write_run(tmp_path / "s", learning_rate=1e-3, seed=seed, correct=np.zeros((30, 12), bool))
        collapsed.metrics.write_text("".join(json.dumps({"step": s, "kl_true": 1.0 if s <= 2 else 9.0,
                                                         "rollout_len": 300.0}) + "\n" for s in range(1, 21)))
    with_collapsed, report_collapsed = advice("collapsed")
    assert with_collapsed == alone and "3 collapsed runs" in report_collapsed
    opted_in, report = advice("opted_in", "--external", str(csv), "--pool-include", "external")
    assert opted_in > 10 * alone and "(6 df): the 9 runs of 3 configs" in report  # the other lab's spread


def test_pool_anchor_tests_with_the_shared_sd_the_power_plan_assumes(sweep, tmp_path):
    """Issue 22, 3: without --pool-sd too, --pool-anchor compares with the anchor on the pooled SD of both
    arms (the SD the seeds-needed plan gives both), not Welch with each arm's own SD."""
    main([str(sweep), "--out", str(tmp_path), "--no-plots", "--pool-anchor", "--anchor", "qwen3-1.7b_aime24",
          "--baseline", "none"])
    summary = pd.read_csv(tmp_path / "summary.csv")
    runs = pd.read_csv(tmp_path / "runs.csv")
    ss = sum(((g - g.mean()) ** 2).sum() for _, g in runs.groupby("label")["avg_at_n"]) + 4 * 1.48**2
    pooled = (ss / 13) ** 0.5
    assert summary["sd_source"].eq("sample").all()  # each config's own interval keeps its own SD
    for _, row in summary.iterrows():
        se = pooled * (1 / 4 + 1 / 5) ** 0.5
        assert row["p_anchor"] == pytest.approx(2 * sps.t.sf(abs(row["mean"] - 54.22) / se, 13))
        assert row["verdict_sd"] == f"pooled SD {pooled:.2f} (13 df), shared with the anchor (--pool-anchor)"
    assert f"pooled run-to-run SD ({13} df)" in (tmp_path / "summary.md").read_text()


def test_no_printed_interval_leaves_the_range_of_the_score(tmp_path, capsys):
    """Issue 22, 4: two runs near 100 (and two near 0) have t-intervals far past the bounds; the report,
    summary.csv and the console cut them at 0 and 100, differences at -100 and +100, and say so."""
    write_sweep(tmp_path / "edge", effects={5e-6: -5.0, 1e-5: 5.0}, seeds=(1, 2))
    main([str(tmp_path / "edge"), "--out", str(tmp_path / "out"), "--baseline", "lr=5e-06"])
    summary = pd.read_csv(tmp_path / "out" / "summary.csv").set_index("label")
    assert summary["mean"].between(0, 100).all() and summary["sd"].gt(0).all()
    assert summary["ci_low"].min() == 0.0 and summary["ci_high"].max() == 100.0  # cut, not merely inside
    assert summary.loc["lr=1e-05", "baseline_high"] == 100.0 and summary["baseline_low"].min() >= -100.0
    report = (tmp_path / "out" / "summary.md").read_text()
    assert "cut at 0 and 100 (differences at -100 and +100)" in report
    assert "[0.00, " in report and ", 100.00]" in report
    printed = capsys.readouterr().out
    assert "100.00]" in printed and not any(f"{x}." in printed for x in ("[-", " 101", " 102", " 103"))


def test_runs_that_all_score_alike_give_no_power_advice_instead_of_a_crash(tmp_path):
    write_sweep(tmp_path / "flat", effects={5e-6: -12.0, 1e-5: 12.0}, seeds=(1, 2))  # 0 and 100 in every run
    main([str(tmp_path / "flat"), "--out", str(tmp_path / "out"), "--no-plots", "--baseline", "lr=5e-06"])
    summary = pd.read_csv(tmp_path / "out" / "summary.csv")
    assert summary["sd"].eq(0).all() and "seeds_needed" not in summary
    assert "## How many seeds" not in (tmp_path / "out" / "summary.md").read_text()


def test_winners_curse_counts_the_configs_ranked_not_those_tested(tmp_path):
    """1-run configs have no test against the anchor, but the top mean is still the best of all three."""
    write_sweep(tmp_path / "lr", seeds=(1,))
    main([str(tmp_path / "lr"), "--out", str(tmp_path / "out"), "--no-plots"])
    report = (tmp_path / "out" / "summary.md").read_text()
    assert "was picked from 3 configs" in report


def test_more_samples_per_problem_are_priced_against_seeds_at_the_runs_own_gpu_hours(sweep, tmp_path):
    main([str(sweep), "--out", str(tmp_path), "--baseline", "cfg.learning_rate=5e-06"])
    report = (tmp_path / "summary.md").read_text()
    seeds = int(re.search(r"needs \*\*(\d+) seeds per config\*\*", report).group(1))
    larger = int(re.search(r"K = 64 samples per problem would bring the SD to \S+ and the seeds needed to (\d+)",
                           report).group(1))
    # the fixture's runs: 4 GPU-hours of training, 1 of evaluation at K = 12
    priced = re.search(r"cost ([\d.]+) GPU-hours per config at K = 12 and ([\d.]+) at K = 64, (cheaper|dearer)", report)
    assert priced, report
    assert float(priced.group(1)) == pytest.approx(seeds * 5.0, abs=0.05)
    assert float(priced.group(2)) == pytest.approx(larger * (4.0 + 64 / 12), abs=0.05)
    assert priced.group(3) == ("cheaper" if float(priced.group(2)) < float(priced.group(1)) else "dearer")
    optimum = re.search(r"most precision per GPU-hour comes at K ≈ (\d+) samples per problem", report)
    assert optimum and "much cheaper" not in report  # the old unmeasured claim
    # the plotted curve: the cheapest K on it lies next to the optimum (seeds come in whole runs)
    settings = parse_args([str(sweep), "--baseline", "cfg.learning_rate=5e-06"])
    analysis = analyse(collect(settings.roots, settings.external).runs, settings, None)
    curve = [r for r in analysis.power["cost_by_k"] if r["gpu_h"] is not None]
    cheapest = min(curve, key=lambda r: r["gpu_h"])["k"]
    assert 0.5 * int(optimum.group(1)) <= cheapest <= 2 * int(optimum.group(1))
    assert (tmp_path / "plots" / "decision_cost_by_k.png").exists()


def test_the_cost_optimal_k_minimizes_variance_times_cost_and_needs_gpu_hours_per_phase():
    eval_var, k, train_var, train_h, eval_h = 5.0, 12, 8.0, 4.0, 1.0
    optimum = cost_optimal_k(eval_var, k, train_var, train_h, eval_h)
    # a config mean's variance at a fixed budget is (train_var + eval_var k / K) (train_h + eval_h K / k) / budget
    grid = np.arange(1, 400)
    product = (train_var + eval_var * k / grid) * (train_h + eval_h * grid / k)
    assert abs(grid[product.argmin()] - optimum) < 1
    assert cost_optimal_k(eval_var, k, 0.0, train_h, eval_h) is None  # all noise is eval sampling

    runs = pd.DataFrame({"gpu_hours.train": [4.0, 0.0, 2.0], "gpu_hours.evaluate": [1.0, 0.5, 3.0]})
    assert phase_costs(runs) == (3.0, 2.0)  # an untrained base model's run does not count
    assert phase_costs(runs.drop(columns="gpu_hours.train")) is None  # CPU or simulated runs
    assert phase_costs(runs.assign(**{"cfg.eval.checkpoints": "all"})) is None  # eval hours of more than K
    assert "record no GPU-hours per phase" in samples_cost_statement({"k": 12}, 64)
