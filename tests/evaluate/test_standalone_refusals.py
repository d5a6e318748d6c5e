"""`python -m opsd_sweep.evaluate` refuses a bad evaluation before any compute, as `python -m opsd_sweep` does:
the problem, its fix and "Nothing was run or written.", a non-zero exit, no traceback, no file left; a missing
eval.checkpoint is one such problem, with -m too."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO


def evaluate(args: list[str], results, cache) -> subprocess.CompletedProcess:
    env = dict(os.environ, OPSD_RESULTS=str(results), OPSD_CACHE=str(cache))
    return subprocess.run([sys.executable, "-m", "opsd_sweep.evaluate", *args, "profile=tiny", "group=e1"],
                          cwd=REPO, env=env, text=True, capture_output=True, timeout=120, check=False)


def files_under(path) -> list:
    return [p for p in path.rglob("*") if p.is_file()] if path.exists() else []


@pytest.mark.parametrize(("args", "message"), [
    (["eval.n_samples=0"], "eval.n_samples=0 must be a whole number >= 1"),
    (["eval.checkpoints=race", "eval.n_samples=auto"], "drop eval.checkpoints=race"),
    (["eval.checkpoint=/tmp/nope-opsd/checkpoint-3"],
     "eval.checkpoint=/tmp/nope-opsd/checkpoint-3 does not exist; point it at a saved checkpoint dir"),
])
def test_a_single_evaluation_is_refused_in_one_paragraph(tmp_path, cache_dir, args, message):
    results = tmp_path / "results"
    proc = evaluate(args, results, cache_dir)
    assert proc.returncode != 0, proc.stdout[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert message in proc.stderr and proc.stderr.rstrip().endswith("Nothing was run or written."), proc.stderr
    assert not files_under(results), files_under(results)


def test_a_checkpoint_without_weights_is_refused_naming_both_kinds(tmp_path, cache_dir):
    empty = tmp_path / "checkpoint-7"
    empty.mkdir()
    proc = evaluate([f"eval.checkpoint={empty}"], tmp_path / "results", cache_dir)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert f"checkpoint {empty} holds neither adapter_config.json" in proc.stderr
    assert not files_under(tmp_path / "results")


def test_a_missing_checkpoint_refuses_the_sweep_before_any_job(tmp_path, cache_dir):
    results = tmp_path / "results"
    proc = evaluate(["-m", "eval.checkpoint=/tmp/nope-opsd/checkpoint-3,/tmp/nope-opsd/checkpoint-4"], results,
                    cache_dir)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "the sweep was not started: 2 of 2 jobs cannot run" in proc.stderr
    assert "eval.checkpoint=/tmp/nope-opsd/checkpoint-4 does not exist" in proc.stderr
    assert not files_under(results), files_under(results)
