"""benchmarks/bench_read_results.py on a few runs: its table and its record (never its timings: tests must
not depend on how fast the machine is)."""

from __future__ import annotations

import json

from benchmarks import bench_read_results as bench


def test_the_benchmark_prints_its_table_and_writes_a_sane_record(tmp_path, capsys):
    work, out = tmp_path / "work", tmp_path / "measured"
    work.mkdir()
    record = bench.main(["--runs", "12", "--problems", "6", "--samples", "4", "--steps", "12", "--repeats", "2",
                         "--work", str(work), "--out-dir", str(out), "--record", "--profile"])
    printed = capsys.readouterr().out

    assert "reading a results root of 12 hand-built runs" in printed
    for label in bench.PARTS.values():
        assert label in printed
    assert "target: (b) <= 10x the raw read: " in printed
    assert "cProfile of one collect()" in printed and "collect.py" in printed

    written = json.loads((out / f"read_results_{record['date']}.json").read_text())
    assert written == {k: v for k, v in record.items() if k != "path"}
    assert written["runs"] == 12 and written["repeats"] == 2 and written["run_dir"]["samples"] == 4
    for part in ("raw", "collect", "record"):  # the status table's part may report an error, never these
        measured = written["parts"][part]
        assert measured["ms_per_run"] > 0 and len(measured["repetitions_s"]) == 2
        assert measured["ratio_to_raw"] > 0
    assert written["parts"]["raw"]["ratio_to_raw"] == 1.0
    assert written["target"]["pass"] == (written["target"]["ratio"] <= 10)
    # the tables read back every hand-built run: 5 learning rates, all counted, 6 x 4 samples each
    tables = written["tables"]
    assert tables["runs"] == tables["counted"] == 12 and tables["skipped"] == 0
    assert tables["samples"] == 12 * 6 * 4 and len(tables["labels"]) == len(bench.LEARNING_RATES)
    assert len(written["profile_collect_top15"]) == 15
    assert not list(work.iterdir())  # the run dirs were built in a temp dir, removed after
