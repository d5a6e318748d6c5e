"""How the colocated vLLM rollout engine is sized, whether it sleeps, and whether it also evaluates.

- Size: an engine that only rolls out (eval.engine=own, the default) gets a KV cache sized to one step's rollouts
  (vLLM's kv_cache_memory_bytes): every sequence of the step at its longest, with a margin, and a context of the
  longest rollout (the model's own, 40k-262k tokens, would set vLLM's minimum KV cache at one such sequence).
  A share of the GPU (rollout.gpu_memory_utilization, 0.5) left the trainer too little on an 80 GB GPU, so the
  engine slept through every step. An engine that also evaluates (eval.engine=rollout) takes that share, for the
  evaluation's batch.
- Sleep (`rollout.vllm_sleep`, null = auto): offloading the engine's weights and dropping its KV cache
  around every training step costs 0.6-0.9 s a step (H200, H100), so auto sleeps only when the engine
  plus the trainer's estimated peak would not fit in the free memory. Neither sleeping nor the KV cache's size
  changes a sample: the step's sequences decode in one batch either way.
- The evaluation's engine (eval.engine): by default (own) the eval phase starts an engine of its own on
  the GPU memory training frees, at eval.gpu_memory_utilization; a long evaluation reads its KV cache at
  that share's batch instead of the rollout engine's (BENCHMARKS.md: the eval levers).
- eval.engine=rollout, one engine per cycle: when the evaluation would also run on vLLM with one engine of one GPU (a
  1-GPU cycle) and a KV cache of the rollouts' dtype (eval./rollout.kv_cache_dtype), the rollout engine
  evaluates the final checkpoint at the end of the train phase, saving the eval phase's process and
  engine start: served with a LoRARequest on the restored base weights, or (eval.merge_lora=true) with
  the weights of the model dir the evaluator merged loaded into it, at the base model's decode speed.
  It is then sized for the evaluation too (eval.max_model_len, eval.max_num_seqs), and never below what
  a rollout needs (a short eval.max_model_len would cut the rollouts silently).
"""

from __future__ import annotations

from dataclasses import dataclass

from opsd_sweep.backends import resolve_backend
from opsd_sweep.config import RunConfig

ACTIVATION_BYTES_PER_TOKEN_HIDDEN = 34  # bf16 activations kept for backward per layer (Korthikanti et al. 2022)
# The student's and the teacher's logits over the completion (and the student's logit gradient) span the whole
# vocabulary: 16 bytes an entry makes the estimate cover the trainer peak every H200 gpu-check measured at a
# micro-batch of 8 (49.5-51.6 GB, BENCHMARKS.md), which activations alone put at ~26 GB (an H100 ran out of memory).
LOGIT_BYTES_PER_ENTRY = 16
MARGIN = 1.25                           # allocator fragmentation, loss chunks, the teacher's forward
KV_MARGIN = 1.25  # block rounding (16 tokens a block) and the prefix cache: no rollout is ever preempted
# What an engine holds beyond its weights and KV cache: the activations of vLLM's profile run, CUDA graph pools, the
# LoRA buffers (an over-estimate, checked against engine_mem_gb in gpu-check's metrics).
ENGINE_OVERHEAD_BYTES = 4 * 10**9


@dataclass(frozen=True)
class RolloutEnginePlan:
    sleep: bool
    sleep_why: str
    serves_eval: bool
    serves_eval_why: str
    max_model_len: int
    max_num_seqs: int
    kv_cache_bytes: int | None  # None: the engine takes gpu_memory_utilization of the GPU (it also evaluates)
    engine_bytes: int           # what the engine is planned to hold


def training_step_bytes(run: RunConfig, model_config, longest_prompt: int) -> int:
    """A deliberate over-estimate of what a training step adds to the loaded model: the student's saved
    activations for the longest micro-batch (one layer's with gradient checkpointing) and the logits of the
    micro-batch's completions, with a margin."""
    t = run.train
    tokens = t.per_device_batch_size * (longest_prompt + run.rollout.max_new_tokens)
    layers = 1 if t.gradient_checkpointing else model_config.num_hidden_layers
    activations = ACTIVATION_BYTES_PER_TOKEN_HIDDEN * model_config.hidden_size * layers * tokens
    logits = LOGIT_BYTES_PER_ENTRY * t.per_device_batch_size * run.rollout.max_new_tokens * model_config.vocab_size
    return int(MARGIN * (activations + logits))


