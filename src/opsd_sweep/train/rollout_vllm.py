"""The `vllm` rollout backend: one colocated vLLM engine per training rank (tensor parallel 1).

vLLM is imported here only, when rollout.backend=vllm. Written against vLLM's documented offline API
(LLM, SamplingParams, LoRARequest, TokensPrompt, LLM.sleep / wake_up), vllm >= 0.24.

Weights: the engine holds the frozen base model; the student's LoRA adapter is saved after every
optimizer step and the next rollout passes it as a LoRARequest with a new id, so vLLM loads the
new weights (~0.1-0.2 s per step on an H200, no merge and no weight push). With rollout.vllm_sleep
the engine offloads its weights and drops its KV cache between rollouts, leaving the GPU memory to
the training step.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

from opsd_sweep.config import RunConfig
from opsd_sweep.train.rollout import Rollouts, trim_completion


class VLLMRollout:
    needs_saved_adapter = True

    def __init__(self, run: RunConfig, eos_ids: list[int], device, rank: int):
        _set_launcher_env(device)
        from vllm import LLM

        cfg = run.rollout
        self.cfg, self.eos_ids = cfg, eos_ids
        # external_launcher: the engine lives in this process and uses this rank's GPU (LOCAL_RANK).
        self.llm = LLM(model=run.model.path, dtype=run.model.dtype, tensor_parallel_size=1,
                       distributed_executor_backend="external_launcher",
                       gpu_memory_utilization=cfg.gpu_memory_utilization, enable_lora=True,
                       max_lora_rank=run.train.lora.r, max_loras=1, seed=run.seed + rank,
                       enable_sleep_mode=cfg.vllm_sleep)
        self.lora_request = None
        self.awake = True

    def generate(self, prompts: list[list[int]], seed: int) -> Rollouts:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        if self.lora_request is None:
            raise RuntimeError("VLLMRollout.update(step, adapter_dir) must run before the first generate")
        if not self.awake:
            self.llm.wake_up()
        cfg = self.cfg
        params = [SamplingParams(n=1, temperature=cfg.temperature, top_p=cfg.top_p, top_k=max(cfg.top_k, 0),
                                 max_tokens=cfg.max_new_tokens, seed=seed + i, stop_token_ids=self.eos_ids,
                                 detokenize=False) for i in range(len(prompts))]
        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params,
                                    lora_request=self.lora_request, use_tqdm=False)
        if self.cfg.vllm_sleep:
            self.llm.sleep(level=1)  # level 1: weights to CPU, KV cache dropped; wake_up restores them
        self.awake = not self.cfg.vllm_sleep
        eos = set(self.eos_ids)
        completions, hit_cap = [], []
        for out in outputs:
            sample = out.outputs[0]
            ids, _ = trim_completion(list(sample.token_ids), eos)
            completions.append(ids)
            hit_cap.append(sample.finish_reason == "length")
        return Rollouts(completions, hit_cap)

    def update(self, step: int, adapter_dir: Path) -> None:
        """Sample from the adapter saved after `step` optimizer steps from now on (a new id makes
        vLLM load it instead of reusing the adapter it has cached)."""
        from vllm.lora.request import LoRARequest

        self.lora_request = LoRARequest(f"student-step-{step}", step + 1, str(adapter_dir))


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
