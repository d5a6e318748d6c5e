"""Generation for evaluation: one engine interface, two backends.

An engine pulls shards (groups of (problem, sample) jobs) from a feed, generates them and hands each
finished shard back, reporting progress per finished sample:

    engine.serve(prompts, feed, finish, progress)

`hf` (here) generates a shard in batches with transformers; `vllm` (vllm_engine.py, imported only
when chosen) keeps many shards in flight with continuous batching. This module imports neither
transformers nor the project config at import time, so benchmarks can use HFEngine on bare machines.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Sampling:
    temperature: float   # 0 = greedy
    top_p: float
    top_k: int           # <= 0: off
    max_new_tokens: int
    min_new_tokens: int  # 0 in evaluation; benchmarks force fixed lengths with min = max


@dataclass(frozen=True)
class Job:
    problem: int  # index into the prompt list
    sample: int   # sample number within the problem
    seed: int     # per-sample seed (vllm seeds each request with it)
    length: int | None = None  # benchmarks force this completion length (vllm only); evaluation leaves it None


@dataclass(frozen=True)
class Shard:
    index: int
    seed: int               # hf seeds the shard's generate calls with it
    jobs: tuple[Job, ...]


@dataclass(frozen=True)
class Sample:
    text: str
    n_tokens: int        # completion tokens, the EOS token included when generated
    finish_reason: str   # "stop" (EOS) | "length" (hit max_new_tokens)


@dataclass(frozen=True)
class EngineSpec:
    """Everything an engine process needs to start (picklable: it crosses to spawned processes)."""

    backend: str                  # hf | vllm
    model_path: str               # base model dir / hub id, or a merged / full checkpoint dir
    tokenizer_path: str
    adapter_path: str | None      # PEFT adapter served on top of model_path (None: plain weights)
    dtype: str
    attn_implementation: str      # hf
    sampling: Sampling
    batch_size: int               # hf: sequences per generate call; vllm: max sequences per engine
    max_in_flight: int            # vllm: sequences one engine takes at once (balances engines)
    hf_cache: str                 # hf: dynamic | static
    tensor_parallel_size: int     # vllm
    gpu_memory_utilization: float  # vllm
    max_model_len: int            # vllm
    seed: int                     # engine-level seed


Feed = Callable[[], "Shard | None"]
Finish = Callable[[Shard, list[Sample]], None]
Progress = Callable[[int], None]


class Engine(Protocol):
    def serve(self, prompts: Sequence[list[int]], feed: Feed, finish: Finish, progress: Progress) -> None:
        """Generate every shard `feed` yields (until it yields None) and `finish` each one."""


def open_engine(spec: EngineSpec, device: str) -> Engine:
    """Start the engine the spec names on `device` ("cpu" or "cuda"; vllm always uses the visible GPUs)."""
    if spec.backend == "hf":
        return HFEngine.from_spec(spec, device)
    if spec.backend == "vllm":
        from opsd_sweep.evaluate.vllm_engine import VLLMEngine

        return VLLMEngine(spec)
    raise ValueError(f"eval.backend={spec.backend!r} is not one of ['hf', 'vllm']")


class HFEngine:
    """Batched sampling with transformers `generate` (CPU, tiny models, small GPUs, benchmarks).

    A checkpoint's LoRA adapter is served unmerged (a PeftModel in eval mode): its logits are the
    trained model's, bit for bit. Merged into bf16 weights, an update below half an ulp of the base
    weights (lr 5e-6 x 100 steps is about one ulp) would round away.

    `tokenizer` needs only pad_token_id, eos_token_id and decode(ids, skip_special_tokens=True).
    """

    def __init__(self, model, tokenizer, sampling: Sampling, batch_size: int, cache: str, device: str):
        self.model, self.tokenizer, self.sampling = model.eval(), tokenizer, sampling
        self.batch_size, self.cache, self.device = batch_size, cache, device
        configured = model.generation_config.eos_token_id
        # the model's own stop tokens (Qwen3 chat stops on <|im_end|> and <|endoftext|>), else the tokenizer's
        eos = configured if configured is not None else tokenizer.eos_token_id
        self.eos_ids = list(eos) if isinstance(eos, (list, tuple)) else [eos]
        # left padding needs a pad id; models without one pad with EOS (masked out either way)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_ids[0]

    @classmethod
    def from_spec(cls, spec: EngineSpec, device: str) -> HFEngine:
        from transformers import AutoTokenizer

        from opsd_sweep.config import ModelConfig
        from opsd_sweep.modeling import load_model

        model = load_model(ModelConfig(name=spec.model_path, path=spec.model_path, dtype=spec.dtype,
                                       attn_implementation=spec.attn_implementation))
        if spec.adapter_path is not None:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, spec.adapter_path)  # unmerged: see the class docstring
        tokenizer = AutoTokenizer.from_pretrained(spec.tokenizer_path)
        return cls(model.to(device), tokenizer, spec.sampling, spec.batch_size, spec.hf_cache, device)

    def serve(self, prompts: Sequence[list[int]], feed: Feed, finish: Finish, progress: Progress) -> None:
        while (shard := feed()) is not None:
            if any(job.length is not None for job in shard.jobs):
                raise ValueError(f"shard {shard.index} forces completion lengths (Job.length), which only the "
                                 "vllm backend honours; use eval.backend=vllm or leave Job.length None")
            samples: list[Sample] = []
            for start in range(0, len(shard.jobs), self.batch_size):
                batch = shard.jobs[start:start + self.batch_size]
                samples += self.generate([prompts[job.problem] for job in batch], seed=shard.seed + start)
                progress(len(batch))
            finish(shard, samples)

    def generate(self, prompts: Sequence[list[int]], seed: int) -> list[Sample]:
        """One left-padded generate call over the prompts (one sample each)."""
        import torch

        torch.manual_seed(seed)
        pad = self.pad_id
        width = max(len(p) for p in prompts)
        ids = torch.tensor([[pad] * (width - len(p)) + list(p) for p in prompts], device=self.device)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=self.device)
        with torch.no_grad():
            out = self.model.generate(input_ids=ids, attention_mask=mask, **self._generate_kwargs())
        return [self._sample(row) for row in out[:, width:].tolist()]

    def _generate_kwargs(self) -> dict:
        s = self.sampling
        # every knob explicit: values left unset would be filled from the model's generation_config
        kwargs = {"max_new_tokens": s.max_new_tokens, "min_new_tokens": s.min_new_tokens,
                  "pad_token_id": self.pad_id, "eos_token_id": self.eos_ids,
                  "do_sample": s.temperature > 0}
        if s.temperature > 0:
            kwargs |= {"temperature": s.temperature, "top_p": s.top_p, "top_k": max(s.top_k, 0)}
        if self.cache == "static":
            kwargs["cache_implementation"] = "static"
        return kwargs

    def _sample(self, row: list[int]) -> Sample:
        stop = next((i + 1 for i, token in enumerate(row) if token in self.eos_ids), None)
        completion = row[:stop] if stop else row
        return Sample(self.tokenizer.decode(completion, skip_special_tokens=True), len(completion),
                      "stop" if stop else "length")