def base_weight_bytes(peft_model) -> int:
    """The base model's weights as an engine serving them holds them: every parameter but the adapter's
    (tied embeddings once)."""
    return sum(p.numel() * p.element_size() for name, p in peft_model.named_parameters() if "lora_" not in name)


def kv_bytes_per_token(model_config, kv_cache_dtype: str, dtype_bytes: int = 2) -> int:
    """K and V of every layer for one token."""
    head_dim = getattr(model_config, "head_dim", None) or model_config.hidden_size // model_config.num_attention_heads
    per_entry = 1 if kv_cache_dtype.startswith("fp8") else dtype_bytes
    return 2 * model_config.num_hidden_layers * model_config.num_key_value_heads * head_dim * per_entry


def rollout_kv_bytes(run: RunConfig, model_config, longest_prompt: int, max_num_seqs: int) -> int:
    """A KV cache that holds one step's rollouts at once, every sequence at its longest (no preemption: the step
    decodes in one batch). `longest_prompt` is the data's longest, whatever a seed's order: the size is part of a
    kept engine's key."""
    tokens = KV_MARGIN * max_num_seqs * (longest_prompt + run.rollout.max_new_tokens)
    return int(tokens * kv_bytes_per_token(model_config, run.rollout.kv_cache_dtype))


def rollout_engine_serves_eval(run: RunConfig, world_size: int) -> tuple[bool, str]:
    """Whether the rollout engine evaluates the final checkpoint (one engine per cycle), and why."""
    e, r = run.eval, run.rollout
    eval_backend, _ = resolve_backend(e.backend, has_gpus=True, key="eval.backend")
    if e.engine == "own":
        return False, ("eval.engine=own: the eval phase starts an engine on the GPU memory training frees "
                       f"(eval.gpu_memory_utilization={e.gpu_memory_utilization})")
    if e.kv_cache_dtype != r.kv_cache_dtype:  # an engine's KV cache has one dtype
        return False, (f"eval.kv_cache_dtype={e.kv_cache_dtype}, rollout.kv_cache_dtype={r.kv_cache_dtype}: the eval "
                       "phase starts its own engine")
    if eval_backend == "vllm" and e.tensor_parallel_size == 1 and e.engines in (None, 1) and world_size == 1:
        return True, "the 1-GPU cycle evaluates on vllm: the rollout engine evaluates the final checkpoint"
    return False, (f"eval.backend resolves to {eval_backend}, eval.tensor_parallel_size={e.tensor_parallel_size}, "
                   f"{world_size} GPU(s): the eval phase starts its own engines")


def plan_rollout_engine(run: RunConfig, world_size: int, free_bytes: int, total_bytes: int,
                        step_bytes: int, longest_prompt: int, model_config, weight_bytes: int) -> RolloutEnginePlan:
    """`free_bytes`: free GPU memory with the trainer's model loaded; `step_bytes`: training_step_bytes;
    `longest_prompt`: the longest training prompt in tokens (a shared engine's context must hold its rollout);
    `weight_bytes`: the model's weights as the engine holds them."""
    e, r = run.eval, run.rollout
    shared, serves_why = rollout_engine_serves_eval(run, world_size)
    rollout_seqs = run.train.per_device_batch_size * run.train.grad_accum_steps  # one rank's step, one call
    if shared:
        kv_bytes, engine = None, int(r.gpu_memory_utilization * total_bytes)
    else:
        kv_bytes = rollout_kv_bytes(run, model_config, longest_prompt, rollout_seqs)
        engine = weight_bytes + kv_bytes + ENGINE_OVERHEAD_BYTES
    gb = 1e9
    if r.vllm_sleep is not None:
        sleep, sleep_why = r.vllm_sleep, f"rollout.vllm_sleep={str(r.vllm_sleep).lower()}"
    else:
        sleep = engine + step_bytes > free_bytes
        sleep_why = (f"rollout.vllm_sleep=auto: engine {engine / gb:.0f} GB + training step ~{step_bytes / gb:.0f} GB "
                     f"{'>' if sleep else '<='} {free_bytes / gb:.0f} GB free")
    return RolloutEnginePlan(sleep=sleep, sleep_why=sleep_why, serves_eval=shared, serves_eval_why=serves_why,
                             # never shorter than a rollout: vLLM ends a request at max_model_len without an error
                             max_model_len=max(e.max_model_len, longest_prompt + r.max_new_tokens) if shared
                             else longest_prompt + r.max_new_tokens,
                             max_num_seqs=max(rollout_seqs, e.max_num_seqs) if shared else rollout_seqs,
                             kv_cache_bytes=kv_bytes, engine_bytes=engine)
