"""benchmarks/compare_on_gpu.py, the GPU run of `evaluate compare`, run on the CPU with two hf settings: the same
per-sample seeds and the same logits draw every sample alike, and the record says so."""

from __future__ import annotations

from benchmarks.compare_on_gpu import main


def test_two_settings_that_draw_alike_are_equivalent_with_every_completion_identical(tmp_path, cache_dir):
    report = main(["--work", str(tmp_path), "--out", str(tmp_path / "out"), "--backend", "hf",
                   "--world", "profile=tiny", f"cache_dir={cache_dir}", "eval.max_problems=6", "eval.shard_size=4",
                   "--candidate", "eval.hf_cache=static", "--n-samples", "2", "--max-new-tokens", "24"])
    assert report["identical_completions"] == report["samples"] == 12
    assert (report["compare"]["verdict"], report["compare"]["difference"]) == ("equivalent", 0.0)
    assert report["metrics"]["exact"]["avg_at_n"] == report["metrics"]["candidate"]["avg_at_n"]
    assert (tmp_path / "out" / "compare_on_gpu.json").exists()
