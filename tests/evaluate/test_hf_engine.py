"""The hf engine on a small bf16 Qwen3 built from config: the LoRA checkpoint is served exactly (no bf16
merge); the vllm merge_lora path merges in fp32 and counts what bf16 loses."""

from __future__ import annotations

from pathlib import Path

import pytest

from opsd_sweep.evaluate.evaluator import merge_adapter
from opsd_sweep.evaluate.generate import EngineSpec, HFEngine, Sampling
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
                      attn_implementation="sdpa", sampling=SAMPLING, batch_size=batch_size,
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
