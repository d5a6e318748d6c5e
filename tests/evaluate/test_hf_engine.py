"""The hf engine on small Qwen3 models built from config: the LoRA checkpoint is served exactly (no bf16
merge), generate calls are filled across shards, and every sample comes from its own job's seed."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from opsd_sweep.evaluate.evaluator import merge_adapter
from opsd_sweep.evaluate.engine import EngineSpec, Sampling
from opsd_sweep.evaluate.generate import HFEngine, SeededSampler
from opsd_sweep.evaluate.shards import plan_shards
from opsd_sweep.tiny import build_tokenizer

LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
SAMPLING = Sampling(temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=8, min_new_tokens=0)


def save_qwen3(root: Path, dtype: str) -> Path:
    """A 2-layer Qwen3 (random init, seed 0) and its tokenizer saved as a model dir."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    tokenizer = build_tokenizer([f"{a}+{b}*{c}=?" for a in range(10) for b in range(10) for c in range(3)],
                                vocab_size=300)
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(Qwen3Config(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=256,
        tie_word_embeddings=True, pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id))
    model.to(getattr(torch, dtype)).save_pretrained(root)
    tokenizer.save_pretrained(root)
    return root


def spec_for(model_dir: Path, adapter_dir: Path | None, dtype: str, batch_size: int = 4) -> EngineSpec:
    return EngineSpec(backend="hf", model_path=str(model_dir), tokenizer_path=str(model_dir),
                      adapter_path=str(adapter_dir) if adapter_dir else None, dtype=dtype,
                      attn_implementation="sdpa", sampling=SAMPLING, batch_size=batch_size, max_num_seqs=batch_size,
                      max_in_flight=batch_size, hf_cache="dynamic", tensor_parallel_size=1,
                      gpu_memory_utilization=0.9, max_model_len=256, seed=0)


def bf16_ulp_above(weight):
    """The bf16 spacing above |w| for bf16 values w: frexp gives |w| = m 2^e, m in [0.5, 1), 8 bits."""
    import torch

    _, exponent = torch.frexp(weight.float())
    return torch.ldexp(torch.ones_like(weight, dtype=torch.float32), exponent - 8)


def save_exact_adapter(model_dir: Path, out: Path, ulps) -> dict:
    """A full-rank LoRA adapter (A = identity, scaling 1) whose update moves every targeted weight away
    from zero by `ulps(name, weight)` bf16 ulps, computed exactly in float32; returns base + update."""
    import torch
    from peft import LoraConfig, get_peft_model
    from peft.tuners.lora import LoraLayer
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    r = max(module.in_features for name, module in model.named_modules()
            if name.endswith(tuple(LORA_TARGETS)))  # rank >= every fan-in: A can be an identity
    peft_model = get_peft_model(model, LoraConfig(r=r, lora_alpha=r, target_modules=LORA_TARGETS))
    expected = {}
    with torch.no_grad():
        for name, module in peft_model.named_modules():
            if isinstance(module, LoraLayer):
                weight = module.get_base_layer().weight
                delta = torch.sign(weight) * ulps(name, weight) * bf16_ulp_above(weight)
                module.lora_A["default"].weight.copy_(torch.eye(r, weight.shape[1]))
                module.lora_B["default"].weight.zero_()[:, :weight.shape[1]] = delta
                expected[name.removeprefix("base_model.model.") + ".weight"] = weight + delta
    peft_model.save_pretrained(out)
    return expected


@pytest.fixture(scope="module")
def bf16_world(tmp_path_factory) -> Path:
    """A bf16 model and an adapter whose update is below half a bf16 ulp of every weight it touches."""
    root = tmp_path_factory.mktemp("bf16_world")
    save_qwen3(root / "model", "bfloat16")
    save_exact_adapter(root / "model", root / "adapter", lambda name, weight: 0.45)
    return root


def logits(model, ids):
    import torch

    with torch.no_grad():
        return model(input_ids=ids).logits


