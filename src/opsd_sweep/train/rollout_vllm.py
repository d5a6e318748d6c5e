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

In a phase worker the engine outlives the cycle (opsd_sweep.worker.warm): it is handed back with the
base weights, and the next cycle of the same engine settings takes it with its prefix cache reset. Its
seed stays the first cycle's, which changes no sample: each rollout call seeds the GPU's generator
itself (see VLLMRollout.generate). Starting an
engine seeds the process's global RNGs; that is undone (warm.rng_untouched), so a cycle draws the same
numbers (LoRA dropout) on a new or a kept engine.
"""

from __future__ import annotations

import json
import math
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from opsd_sweep.config import RunConfig
from opsd_sweep.evaluate.vllm_engine import lora_request, rank_bound
from opsd_sweep.train.engine_plan import RolloutEnginePlan
from opsd_sweep.train.rollout import Rollouts, trim_completion
from opsd_sweep.worker import warm

PEFT_PREFIX = "base_model.model."  # PeftModel -> LoraModel -> the transformers model


@dataclass
class RolloutEngine:
    """A started engine and what is known of it; a phase worker keeps it from one cycle to the next."""

    llm: Any
    engine_bytes: int      # what it holds in torch's allocator (weights + KV cache)
    device_bytes: int      # the GPU memory it took, as mem_get_info saw it go
    base_layer_infix: str  # vLLM wraps LoRA-enabled linears: their base weights are `<module>.base_layer.weight`
    awake: bool = True


def start_engine(run: RunConfig, device, rank: int, plan: RolloutEnginePlan) -> RolloutEngine:
    from vllm import LLM

    before, free_before = torch.cuda.memory_allocated(device), torch.cuda.mem_get_info(device)[0]
    total = torch.cuda.mem_get_info(device)[1]
    # With a KV cache of a given size vLLM ignores the share, but still refuses to start unless that share is free:
    # the plan's size, rounded up to a hundredth of the GPU
    share = (run.rollout.gpu_memory_utilization if plan.kv_cache_bytes is None
             else math.ceil(100 * plan.engine_bytes / total) / 100)
    with warm.rng_untouched():
        # external_launcher: the engine lives in this process and uses this rank's GPU (LOCAL_RANK).
        llm = LLM(model=run.model.path, dtype=run.model.dtype, tensor_parallel_size=1,
                  distributed_executor_backend="external_launcher",
                  gpu_memory_utilization=share, kv_cache_memory_bytes=plan.kv_cache_bytes, enable_lora=True,
                  max_lora_rank=rank_bound(run.train.lora.r), max_loras=1, seed=run.seed + rank,
                  # sleep mode always: with eval.engine=own a phase worker's kept engine sleeps through the eval
                  # phase, so that the evaluation's own engine gets the GPU memory it held
                  enable_sleep_mode=True, max_model_len=plan.max_model_len, max_num_seqs=plan.max_num_seqs,
                  kv_cache_dtype=run.rollout.kv_cache_dtype)
    engine_names = llm.apply_model(lambda model: [n for n, _ in model.named_parameters()])[0]
    return RolloutEngine(llm, engine_bytes=torch.cuda.memory_allocated(device) - before,
                         device_bytes=free_before - torch.cuda.mem_get_info(device)[0],
                         base_layer_infix=".base_layer" if any(".base_layer." in n for n in engine_names) else "")


def engine_key(run: RunConfig, plan: RolloutEnginePlan, device) -> tuple:
    """Everything start_engine builds the engine from: a phase worker reuses its engine only under an equal key.
    The model by its content (warm.model_identity): weights rewritten at its path need another engine. Not
    whether it sleeps in the steps (plan.sleep, from the free memory): every engine can, and a kept engine asleep
    beside the last cycle's eval leaves a little less free than a new one would."""
    return (warm.model_identity(run), run.model.dtype, run.rollout.gpu_memory_utilization,
            rank_bound(run.train.lora.r), plan.max_model_len, plan.max_num_seqs, plan.kv_cache_bytes,
            run.rollout.kv_cache_dtype, str(device))


def kept_engine_bytes() -> int:
    """GPU memory that a phase worker's kept (awake) engine holds: free memory plus this is what a new
    process would see before its engine starts, so the engine plan comes out the same."""
    engine = warm.kept("rollout_engine")
    return engine.device_bytes if engine is not None and engine.awake else 0


def wake(engine: RolloutEngine) -> None:
    if not engine.awake:
        # the training step's freed blocks stay in torch's cache, out of reach of vLLM's own allocator: hand them
        # back first (an H100 ran out of memory waking the engine into them)
        torch.cuda.empty_cache()
        engine.llm.wake_up()
        engine.awake = True


def _fresh_cache(engine: RolloutEngine) -> None:
    """A kept engine for a new cycle: no prefix-cache entry of the last run survives."""
    wake(engine)
    engine.llm.reset_prefix_cache()


