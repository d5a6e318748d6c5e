"""benchmarks/eval_levers.py: the levers' PROJECTION starts from the step model's own projection of today's eval."""

from __future__ import annotations

import json

import pytest

from benchmarks import eval_levers


def test_the_levers_start_from_the_step_models_projection_and_keep_their_floors(tmp_path):
    record = eval_levers.main(["--out", str(tmp_path / "levers.json")])
    assert json.loads((tmp_path / "levers.json").read_text()) == record and record["label"] == "PROJECTION"
    rows = {row["lever"]: row for row in record["rows"]}
    today = rows["cycle's engine (0.5), LoRARequest: today's default"]
    recorded = json.loads(eval_levers.FIT.read_text())["projections"]
    [same] = [p for p in recorded if p["requests"] == 360 and p["kv_capacity_tokens"] == eval_levers.CYCLE_KV]
    assert today["seconds"] == pytest.approx(same["seconds"], rel=0.01)  # the same replay, prompts 157 vs the record's
    assert today["eval_floor_s"] == pytest.approx(same["eval_floor_s"], rel=0.01)
    fp8 = rows["own engine (0.9), fp8 KV, LoRARequest"]
    assert fp8["eval_floor_s"] == pytest.approx(today["eval_floor_s"] / 2, rel=0.01)  # half the bytes a token
    own = rows["own engine (0.9), LoRARequest"]
    for lora, merged in ((today, rows["cycle's engine (0.5), merged (eval.merge_lora=true)"]),
                         (own, rows["own engine (0.9), merged"])):  # merged weights pay a smaller fixed cost a step
        assert merged["steps"] == lora["steps"] and merged["seconds"] < lora["seconds"]
    assert own["preemptions"] < today["preemptions"] and own["steps"] < today["steps"]  # a larger KV cache
