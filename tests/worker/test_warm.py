"""What a phase worker keeps must not leak into the next cycle: a kept student gets exactly the LoRA
values (and leaves the RNG exactly where) a new get_peft_model under the run's seed would."""

from __future__ import annotations

import pytest
import torch
from accelerate.utils import set_seed
from peft import LoraConfig, get_peft_model

from opsd_sweep.config import load_run_config
from opsd_sweep.modeling import load_model
from opsd_sweep.tiny import ensure_tiny_assets
from opsd_sweep.worker import warm
from opsd_sweep.worker.warm import fresh_adapter
from tests.conftest import compose


def test_a_kept_student_gets_the_adapter_a_new_process_would_draw(tiny_cache):
    run = load_run_config(compose(["profile=tiny", f"cache_dir={tiny_cache}"]))
    ensure_tiny_assets(run.tiny)
    lora = lambda: LoraConfig(r=8, lora_alpha=16, target_modules=list(run.train.lora.target_modules),  # noqa: E731
                              task_type="CAUSAL_LM")

    set_seed(3)
    new = get_peft_model(load_model(run.model), lora())
    wanted = {name: (p.detach().clone(), p.requires_grad) for name, p in new.named_parameters()}
    rng_after = torch.random.get_rng_state()

    set_seed(1)  # a student kept from an earlier cycle of another seed, trained, in train mode with grads
    kept = get_peft_model(load_model(run.model), lora())
    for name, p in kept.named_parameters():
        if p.requires_grad:
            p.data.add_(0.5)
            p.grad = torch.ones_like(p)
    kept.train()
    set_seed(3)
    fresh_adapter(kept)

    got = dict(kept.named_parameters())
    assert set(got) == set(wanted)
    for name, (value, trainable) in wanted.items():
        assert torch.equal(got[name], value) and got[name].requires_grad == trainable, name
        assert got[name].grad is None
    assert torch.equal(torch.random.get_rng_state(), rng_after)
    assert not kept.training and list(kept.peft_config) == ["default"]


def test_a_kept_object_serves_only_a_cycle_of_the_same_key(monkeypatch):
    """Another model, LoRA or engine size (another key) never gets the kept object: it is rebuilt, or, for
    an engine that cannot be replaced in this process, the phase is sent to a process of its own."""
    monkeypatch.setattr(warm, "_enabled", True)
    monkeypatch.setattr(warm, "_kept", {})
    built, refreshed = [], []

    def build(tag):
        built.append(tag)
        return object()

    first = warm.reuse("student", ("model-a", "r=8"), lambda: build("a"), refresh=refreshed.append)
    assert warm.reuse("student", ("model-a", "r=8"), lambda: build("again"), refresh=refreshed.append) is first
    assert refreshed == [first] and built == ["a"]  # the same key: kept, given fresh state
    other = warm.reuse("student", ("model-a", "r=16"), lambda: build("b"), refresh=refreshed.append)
    assert other is not first and built == ["a", "b"] and refreshed == [first]
    warm.reuse("rollout_engine", ("model-a", 0.5), lambda: build("engine"), replaceable=False)
    with pytest.raises(warm.NeedsFreshProcess):
        warm.reuse("rollout_engine", ("model-a", 0.9), lambda: build("engine 2"), replaceable=False)
    assert "engine 2" not in built


def test_a_kept_compiled_student_does_not_recompile_in_its_next_cycle(tiny_cache, monkeypatch):
    """The compiled decoder layers are what a phase worker keeps the student for: giving it a fresh
    adapter must leave every guard of their graphs holding (on an H200 a recompile cost the next cycle's
    first step 26 s)."""
    import torch._dynamo

    from opsd_sweep.train.trainer import compile_decoder_layers

    run = load_run_config(compose(["profile=tiny", f"cache_dir={tiny_cache}"]))
    ensure_tiny_assets(run.tiny)
    set_seed(1)
    student = get_peft_model(load_model(run.model), LoraConfig(r=8, lora_alpha=16, lora_dropout=0.05,
                             target_modules=list(run.train.lora.target_modules), task_type="CAUSAL_LM"))
    compile_decoder_layers(student)
    ids = torch.randint(0, 50, (2, 12))

    def cycle_step():  # the teacher's no-grad forward with the adapter off, then the student's step
        with torch.no_grad(), student.disable_adapter():
            student(input_ids=ids)
        student.train()
        student(input_ids=ids).logits.float().pow(2).mean().backward()

    cycle_step()
    cycle_step()
    set_seed(2)
    fresh_adapter(student)
    monkeypatch.setattr(torch._dynamo.config, "error_on_recompile", True)
    cycle_step()