def test_hf_engine_scores_a_sub_ulp_lora_update_exactly_as_the_peft_model(bf16_world):
    """torch.equal, not a tolerance: the whole update is below rounding level, so any tolerance wide
    enough to matter would also accept the base model. Same modules, inputs and CPU kernels: bitwise."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    def base_model():
        return AutoModelForCausalLM.from_pretrained(bf16_world / "model", dtype=torch.bfloat16).eval()

    merged = PeftModel.from_pretrained(base_model(), bf16_world / "adapter").merge_and_unload()
    untouched = base_model().state_dict()
    assert all(torch.equal(w, untouched[name]) for name, w in merged.state_dict().items()), \
        "the adapter must be one a bf16 merge loses entirely"

    engine = HFEngine.from_spec(spec_for(bf16_world / "model", bf16_world / "adapter", "bfloat16"), "cpu")
    peft = PeftModel.from_pretrained(base_model(), bf16_world / "adapter").eval()
    vocab = engine.model.config.vocab_size
    ids = torch.randint(3, vocab, (2, 12), generator=torch.Generator().manual_seed(0))
    served = logits(engine.model, ids)
    assert torch.equal(served, logits(peft, ids))
    assert not torch.equal(served, logits(base_model(), ids))  # fails again if the engine merges in bf16
    assert torch.equal(logits(merged, ids), logits(base_model(), ids))


def test_merge_lora_keeps_the_updates_bf16_holds_and_counts_those_it_loses(bf16_world, tmp_path, capsys):
    """q, v, gate and down get an update of one ulp (exact in bf16); k, o and up 0.45 ulp (lost)."""
    import torch
    from safetensors.torch import load_file

    def ulps(name, weight):  # per layer so the test can tell which weights keep their update
        return 1.0 if name.endswith(("q_proj", "v_proj", "gate_proj", "down_proj")) else 0.45

    expected = save_exact_adapter(bf16_world / "model", tmp_path / "adapter", ulps)
    spec = spec_for(bf16_world / "model", tmp_path / "adapter", "bfloat16")
    served = merge_adapter(spec, tmp_path / "merged")
    assert (served.model_path, served.adapter_path) == (str(tmp_path / "merged"), None)
    saved = load_file(tmp_path / "merged" / "model.safetensors")
    assert all(saved[name].dtype == torch.bfloat16 for name in expected)
    kept = {name for name in expected if name.endswith(("q_proj.weight", "v_proj.weight", "gate_proj.weight",
                                                        "down_proj.weight"))}
    for name, target in expected.items():
        if name in kept:
            assert torch.equal(saved[name].float(), target), name  # base + one ulp, exactly
        else:
            assert torch.equal(saved[name], target.to(torch.bfloat16)), name  # back to the base weight
            assert not torch.equal(saved[name].float(), target), name
    changed = sum(int((target != 0).sum()) for target in expected.values())  # zero weights get no update
    lost = sum(int((expected[name] != 0).sum()) for name in expected if name not in kept)
    line = f"the adapter changes {changed} weights; saved in bfloat16, {lost} of them round back"
    assert line in capsys.readouterr().out


@pytest.fixture(scope="module")
def fp32_engine(tmp_path_factory) -> HFEngine:
    return HFEngine.from_spec(spec_for(save_qwen3(tmp_path_factory.mktemp("fp32") / "model", "float32"), None,
                                       "float32"), "cpu")


PROMPTS = [[5 + p] * (3 + p % 4) + [7, 8] for p in range(6)]  # 6 problems, 5..8 tokens: batches are padded


def serve(engine: HFEngine, shards, batch_size: int):
    """Serve `shards` with a generate-call counter; return (finished shards in order, calls, progress)."""
    served, calls, progress = [], [], []
    engine.batch_size = batch_size
    real = engine.generate

    def counted(prompts, seeds):
        calls.append(len(prompts))
        return real(prompts, seeds)

    engine.generate = counted
    feed = iter(shards)
    try:
        engine.serve(PROMPTS, lambda: next(feed, None), lambda *done: served.append(done), progress.append)
    finally:
        del engine.generate
    return served, calls, progress


def test_hf_engine_fills_generate_calls_across_shards(fp32_engine):
    shards = plan_shards([f"p{i}" for i in range(6)], n_samples=3, shard_size=4, seed=1)  # 18 jobs: 4,4,4,4,2
    served, calls, progress = serve(fp32_engine, shards, batch_size=6)
    assert calls == [6, 6, 6]  # not one call per shard (5); shards 1 and 3 each span two calls
    assert progress == [6, 6, 6]
    assert [shard.index for shard, _ in served] == [0, 1, 2, 3, 4]
    assert all(len(samples) == len(shard.jobs) for shard, samples in served)
    # each sample is its own job's: generating that job alone, with its seed, gives the same sample
    for shard, samples in served:
        for job, sample in zip(shard.jobs, samples, strict=True):
            assert fp32_engine.generate([PROMPTS[job.problem]], [job.seed]) == [sample], (shard.index, job)
    texts = [sample.text for _, samples in served for sample in samples]
    assert len(set(texts)) > len(texts) // 2  # seeds differ, so do samples: the checks above are not vacuous


def test_hf_samples_do_not_depend_on_batching_engines_or_resume(fp32_engine):
    shards = plan_shards([f"p{i}" for i in range(6)], n_samples=3, shard_size=4, seed=1)
    reference = {shard.index: samples for shard, samples in serve(fp32_engine, shards, batch_size=6)[0]}
    resumed = serve(fp32_engine, [shards[1], shards[3], shards[4]], batch_size=6)[0]  # 0 and 2 already done
    one_each = serve(fp32_engine, shards[::2], batch_size=16)[0] + serve(fp32_engine, shards[1::2], 16)[0]
    for shard, samples in resumed + one_each:
        assert samples == reference[shard.index], shard.index
    reseeded = plan_shards([f"p{i}" for i in range(6)], n_samples=3, shard_size=4, seed=2)
    assert [s for _, s in serve(fp32_engine, reseeded, batch_size=6)[0]] != list(reference.values())


def with_sampling(engine: HFEngine, sampling: Sampling) -> HFEngine:
    return HFEngine(engine.model, engine.tokenizer, sampling, engine.batch_size, engine.cache, engine.device)


def test_top_k_one_samples_the_greedy_completions(fp32_engine):
    shards = plan_shards([f"p{i}" for i in range(6)], n_samples=1, shard_size=4, seed=1)
    sampled = serve(with_sampling(fp32_engine, replace(SAMPLING, top_k=1)), shards, 64)[0]
    greedy = serve(with_sampling(fp32_engine, replace(SAMPLING, temperature=0.0)), shards, 64)[0]
    assert [s for _, s in sampled] == [s for _, s in greedy]


def test_hf_engine_never_asks_a_feed_again_after_it_ended(fp32_engine):
    shards = plan_shards(["p0"], n_samples=2, shard_size=2, seed=1)
    answers = iter([shards[0], None])  # a queue feed gives each engine one None: another get would block
    finished = []
    fp32_engine.serve(PROMPTS, lambda: next(answers), lambda shard, _: finished.append(shard), lambda n: None)
    assert finished == shards


def test_seeded_sampler_draws_each_row_from_its_distribution():
    """20,000 rows of one distribution, one seed each: frequencies within 3 standard errors, and a
    token with probability zero (masked by top-k) never drawn."""
    import torch

    probs = torch.tensor([0.5, 0.3, 0.15, 0.05])
    rows = 20_000
    scores = probs.log().expand(rows, 4).clone()
    sampler = SeededSampler(replace(SAMPLING, top_k=3), seeds=range(rows))
    forced = sampler(torch.zeros(rows, 1, dtype=torch.long), scores)
    assert ((forced == 0).sum(dim=1) == 1).all()  # exactly one token left per row
    counts = torch.bincount(forced.argmax(dim=1), minlength=4).double() / rows
    kept = probs[:3] / probs[:3].sum()
    assert counts[3] == 0
    assert ((counts[:3] - kept).abs() < 3 * (kept * (1 - kept) / rows).sqrt()).all(), counts
