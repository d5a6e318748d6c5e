"""eval.merge_lora=true on a 1-GPU cycle: the trainer's rollout engine serves the evaluation with the model dir the
evaluator merged (the base model's decode speed). The engine handed over gets that dir, not the adapter; the
weights it loads are the dir's own bytes; its eval.json is not taken for the wrong evaluation of before
2026-12-03, which served the base weights there."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from opsd_sweep.evaluate import evaluator
from opsd_sweep.evaluate.generate import HFEngine
from opsd_sweep.run.identity import ON_ROLLOUT_ENGINE, ON_ROLLOUT_ENGINE_MERGED, evaluation_problem
from opsd_sweep.train.rollout_vllm import projection_weights
from tests.evaluate.conftest import eval_run
from tests.reliability.test_standalone_guarantees import write_adapter


@pytest.fixture
def merged_run(tiny_world, tmp_path, monkeypatch):
    """A merge_lora run on 'vllm' and a tiny adapter (q_proj, v_proj) to evaluate."""
    run = eval_run(tiny_world, tmp_path, "eval.merge_lora=true")
    checkpoint = tmp_path / "checkpoint-4"
    write_adapter(checkpoint, 0, run.model.path)
    monkeypatch.setattr(evaluator, "resolve_backend", lambda *_args, **_kw: ("vllm", "vllm on this GPU"))
    return run, checkpoint


def test_the_rollout_engine_is_handed_the_merged_model_dir_and_its_scores_stand(merged_run, tmp_path):
    run, checkpoint = merged_run
    handed = []

    def attach(spec):  # the stand-in for the rollout engine loading the spec's weights: hf on the CPU
        handed.append((spec, json.loads((Path(spec.model_path) / "merged_from.json").read_text())))
        return HFEngine.from_spec(replace(spec, backend="hf"), "cpu")

    eval_dir = tmp_path / "eval"
    result = evaluator.evaluate(run, checkpoint, eval_dir, attach=attach)
    ((spec, merged_from),) = handed
    assert spec.adapter_path is None and spec.model_path == str(eval_dir / "merged")
    assert {k: merged_from[k] for k in ("model", "adapter")} == {"model": run.model.path, "adapter": str(checkpoint)}
    assert result["evaluator"]["serving"] == "vllm merge_lora"
    assert result["timing"]["engine"] == ON_ROLLOUT_ENGINE_MERGED
    assert evaluation_problem(result, checkpoint, True, run.eval.n_samples) is None
    assert evaluator.evaluate(run, checkpoint, eval_dir, attach=attach) == result  # up to date, not served again
    assert len(handed) == 1
    scored_base = result | {"timing": result["timing"] | {"engine": ON_ROLLOUT_ENGINE}}  # the old wrong label
    assert "served the base weights" in evaluation_problem(scored_base, checkpoint, True, run.eval.n_samples)


def test_the_engine_loads_the_merged_dirs_own_projections_under_its_names(merged_run, tmp_path):
    run, checkpoint = merged_run
    merged = Path(evaluator.merge_adapter(evaluator.engine_spec(run, checkpoint), tmp_path / "merged").model_path)
    saved = load_file(merged / "model.safetensors")
    base = load_file(next(Path(run.model.path).glob("*.safetensors")))
    names = {"model.layers.0.self_attn.q_proj.weight": "model.layers.0.self_attn.q_proj.base_layer.weight",
             "model.layers.1.self_attn.v_proj.weight": "model.layers.1.self_attn.v_proj.base_layer.weight"}
    loaded = dict(projection_weights(merged, names, "cpu"))
    assert set(loaded) == set(names.values())
    for saved_name, engine_name in names.items():
        assert torch.equal(loaded[engine_name], saved[saved_name])
        assert not torch.equal(loaded[engine_name], base[saved_name])  # the adapter's update is in it
    with pytest.raises(RuntimeError, match=r"lacks 1 of the adapted projections .*model.layers.9.mlp.up_proj.weight"):
        next(projection_weights(merged, names | {"model.layers.9.mlp.up_proj.weight": "x"}, "cpu"))


def test_an_adapter_rewritten_at_the_same_path_is_merged_again_not_served_stale(merged_run, tmp_path):
    """The merged dir is kept between rounds of an evaluation and reused when it was merged from the same inputs:
    by content, not path, or a checkpoint rewritten in place would be scored with its old weights."""
    run, checkpoint = merged_run
    spec = evaluator.engine_spec(run, checkpoint)
    name = "model.layers.0.self_attn.q_proj.weight"
    first = load_file(Path(evaluator.merge_adapter(spec, tmp_path / "merged").model_path) / "model.safetensors")[name]
    write_adapter(checkpoint, 1, run.model.path)  # other weights, same path
    again = load_file(Path(evaluator.merge_adapter(spec, tmp_path / "merged").model_path) / "model.safetensors")[name]
    fresh = load_file(Path(evaluator.merge_adapter(spec, tmp_path / "fresh").model_path) / "model.safetensors")[name]
    assert not torch.equal(again, first) and torch.equal(again, fresh)
