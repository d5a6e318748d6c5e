"""The plan (sample-major shards, stable seeds), its fingerprint and the shard store."""

from __future__ import annotations

from dataclasses import replace

import pytest

from opsd_sweep.evaluate.engine import EngineSpec, Sample, Sampling
from opsd_sweep.evaluate.runner import engine_groups
from opsd_sweep.evaluate.shards import ShardStore, fingerprint, plan_shards

IDS = ["p0", "p1", "p2"]
SPEC = EngineSpec(backend="hf", model_path="/m", tokenizer_path="/m", adapter_path=None, dtype="float32",
                  attn_implementation="sdpa", sampling=Sampling(1.0, 1.0, -1, 8, 0), batch_size=4, max_num_seqs=4, max_in_flight=4,
                  hf_cache="dynamic", tensor_parallel_size=1, gpu_memory_utilization=0.9, max_model_len=64, seed=1)


def test_plan_is_sample_major_and_covers_every_job_once():
    shards = plan_shards(IDS, n_samples=4, shard_size=5, seed=1)
    jobs = [(j.problem, j.sample) for s in shards for j in s.jobs]
    assert jobs[:4] == [(0, 0), (1, 0), (2, 0), (0, 1)]
    assert sorted(jobs) == [(p, s) for p in range(3) for s in range(4)]
    assert [len(s.jobs) for s in shards] == [5, 5, 2]


def test_sample_seeds_do_not_depend_on_sharding_or_order():
    def seeds(shards):
        return {(IDS[j.problem], j.sample): j.seed for s in shards for j in s.jobs}

    assert seeds(plan_shards(IDS, 4, 5, seed=1)) == seeds(plan_shards(IDS, 4, 2, seed=1))
    assert seeds(plan_shards(IDS, 4, 5, seed=1)) != seeds(plan_shards(IDS, 4, 5, seed=2))
    assert len(set(seeds(plan_shards(IDS, 4, 5, seed=1)).values())) == 12


EVALUATOR = {"backend": "hf", "serving": "base model", "version": 1}


def fingerprint_of(spec, *plan):
    return fingerprint(spec, EVALUATOR, *plan)


def test_fingerprint_ignores_layout_but_not_what_is_sampled():
    base = fingerprint(SPEC, EVALUATOR, [[1, 2]], IDS, 4, 5, 1)
    assert fingerprint_of(replace(SPEC, batch_size=64, tensor_parallel_size=2, max_model_len=99), [[1, 2]], IDS, 4, 5,
                       1) == base
    assert fingerprint_of(replace(SPEC, adapter_path="/ckpt"), [[1, 2]], IDS, 4, 5, 1) != base
    assert fingerprint_of(replace(SPEC, sampling=Sampling(0.7, 1.0, -1, 8, 0)), [[1, 2]], IDS, 4, 5, 1) != base
    assert fingerprint(SPEC, EVALUATOR, [[1, 3]], IDS, 4, 5, 1) != base
    assert fingerprint(SPEC, EVALUATOR, [[1, 2]], IDS, 4, 5, 2) != base
    assert fingerprint(SPEC, EVALUATOR | {"version": 2}, [[1, 2]], IDS, 4, 5, 1) != base


def test_fingerprint_follows_the_adapters_content_not_its_path(tmp_path):
    adapter = tmp_path / "checkpoint-3"
    adapter.mkdir()
    (adapter / "adapter_model.safetensors").write_bytes(b"weights one")
    before = fingerprint_of(replace(SPEC, adapter_path=str(adapter)), [[1, 2]], IDS, 4, 5, 1)
    moved = tmp_path / "elsewhere"
    adapter.rename(moved)
    assert fingerprint_of(replace(SPEC, adapter_path=str(moved)), [[1, 2]], IDS, 4, 5, 1) == before
    (moved / "adapter_model.safetensors").write_bytes(b"weights two")  # rewritten at the same path
    assert fingerprint_of(replace(SPEC, adapter_path=str(moved)), [[1, 2]], IDS, 4, 5, 1) != before


def test_store_keeps_its_plan_and_drops_another(tmp_path):
    shards = plan_shards(IDS, 2, 4, seed=1)
    store = ShardStore(tmp_path / "shards", "plan-a")
    store.prepare()
    store.write(shards[0], [Sample(f"t{i}", i, "stop") for i in range(4)])
    ShardStore(tmp_path / "shards", "plan-a").prepare()
    assert store.done(0) and not store.done(1)
    assert store.read(shards[:1])[(1, 0)] == Sample("t1", 1, "stop")
    ShardStore(tmp_path / "shards", "plan-b").prepare()
    assert not store.done(0)


def test_engine_groups_follow_gpus_and_tensor_parallel_size():
    assert engine_groups("vllm", 1, None, ["0", "1", "2", "3"]) == [["0"], ["1"], ["2"], ["3"]]
    assert engine_groups("vllm", 2, None, ["0", "1", "2", "3"]) == [["0", "1"], ["2", "3"]]
    assert engine_groups("vllm", 1, 2, ["4", "5", "6"]) == [["4"], ["5"]]
    assert engine_groups("hf", 4, None, ["0", "1"]) == [["0"], ["1"]]
    assert engine_groups("hf", 1, None, []) == [None]
    assert engine_groups("hf", 1, 2, []) == [None, None]
    with pytest.raises(RuntimeError, match="eval.backend=vllm needs GPUs"):
        engine_groups("vllm", 1, None, [])
    with pytest.raises(RuntimeError, match="eval.tensor_parallel_size=4 needs 4 GPUs"):
        engine_groups("vllm", 4, None, ["0", "1"])
    with pytest.raises(RuntimeError, match="eval.engines=3 needs 3 GPUs"):
        engine_groups("vllm", 1, 3, ["0", "1"])


def test_an_fp8_kv_cache_evaluator_is_another_plan_and_the_default_keeps_its_fingerprint():
    from opsd_sweep.run.identity import evaluator_identity

    default = evaluator_identity("vllm", None, False)
    assert default == {"backend": "vllm", "serving": "base model", "version": 1}  # what eval.json files hold today
    fp8 = evaluator_identity("vllm", None, False, "fp8")
    assert fp8 == default | {"kv_cache": "fp8"}
    plan = ([[1, 2]] * 3, IDS, 2, 16, 1)
    assert fingerprint(SPEC, default, *plan) != fingerprint(SPEC, fp8, *plan)
