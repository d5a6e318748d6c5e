"""`summary --external FILE` refuses a CSV it cannot use in one message naming the file, the line and column,
and the fix (SystemExit, no traceback), before anything is written; a good one keeps its text columns."""

from __future__ import annotations

import pandas as pd
import pytest

from opsd_sweep.summarize.collect import read_external
from opsd_sweep.summary import main as summary_main


def refusal(tmp_path, external) -> str:
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as stopped:
        summary_main([str(tmp_path / "results"), "--external", str(external), "--out", str(out), "--no-plots"])
    assert not out.exists()
    return str(stopped.value.code)


def test_a_missing_file_is_named_with_the_fix(tmp_path):
    message = refusal(tmp_path, tmp_path / "published.csv")
    assert f"external CSV {tmp_path / 'published.csv'} does not exist" in message
    assert "analysis/external/published_opsd_aime24.csv" in message


def test_missing_columns_are_named(tmp_path):
    (bad := tmp_path / "bad.csv").write_text("name,avg_at_n\nx,1\n")
    message = refusal(tmp_path, bad)
    assert f"external CSV {bad}: missing column(s) ['config', 'run_id']" in message and "`config` (a label)" in message


def test_a_metric_that_is_not_a_number_is_named_by_line_run_and_column(tmp_path):
    (bad := tmp_path / "bad.csv").write_text("config,run_id,avg_at_n,reference\npaper,a,51.5,x\npaper,b,abc,y\n")
    message = refusal(tmp_path, bad)
    assert f"external CSV {bad}" in message
    assert "line 3 (run_id 'b'), column 'avg_at_n': 'abc'" in message and "as a number (e.g. 54.2)" in message


def test_a_mostly_numeric_column_is_a_metric_and_a_text_column_is_a_note(tmp_path):
    (bad := tmp_path / "bad.csv").write_text("config,run_id,score,reference\np,a,51.5,x\np,b,50,y\np,c,5O,z\n")
    assert "line 4 (run_id 'c'), column 'score': '5O'" in refusal(tmp_path, bad)
    (good := tmp_path / "good.csv").write_text("config,run_id,avg_at_n,pass_at_4,reference\np,a,51.5,,paper x\n"
                                               "p,b,50,70,paper y\n")
    frame = read_external(str(good))
    assert list(frame["avg_at_n"]) == [51.5, 50.0] and frame["pass_at_4"].isna().tolist() == [True, False]
    assert list(frame["reference"]) == ["paper x", "paper y"]
    pd.testing.assert_series_equal(frame["label"], pd.Series(["p [external]"] * 2, name="label"), check_dtype=False)