class VLLMRollout:
    def __init__(self, run: RunConfig, peft_model, eos_ids: list[int], device, rank: int, plan: RolloutEnginePlan):
        set_launcher_env(device)
        from peft.tuners.lora import LoraLayer

        cfg = run.rollout
        self.cfg, self.eos_ids, self.sleeps_in_steps, self.device = cfg, eos_ids, plan.sleep, device
        self.peft_model, self.base_model = peft_model, run.model.path
        self.lora_layers = [(name.removeprefix(PEFT_PREFIX), module) for name, module in peft_model.named_modules()
                            if isinstance(module, LoraLayer)]
        self.engine = warm.reuse("rollout_engine", engine_key(run, plan, device),
                                 lambda: start_engine(run, device, rank, plan),
                                 refresh=_fresh_cache, replaceable=False)
        self.llm, self.engine_bytes = self.engine.llm, self.engine.engine_bytes
        self.max_model_len = plan.max_model_len
        self.expected_params = _fused_count(name for name, _ in self.lora_layers)

    @property
    def resident_bytes(self) -> int:
        """The engine's share of torch's allocator right now (0 while it sleeps)."""
        return self.engine_bytes if self.engine.awake else 0

    def generate(self, prompts: list[list[int]], seed: int) -> Rollouts:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        self._wake()
        cfg = self.cfg
        params = SamplingParams(n=1, temperature=cfg.temperature, top_p=cfg.top_p, top_k=max(cfg.top_k, 0),
                                max_tokens=cfg.max_new_tokens, stop_token_ids=self.eos_ids, detokenize=False)
        # No per-request seeds: vLLM samples seeded requests one by one, off its batched top-k/top-p path
        # (0.32 s of a 3.56 s rollout of 32 x 1,024 tokens on an H200, bench_vllm_sampling.py). The call is
        # seeded instead: the whole step's prompts decode together, so the same seed gives the same tokens;
        # fork_rng keeps the trainer's own CUDA stream of random numbers (LoRA dropout) where it was.
        with torch.random.fork_rng(devices=[self.device]):
            torch.cuda.manual_seed(seed)
            outputs = self.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False)
        if self.sleeps_in_steps:
            self.llm.sleep(level=1)  # level 1: weights to CPU, KV cache dropped; wake_up restores them
            self.engine.awake = False
        eos = set(self.eos_ids)
        completions, hit_cap = [], []
        for out in outputs:
            sample = out.outputs[0]
            if sample.finish_reason == "length" and len(sample.token_ids) < cfg.max_new_tokens:
                raise RuntimeError(f"vLLM ended a rollout at {len(sample.token_ids)} of rollout.max_new_tokens="
                                   f"{cfg.max_new_tokens} tokens: its {len(out.prompt_token_ids)}-token prompt and "
                                   f"completion reached the engine's max_model_len ({self.max_model_len}); the run "
                                   "would train on cut rollouts. Shorten the prompts or raise eval.max_model_len")
            ids, _ = trim_completion(list(sample.token_ids), eos)
            completions.append(ids)
            hit_cap.append(sample.finish_reason == "length")
        return Rollouts(completions, hit_cap)

    def update(self, step: int) -> None:
        """Sample from the student after `step` optimizer steps: push its merged weights."""
        self._load(self._weights(merged=True))

    def restore_base(self) -> None:
        """Put the frozen base weights back, so a LoRARequest on top serves exactly the adapter."""
        self._load(self._weights(merged=False))

    def serve_model_dir(self, model_dir: Path) -> None:
        """Serve the model the evaluator merged into `model_dir` (eval.merge_lora=true): the adapted projections
        are read from its safetensors, the very bytes an engine of its own would load. Its other weights are
        the base model's (merged_from.json names the base it was merged into), which the engine holds already."""
        source = json.loads((model_dir / "merged_from.json").read_text())["model"]
        if Path(source) != Path(self.base_model):
            raise RuntimeError(f"{model_dir} was merged into {source}, not into {self.base_model} that the rollout "
                               "engine serves")
        engine_names = {f"{name}.weight": f"{name}{self.engine.base_layer_infix}.weight" for name, _ in self.lora_layers}
        self._load(projection_weights(model_dir, engine_names, self.device))

    def sleep(self) -> None:
        """Hand the GPU memory back until the next rollout: weights to the CPU, KV cache dropped (wake_up
        restores them)."""
        if self.engine.awake:
            self.llm.sleep(level=1)
            self.engine.awake = False

    def prompt_logprobs(self, prompts: list[list[int]], adapter: Path | None) -> list[list[float]]:
        """log p(prompt[i] | prompt[:i]) at every position i >= 1 of each prompt as the engine serves it now,
        with `adapter` on top as a LoRARequest (None: the weights alone); raw logits, temperature 1."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        self._wake()
        request = lora_request(str(adapter)) if adapter is not None else None
        params = SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=1.0, detokenize=False)
        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params,
                                    lora_request=request, use_tqdm=False)
        if request is not None:
            self.llm.llm_engine.remove_lora(request.lora_int_id)
        return [[out.prompt_logprobs[i][ids[i]].logprob for i in range(1, len(ids))]
                for out, ids in zip(outputs, prompts)]

    def _load(self, weights: Iterator[tuple[str, torch.Tensor]]) -> None:
        self._wake()
        loaded = self.llm.apply_model(lambda model: model.load_weights(weights))[0]
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
            yield f"{name}{self.engine.base_layer_infix}.weight", weight

    def _wake(self) -> None:
        wake(self.engine)


def projection_weights(model_dir: Path, engine_names: dict[str, str], device) -> Iterator[tuple[str, torch.Tensor]]:
    """(engine name, weight) for each of a saved model's tensors named in `engine_names` (saved name -> engine
    name), read one at a time onto `device`; every name is found in the files before the first is read."""
    from safetensors import safe_open

    files = sorted(model_dir.glob("*.safetensors"))
    where = {}
    for path in files:
        with safe_open(path, framework="pt") as handle:
            where.update({key: path for key in handle.keys() if key in engine_names})
    missing = sorted(set(engine_names) - set(where))
    if missing:
        raise RuntimeError(f"{model_dir} lacks {len(missing)} of the adapted projections the engine serves "
                           f"(e.g. {missing[0]}); merge the checkpoint again (delete {model_dir})")
    for path in files:
        with safe_open(path, framework="pt", device=str(device)) as handle:
            for key in sorted(k for k, file in where.items() if file == path):
                yield engine_names[key], handle.get_tensor(key)


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


def set_launcher_env(device) -> None:
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
