"""The eval's step-cost model (benchmarks/eval_step_model.py): the replayed schedule, the fit, and what it
projects for several evaluations sharing one engine."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from benchmarks import eval_step_model as model
from tests.conftest import REPO

RECORD = REPO / "benchmarks/measured/aime_sized_eval_2026-12-03_auto_without_adapter.json"


def test_the_schedule_admits_in_order_and_each_step_reads_every_running_context():
    # one slot: request 0 (2 prompt tokens, 2 to generate) runs alone, then request 1 (3 prompt, 1 to generate)
    assert model.replay([2, 1], max_num_seqs=1, prompt_tokens=2).tolist() == [[1, 3], [1, 4], [1, 3]]
    # two slots: both decode in step 1, request 1 is done after it
    assert model.replay([2, 1], max_num_seqs=2, prompt_tokens=2).tolist() == [[2, 6], [1, 4]]


def synthetic_record(a: float, b: float, max_num_seqs: int = 256) -> tuple[dict, np.ndarray]:
    """A trace whose every step cost exactly a + b x (million KV tokens read), banded as eval_trace bands."""
    lengths = model.draw_lengths(360, 0)
    steps = model.replay(lengths, max_num_seqs, model.PROMPT_TOKENS)
    labels = model.band_of(steps[:, 0], max_num_seqs)
    bands = []
    for label in dict.fromkeys(labels):
        chosen = steps[[lab == label for lab in labels]]
        bands.append({"sequences": label, "steps": len(chosen),
                      "seconds": a * len(chosen) + b * chosen[:, 1].sum() / 1e6})
    return {"requests": 360, "max_num_seqs": max_num_seqs, "lengths": {"total": sum(lengths)},
            "engine_steps": {"by_sequences": bands}}, steps


def test_the_fit_recovers_the_step_cost_a_trace_was_made_with():
    record, steps = synthetic_record(a=0.002, b=0.03)
    a, b, bands = model.fit_step_cost(record, steps)
    assert a == pytest.approx(0.002, rel=1e-6) and b == pytest.approx(0.03, rel=1e-6)
    assert all(band["traced_steps"] == band["replayed_steps"] for band in bands)


def test_sharing_an_engine_saves_only_the_per_step_part():
    per_step = model.project(0.002, 0.0, 2, 360, 0, 256, model.PROMPT_TOKENS)
    assert per_step["ratio"] < 0.6  # steps are shared: two evals take barely more steps than the longer one
    per_kv_token = model.project(0.0, 0.03, 2, 360, 0, 256, model.PROMPT_TOKENS)
    assert per_kv_token["ratio"] == pytest.approx(1.0, rel=1e-3)  # each sequence reads its own KV cache
    alone = model.project(0.0, 0.03, 1, 360, 0, 256, model.PROMPT_TOKENS)
    assert per_kv_token["peak_kv_gb"] > alone["peak_kv_gb"]


def test_the_measured_trace_is_replayed_step_for_step_and_a_wrong_seed_is_refused(tmp_path):
    out = tmp_path / "model.json"
    done = subprocess.run([sys.executable, "-m", "benchmarks.eval_step_model", str(RECORD), "--copies", "1", "2",
                           "--out", str(out)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    figures = json.loads(out.read_text())
    for band in figures["bands"]:  # the replay's schedule is the engine's, to a few steps in 10,000
        assert abs(band["traced_steps"] - band["replayed_steps"]) <= 5
        assert band["fitted_s"] == pytest.approx(band["traced_s"], rel=0.1)
    one, two = figures["projections"]
    assert one["projected_s"] == pytest.approx(json.loads(RECORD.read_text())["generation_s"], rel=0.02)
    assert one["ratio"] == 1.0 and "PROJECTION" in done.stdout and two["ratio"] < 1.0

    wrong = subprocess.run([sys.executable, "-m", "benchmarks.eval_step_model", str(RECORD), "--length-seed", "1"],
                           cwd=REPO, capture_output=True, text=True, timeout=300)
    assert wrong.returncode != 0 and "pass the seed its command used" in wrong.stderr
