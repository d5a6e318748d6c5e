"""The reasoning-style drift signal (issue 51): uncertainty / self-check markers per 1,000 eval tokens from the
stored completions, beside the mean length and the cap-hit share, in runs.csv and against the baseline in
summary.md. Hand-built runs (opsd_sweep/testing/rundirs.py, tests/premises.fix_outcomes) with hand-written completions."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from opsd_sweep.testing.rundirs import write_run
from opsd_sweep.summarize.drift import count_markers, marker_pattern
from opsd_sweep.summary import main as summary_main
from tests.premises import fix_outcomes

THINKING = "Wait, the sum is 7? Hmm. Let me check: 3 + 4 = 7. \\boxed{7}"  # 3 markers
TERSE = "The sum is 7. \\boxed{7}"


def write_completions(run_dir, text: str) -> None:
    """Every stored completion of the run's eval replaced by `text` (its grades stay: the answer is the same)."""
    evaluation = json.loads(run_dir.eval_json.read_text())
    rows = [json.dumps({"id": p["id"], "sample": s, "text": text}) + "\n"
            for p in evaluation["problems"] for s in range(len(p["samples"]))]
    (run_dir.eval_dir / "completions.jsonl").write_text("".join(rows))


def built_sweep(root, n_tokens: dict[float, int]) -> dict[float, list]:
    """Two configs x 2 seeds, `n_tokens[lr]` long samples, every completion THINKING."""
    runs = {}
    for lr, length in n_tokens.items():
        for seed in (1, 2):
            run_dir = write_run(root / "g", learning_rate=lr, seed=seed, correct=np.ones((30, 2), dtype=bool))
            fix_outcomes(run_dir.eval_json, [(i + seed) % 3 for i in range(30)], n_tokens=length)
            write_completions(run_dir, THINKING)
            runs.setdefault(lr, []).append(run_dir)
    return runs


def summarise(root, out) -> tuple[pd.DataFrame, str]:
    summary_main([str(root), "--out", str(out), "--anchor", "none", "--no-plots", "--baseline", "lr=1e-05"])
    return pd.read_csv(out / "runs.csv").set_index("label"), (out / "summary.md").read_text()


def test_the_drift_signal_moves_when_the_markers_are_edited_out(tmp_path):
    runs = built_sweep(tmp_path / "results", {1e-5: 100, 2e-5: 50})
    before, report = summarise(tmp_path / "results", tmp_path / "before")
    assert {"mean_tokens", "eval_cap_frac", "eval_markers_per_1k"} <= set(before.columns)
    assert before.loc["lr=1e-05", "eval_markers_per_1k"].tolist() == [30.0, 30.0]  # 3 markers per 100 tokens
    assert before.loc["lr=2e-05", "eval_markers_per_1k"].tolist() == [60.0, 60.0]  # 3 per 50
    assert "## Reasoning-style drift" in report
    assert "| lr=1e-05 | 2 | 100 | 0% | 30.00 | (the baseline) |" in report
    assert "| lr=2e-05 | 2 | 50 | 0% | 60.00 | length x0.50, cap-hit +0 pts, markers x2.00 |" in report

    for run_dir in runs[2e-5]:
        write_completions(run_dir, TERSE)  # the same answers, the markers gone
    after, report = summarise(tmp_path / "results", tmp_path / "after")
    assert after.loc["lr=2e-05", "eval_markers_per_1k"].tolist() == [0.0, 0.0]
    assert after.loc["lr=1e-05", "eval_markers_per_1k"].tolist() == [30.0, 30.0]
    assert "| lr=2e-05 | 2 | 50 | 0% | 0.00 | length x0.50, cap-hit +0 pts, markers x0.00 |" in report
    assert after.loc["lr=2e-05", "avg_at_n"].tolist() == before.loc["lr=2e-05", "avg_at_n"].tolist()

    for run_dir in runs[1e-5]:  # a baseline with no markers: no ratio to a zero rate, the difference instead
        write_completions(run_dir, TERSE)
    for run_dir in runs[2e-5]:
        write_completions(run_dir, THINKING)
    _, report = summarise(tmp_path / "results", tmp_path / "zero")
    assert "| lr=2e-05 | 2 | 50 | 0% | 60.00 | length x0.50, cap-hit +0 pts, markers +60.00 (the baseline has none) |" \
        in report


def test_a_run_without_stored_completions_has_no_rate_and_no_section(tmp_path):
    write_run(tmp_path / "results" / "g", learning_rate=1e-5, seed=1, correct=np.ones((30, 2), dtype=bool))
    write_run(tmp_path / "results" / "g", learning_rate=1e-5, seed=2, correct=np.ones((30, 2), dtype=bool))
    runs, report = summarise(tmp_path / "results", tmp_path / "out")
    assert runs["eval_markers_per_1k"].isna().all()
    assert "## Reasoning-style drift" not in report


@pytest.mark.parametrize("text, expected", [
    ("Wait, hmm. Let me double-check: awaited HMMM actually.", 5),  # 'awaited' is no 'wait'
    ("Let me recheck. Double check; maybe perhaps not sure. Is that right?", 6),
    ("So the answer is \\boxed{12}.", 0),
])
def test_markers_are_whole_words_case_insensitive_each_stretch_once(text, expected):
    assert count_markers(text) == expected


def test_a_marker_that_is_not_a_lowercase_expression_is_named(tmp_path):
    for entry in ("Wait", "let me (check"):
        path = tmp_path / f"markers{len(entry)}.yaml"
        path.write_text(json.dumps({"markers": ["hmm", entry]}))
        with pytest.raises(ValueError, match=re.escape(f"{path}: marker {entry!r}")):
            marker_pattern(path)
