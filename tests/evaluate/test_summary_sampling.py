"""The summary's "Samples per problem" account (summarize/sampling.py) on real tiny evaluations: it speaks of this
sweep's runs only; an external CSV's rows (published results, with their own n_samples) were planned by nobody here."""

from __future__ import annotations

from opsd_sweep.evaluate.standalone import evaluate_standalone
from opsd_sweep.summary import main as summary_main
from tests.evaluate.conftest import eval_run


def test_external_rows_with_n_samples_enter_neither_the_sentence_nor_the_table(tmp_path, tiny_world):
    results = tmp_path / "results"
    for seed in (1, 2):
        evaluate_standalone(eval_run(tiny_world, results, "group=declared", f"seed={seed}"))
    external = tmp_path / "published.csv"
    external.write_text("config,run_id,avg_at_n,n_samples\npaper,paper-1,51.5,12\n")
    summary_main([str(results / "declared"), "--external", str(external), "--out", str(tmp_path / "out")])
    report = (tmp_path / "out" / "summary.md").read_text()
    assert "Samples per problem: K = 2 of every problem, as declared (eval.n_samples)." in report
    assert "## Samples per problem" not in report and "K = 2, 12" not in report
