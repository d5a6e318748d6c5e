"""The summary says which K each run used and why (summarize/sampling.py over runs.csv's sampling columns), and
runs of different K and per-problem counts get their eval-sampling variance at their own K and counts."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from opsd_sweep.config import load_run_config
from opsd_sweep.cycle import locate_run, run_cycle
from opsd_sweep.inference.design import stratified_score
from opsd_sweep.summarize.collect import collect
from opsd_sweep.summarize.sampling import sampling_lines
from tests.conftest import compose


def sweep(results, group: str, seeds, *extra: str) -> list:
    runs = [load_run_config(compose(["executor=simulate", f"results_root={results}", f"group={group}",
                                     f"seed={seed}", *extra])) for seed in seeds]
    for run in runs:
        assert run_cycle(run)["state"] == "done"
    return runs


def test_each_runs_k_and_reason_reach_runs_csv_and_the_summary(tmp_path):
    runs = sweep(tmp_path, "auto", range(1, 6), "eval.n_samples=auto", "eval.auto_k.min_runs=3",
                 "simulate.train_gpu_hours=0.15", "eval.allocation=neyman")
    table = collect([str(tmp_path / "auto")]).runs.set_index("run_id")
    for run in runs:
        run_id, run_dir = locate_run(run)
        evaluation = json.loads(run_dir.eval_json.read_text())
        row = table.loc[run_id]
        assert row["k_source"] == "auto" and row["n_samples"] == evaluation["n_samples"]
        assert row["k_reason"] == evaluation["k_choice"]["reason"]
        assert row["allocation"] == evaluation["allocation"]["kind"]
        sizes = [len(p["samples"]) for p in evaluation["problems"]]
        assert (row["samples_min"], row["samples_max"]) == (min(sizes), max(sizes))
        correct = [sum(s["correct"] for s in p["samples"]) for p in evaluation["problems"]]
        assert row["eval_var"] == pytest.approx(1e4 * stratified_score(np.array(correct), np.array(sizes)).eval_var)
    assert set(table["allocation"]) == {"uniform", "neyman"}  # the first run had no pilot
    lines = sampling_lines(table.reset_index())
    text = "\n".join(lines)
    assert lines[0] == "## Samples per problem" and len([line for line in lines if line.startswith("| lr=")]) == 5
    for reason in table["k_reason"]:
        assert reason in text
    assert "no pilot yet" in text and "eval.auto_k.first = 4" in text


def test_declared_k_is_one_sentence(tmp_path):
    sweep(tmp_path, "plain", (1, 2), "eval.n_samples=12")
    sweep(tmp_path, "plain", (3,), "eval.n_samples=8")
    table = collect([str(tmp_path / "plain")]).runs
    assert set(table["k_reason"]) == {"declared eval.n_samples=12", "declared eval.n_samples=8"}
    assert sampling_lines(table) == ["Samples per problem: K = 8, 12 of every problem, as declared (eval.n_samples)."]


def test_summary_md_says_which_k_each_run_used_and_gives_no_larger_k_advice_across_ks(tmp_path):
    """The report a user reads: the samples section, a k column naming the range, and no 1/K advice over mixed K."""
    from opsd_sweep.summary import main as summary_main

    sweep(tmp_path, "mixed", range(1, 7), "eval.n_samples=auto", "eval.auto_k.min_runs=3",
          "simulate.train_gpu_hours=0.15")
    summary_main([str(tmp_path / "mixed"), "--assumed-sd", "3", "--baseline", "none"])
    table = collect([str(tmp_path / "mixed")]).runs
    ks = sorted({int(k) for k in table["n_samples"]})
    assert len(ks) > 1, "the pool's K should differ from eval.auto_k.first once priced"
    report = (tmp_path / "mixed" / "summary.md").read_text()
    assert "## Samples per problem" in report and "eval.auto_k.first = 4" in report
    assert f"The runs used {len(ks)} different K" in report  # no 1/K advice scaled from one K
    summary = pd.read_csv(tmp_path / "mixed" / "summary.csv")
    assert summary["k"].astype(str).tolist() == [f"{ks[0]}-{ks[-1]}"]


# --- the seeds advice says what summary.md's sections say (real run dirs, opsd_sweep.testing.rundirs) -----------------

def rundir_sweep(group, seeds, shifts=(0.0, 0.4, 0.2)) -> None:
    """lr 5e-06, 1e-05, 2e-05 (run-wide logit shifts `shifts`), `seeds` each, avg@8 on 30 problems."""
    from opsd_sweep.testing.rundirs import draw_correct, write_run

    rng = np.random.default_rng(0)
    difficulty = rng.normal(0, 1.5, 30)
    for lr, shift in zip((5e-6, 1e-5, 2e-5), shifts):
        for seed in seeds:
            write_run(group, learning_rate=lr, seed=seed, correct=draw_correct(rng, difficulty, shift, 8), rng=rng)


def how_many_seeds(summary_md) -> str:
    text = summary_md.read_text()
    return text.split("## How many seeds")[1].split("\n## ")[0]


@pytest.mark.parametrize("seeds, split", [((1, 2), False), ((1, 2, 3), True)])
def test_the_seeds_advice_splits_the_noise_only_where_the_noise_section_does(tmp_path, capsys, seeds, split):
    """With 2 runs per config the Noise section gives no split (MIN_SPLIT_RUNS = 3); the advice used to say
    'Eval sampling makes N% of the run-to-run variance' all the same, and the decision-cost plot drew a curve
    from that split."""
    from opsd_sweep.summary import main as summary_main

    rundir_sweep(tmp_path / "g", seeds)
    summary_main([str(tmp_path / "g"), "--baseline", "lr=5e-06", "--anchor", "none"])
    capsys.readouterr()
    advice, text = how_many_seeds(tmp_path / "g" / "summary.md"), (tmp_path / "g" / "summary.md").read_text()
    noise = text.split("## Noise: eval sampling vs training seed")[1]
    assert ("No per-sample data with at least 3 runs per config" not in noise) == split
    assert ("Eval sampling makes" in advice) == split
    assert ("No split of the noise into eval sampling and training seed (it needs a config with at least 3 runs"
            in advice) == (not split)
    assert (tmp_path / "g" / "plots" / "decision_cost_by_k.png").exists() == split


def test_the_console_says_no_number_of_seeds_is_enough_against_the_anchor_as_summary_md_does(tmp_path, capsys):
    """An anchor whose own SE (SD 4 over 3 runs) exceeds what +2 points allows: no seed count reaches the power.
    The console printed 'needs more than 10000 seeds' while summary.md explained it."""
    from opsd_sweep.summary import main as summary_main

    anchor = tmp_path / "anchor.yaml"
    anchor.write_text("label: wide anchor\nmetric: avg_at_n\nmean: 40.0\nsd: 4.0\nn: 3\n")
    rundir_sweep(tmp_path / "g", (1, 2, 3))
    summary_main([str(tmp_path / "g"), "--baseline", "none", "--anchor", str(anchor), "--no-plots"])
    console = " ".join(capsys.readouterr().out.split())
    advice = " ".join(how_many_seeds(tmp_path / "g" / "summary.md").replace("**", "").split())
    said = "no number of seeds is enough against the anchor here (at α = 0.05): its own uncertainty (SD 4.00 over 3"
    assert said in console and said in advice
    assert "more than 10000" not in console and "more than 10000" not in advice
