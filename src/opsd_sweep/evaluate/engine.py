"""What an evaluation engine is: the jobs it takes (in shards, from a feed), the samples it gives back, the spec
it starts from, and its one method. Both backends (generate.HFEngine, vllm_engine.VLLMEngine) and everything
that plans or hands out their work read these; this module imports nothing of the project.
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
    seed: int     # per-sample seed: both backends draw the sample from it
    length: int | None = None  # benchmarks force this completion length (vllm only); evaluation leaves it None


@dataclass(frozen=True)
class Shard:
    index: int
    seed: int               # read by no backend since hf seeds per job (plan_shards still sets it)
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
    batch_size: int               # hf: sequences per generate call
    max_num_seqs: int             # vllm: sequences one engine decodes at once
    max_in_flight: int            # sequences one engine takes at once (balances engines; hf: caps its batch)
    hf_cache: str                 # hf: dynamic | static
    tensor_parallel_size: int     # vllm
    gpu_memory_utilization: float  # vllm
    max_model_len: int            # vllm
    seed: int                     # engine-level seed
    kv_cache_dtype: str = "auto"  # vllm: auto (the model's dtype) | fp8 (eval.kv_cache_dtype)


Feed = Callable[[], "Shard | None"]
Finish = Callable[[Shard, list[Sample]], None]
Progress = Callable[[int], None]


class Engine(Protocol):
    def serve(self, prompts: Sequence[list[int]], feed: Feed, finish: Finish, progress: Progress) -> None:
        """Generate every shard `feed` yields (until it yields None) and `finish` each one."""
