"""Issue 16, items 12 and 13: one pre-flight over the whole grid lists every problem of the config and
of the files it names, before any compute; group stays inside results_root; a rejected sweep leaves
nothing on disk."""

from __future__ import annotations

import pytest

from tests.conftest import run_sweep
from tests.orchestration.conftest import TINY

pytestmark = pytest.mark.slow


def test_one_error_lists_every_problem_of_the_grid_and_nothing_is_written(tmp_path, tiny_cache):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    results = tmp_path / "results"
    tiny_model = tiny_cache / "tiny" / "model"
    proc = run_sweep(["-m", *TINY, "clip=-1", "loss_top_k=100000", "train.max_steps=0", f"data.path={empty}",
                      f"eval.path={tmp_path}/missing.jsonl", f"model.path={tiny_model},nobody/no-such-model"],
                     results, tiny_cache, env_extra={"HF_HUB_OFFLINE": "1"})
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "the sweep was not started: 2 of 2 jobs cannot run" in output, output[-3000:]
    for expected in ("clip=-1.0 must be >= 0",
                     f"loss_top_k=100000 exceeds the vocabulary of model.path={tiny_model}",
                     "train.max_steps=0 trains nothing",
                     f"data.path={empty} holds no records",
                     f"eval.path={tmp_path}/missing.jsonl does not exist",
                     "model.path=nobody/no-such-model: the hub id is not in the local cache and HF_HUB_OFFLINE=1"):
        assert expected in output, (expected, output[-3000:])
    assert "Traceback" not in output
    assert not results.exists() or not any(results.rglob("*")), sorted(results.rglob("*"))


def test_group_cannot_leave_the_results_root(tmp_path, cache_dir):
    results = tmp_path / "deep" / "results"
    proc = run_sweep(["-m", "executor=simulate", "group=../../escaped", "seed=1"], results, cache_dir)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1
    assert "group='../../escaped' must name a folder inside results_root" in output, output[-3000:]
    assert not (tmp_path / "escaped").exists() and not results.exists()


def test_a_bad_value_in_a_single_run_is_one_paragraph_and_leaves_nothing(tmp_path, cache_dir):
    """Without -m Hydra runs the job itself: a refused config is said in a few lines, with no traceback,
    and the output folder Hydra made for it is removed again."""
    results = tmp_path / "results"
    proc = run_sweep(["executor=simulate", "learning_rate=-1"], results, cache_dir)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "learning_rate=-1.0 must be > 0 (e.g. learning_rate=5e-6)" in output, output
    assert "Traceback" not in output and len(output.strip().splitlines()) <= 4, output
    assert not results.exists(), sorted(results.rglob("*"))
