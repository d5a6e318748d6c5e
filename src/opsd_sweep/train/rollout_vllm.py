"""The `vllm` rollout backend: one colocated vLLM engine per training rank (tensor parallel 1).

vLLM is imported here only, when the rollout backend resolves to vllm. Written against vLLM's
documented offline API (LLM, SamplingParams, TokensPrompt, LLM.apply_model, reset_prefix_cache,
sleep / wake_up), vllm >= 0.24; the engine runs in this process (external_launcher).

Weights: after every optimizer step the student's merged projections (W + scaling * B A, in the
model dtype) are written into the engine's base weights through the model's own `load_weights`, and
the prefix cache is dropped (its KV was computed with the old weights). Rollouts then decode at the
base model's speed: serving the adapter as a LoRARequest cost 5.4 ms per decode step at batch 32 on
an H200, the base model 2.9 ms. The rollouts are not bit-exact to the student (a bf16 merge); the loss
is always computed with the real PEFT student. The engine is started with LoRA enabled so that the
end-of-training evaluation can serve the exact checkpoint from it (`restore_base` + a LoRARequest).
With sleep on, the engine offloads its weights and drops its KV cache during the training step.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import torch

from opsd_sweep.config import RunConfig
from opsd_sweep.evaluate.vllm_engine import rank_bound
from opsd_sweep.train.rollout import Rollouts, trim_completion

PEFT_PREFIX = "base_model.model."  # PeftModel -> LoraModel -> the transformers model


class VLLMRollout:
    def __init__(self, run: RunConfig, peft_model, eos_ids: list[int], device, rank: int, sleep: bool,
                 max_model_len: int, max_num_seqs: int):
        _set_launcher_env(device)
        from peft.tuners.lora import LoraLayer
        from vllm import LLM

        cfg = run.rollout
        self.cfg, self.eos_ids, self.sleep = cfg, eos_ids, sleep
        self.peft_model = peft_model
        self.lora_layers = [(name.removeprefix(PEFT_PREFIX), module) for name, module in peft_model.named_modules()
                            if isinstance(module, LoraLayer)]
        before = torch.cuda.memory_allocated(device)
        # external_launcher: the engine lives in this process and uses this rank's GPU (LOCAL_RANK).
        self.llm = LLM(model=run.model.path, dtype=run.model.dtype, tensor_parallel_size=1,
                       distributed_executor_backend="external_launcher",
                       gpu_memory_utilization=cfg.gpu_memory_utilization, enable_lora=True,
                       max_lora_rank=rank_bound(run.train.lora.r), max_loras=1, seed=run.seed + rank,
                       enable_sleep_mode=sleep, max_model_len=max_model_len, max_num_seqs=max_num_seqs)
        # what the engine holds in torch's allocator (weights + KV cache): kept apart from the trainer's peak
        self.engine_bytes = torch.cuda.memory_allocated(device) - before
        self.expected_params = _fused_count(name for name, _ in self.lora_layers)
        engine_names = self.llm.apply_model(lambda model: [n for n, _ in model.named_parameters()])[0]
        # vLLM wraps LoRA-enabled linears: their base weights are `<module>.base_layer.weight`
        self.base_layer_infix = ".base_layer" if any(".base_layer." in n for n in engine_names) else ""
        self.awake = True

    @property
    def resident_bytes(self) -> int:
        """The engine's share of torch's allocator right now (0 while it sleeps)."""
        return self.engine_bytes if self.awake else 0

    def generate(self, prompts: list[list[int]], seed: int) -> Rollouts:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        self._wake()
        cfg = self.cfg
        params = [SamplingParams(n=1, temperature=cfg.temperature, top_p=cfg.top_p, top_k=max(cfg.top_k, 0),
                                 max_tokens=cfg.max_new_tokens, seed=seed + i, stop_token_ids=self.eos_ids,
                                 detokenize=False) for i in range(len(prompts))]
        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False)
        if self.sleep:
            self.llm.sleep(level=1)  # level 1: weights to CPU, KV cache dropped; wake_up restores them
            self.awake = False
        eos = set(self.eos_ids)
        completions, hit_cap = [], []
        for out in outputs:
            sample = out.outputs[0]
            ids, _ = trim_completion(list(sample.token_ids), eos)
            completions.append(ids)
            hit_cap.append(sample.finish_reason == "length")
        return Rollouts(completions, hit_cap)

    def update(self, step: int) -> None:
        """Sample from the student after `step` optimizer steps: push its merged weights."""
        self._load(merged=True)

    def restore_base(self) -> None:
        """Put the frozen base weights back, so a LoRARequest on top serves exactly the adapter."""
        self._load(merged=False)

    def _load(self, merged: bool) -> None:
        self._wake()
        loaded = self.llm.apply_model(lambda model: model.load_weights(self._weights(merged)))[0]
        if loaded is not None and len(loaded) < self.expected_params:
            raise RuntimeError(f"vLLM loaded {len(loaded)} of the {self.expected_params} engine parameters the "
                               "adapter touches; the engine's parameter names do not match the student's")
        self.llm.reset_prefix_cache()  # cached prompt KV was computed with the old weights

    @torch.no_grad()
    def _weights(self, merged: bool) -> Iterator[tuple[str, torch.Tensor]]:
        """(engine name, weight) per adapted projection, computed one at a time (no full-model copy)."""
        adapter = self.peft_model.active_adapter
        for name, lora in self.lora_layers:
            weight = lora.get_base_layer().weight
            if merged:
                weight = weight + lora.get_delta_weight(adapter)
            yield f"{name}{self.base_layer_infix}.weight", weight

    def _wake(self) -> None:
        if not self.awake:
            self.llm.wake_up()
            self.awake = True


def _fused_count(names) -> int:
    """How many engine parameters the given HF projection names fill: vLLM fuses q/k/v into qkv_proj
    and gate/up into gate_up_proj."""
    fused = {"q_proj": "qkv_proj", "k_proj": "qkv_proj", "v_proj": "qkv_proj",
             "gate_proj": "gate_up_proj", "up_proj": "gate_up_proj"}
    out = set()
    for name in names:
        parent, _, leaf = name.rpartition(".")
        out.add(f"{parent}.{fused.get(leaf, leaf)}")
    return len(out)


def _set_launcher_env(device) -> None:
    """vLLM's external launcher reads the torch.distributed variables; `accelerate launch` sets them
    for several processes, a plain single-process run does not."""
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("LOCAL_RANK", str(getattr(device, "index", None) or 0))
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if "MASTER_PORT" not in os.environ:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            os.environ["MASTER_PORT"] = str(sock.getsockname()[1])
