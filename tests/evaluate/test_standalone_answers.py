"""Issue 48: python -m opsd_sweep.evaluate answers as a cycle does. A skipped evaluation says "skipped (already done)"
in a sweep's lines, as a skipped cycle does (it said "done"); a failed one is recorded, named by its cause and
answered as failed, so a single evaluation exits non-zero and a sweep goes on and counts it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.evaluate.conftest import eval_overrides

pytestmark = pytest.mark.slow

SMALL = ("train.max_steps=0", "eval.max_problems=2", "eval.n_samples=1", "eval.max_new_tokens=12")


def evaluate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "opsd_sweep.evaluate", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=600, env=dict(os.environ, PYTHONUNBUFFERED="1"))


def test_a_skipped_evaluation_in_a_sweep_says_skipped_already_done(tiny_world, tmp_path):
    args = eval_overrides(tiny_world, tmp_path, *SMALL)
    assert evaluate(*args, "seed=1").returncode == 0
    proc = evaluate("-m", *args, "seed=1,2")
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    assert "[evaluate] skip eval-tiny-qwen3-base-s1-" in output and "already done" in output
    assert "seed=1: skipped (already done)" in output and "seed=2: done after" in output, output[-3000:]


def test_a_failed_evaluation_exits_non_zero_naming_its_cause_and_a_sweep_counts_it(tiny_world, tmp_path):
    broken = tmp_path / "eval.jsonl"  # the pre-flight reads its first record only; the evaluation reads them all
    broken.write_text('{"problem": "1+2*3=?", "answer": "7"}\n{"problem": \n')
    args = eval_overrides(tiny_world, tmp_path / "results", *SMALL, f"eval.path={broken}")
    single = evaluate(*args)
    assert single.returncode == 1, single.stdout[-3000:] + single.stderr[-3000:]
    assert "[evaluate] FAILED eval-tiny-qwen3-base-s1-" in single.stdout
    assert "JSONDecodeError: Expecting value" in single.stdout.splitlines()[-1]
    sweep = evaluate("-m", *args, "seed=1,2")
    output = sweep.stdout + sweep.stderr
    assert sweep.returncode == 1, output[-3000:]
    assert "2 job(s) of the sweep failed or are unfinished:" in output and "JSONDecodeError" in output
    assert "done 0, running 0, failed 2, pending 0" in output  # both ran: a failure stops no sweep
