"""The vLLM engine: one LLMEngine per process, continuous batching across shards.

The only module that imports vllm. Written against vLLM's documented offline API (EngineArgs,
LLMEngine.from_engine_args / add_request / step / has_unfinished_requests, SamplingParams with a
per-request seed, token-id prompts, LoRARequest). The base model is served with the checkpoint's
LoRA adapter through a LoRARequest, or with merged weights prepared by the evaluator.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from pathlib import Path

from opsd_sweep.backends import prepare_vllm_process
from opsd_sweep.worker import warm
from opsd_sweep.evaluate.engine import EngineSpec, Feed, Finish, Job, Progress, Sample, Sampling, Shard

_lora_ids = itertools.count(1)

# max_lora_rank values every recent vLLM accepts; an adapter's rank is rounded up to one of them
LORA_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)
# what an engine of its own leaves free when it sizes itself to the GPU: the CUDA context of its engine-core
# process, which vLLM's own free-memory check at start-up does not see yet
HEADROOM_BYTES = 2 * 1024**3


def lora_request(adapter_path: str):
    """A LoRARequest for `adapter_path` under an id never used before in this process: vLLM caches adapters by
    id, so an engine that serves several checkpoints (or, kept by a phase worker, several runs) needs a new one."""
    from vllm.lora.request import LoRARequest

    lora_id = next(_lora_ids)
    return LoRARequest(f"checkpoint-{lora_id}", lora_id, adapter_path)


def engine_share(requested: float, free_bytes: int, total_bytes: int) -> float:
    """The share of the GPU an engine of its own asks vLLM for: eval.gpu_memory_utilization, or what is free when
    another process holds part of the GPU (a phase worker's kept student and sleeping rollout engine). vLLM
    refuses to start an engine whose share is more than the free memory."""
    fits = (free_bytes - HEADROOM_BYTES) / total_bytes
    if fits < 0.1:
        raise RuntimeError(f"only {free_bytes / 1e9:.1f} of {total_bytes / 1e9:.1f} GB of the GPU are free for the "
                           "evaluation's vLLM engine; free the GPU (another process holds it) or lower eval.max_num_seqs")
    return round(min(requested, fits), 3)


def visible_memory() -> tuple[int, int]:
    """(free, total) bytes of the most occupied visible GPU: an engine of several GPUs is sized by its fullest."""
    import torch

    return min((torch.cuda.mem_get_info(device) for device in range(torch.cuda.device_count())), key=lambda m: m[0])


def lora_rank_bound(adapter_path: str) -> int:
    """The smallest rank vLLM accepts that holds the adapter's rank r (from adapter_config.json)."""
    return rank_bound(int(json.loads((Path(adapter_path) / "adapter_config.json").read_text())["r"]), adapter_path)


def rank_bound(rank: int, adapter: str = "the adapter") -> int:
    """The smallest max_lora_rank vLLM accepts that holds rank `rank`."""
    for bound in LORA_RANKS:
        if rank <= bound:
            return bound
    raise ValueError(f"LoRA adapter {adapter} has rank {rank} > {LORA_RANKS[-1]}, more than vLLM "
                     "serves; set eval.merge_lora=true to serve merged weights instead")


def request_params(s: Sampling, job: Job):
    """One request's SamplingParams: the evaluation's sampling, seeded per job."""
    from vllm import SamplingParams

    # a benchmark's forced length: exactly job.length tokens, EOS ignored (random weights stop anywhere)
    lengths = ({"max_tokens": s.max_new_tokens, "min_tokens": s.min_new_tokens} if job.length is None
               else {"max_tokens": job.length, "min_tokens": job.length, "ignore_eos": True})
    return SamplingParams(n=1, temperature=s.temperature, top_p=s.top_p, top_k=max(s.top_k, 0),
                          seed=job.seed, **lengths)


class VLLMEngine:
    """Serves an evaluation plan on a new LLMEngine, or on `llm_engine`, one that is already running
    with the base model and LoRA enabled (the trainer's rollout engine)."""

    def __init__(self, spec: EngineSpec, llm_engine=None):
        self.spec = spec
        lora = spec.adapter_path is not None
        self.attached = llm_engine is not None
        self.engine = llm_engine if self.attached else self._start(spec, lora)
        self.lora_request = lora_request(spec.adapter_path) if lora else None

    @staticmethod
    def _start(spec: EngineSpec, lora: bool):
        from vllm import EngineArgs, LLMEngine

        if warm.active():  # its own process: the engine is sized by the memory the worker's sleeping objects leave
            raise warm.RunsBeside("this evaluation starts a vLLM engine of its own")
        prepare_vllm_process()  # spawn, not fork, the engine core: this process may have touched CUDA
        lora_args = ({"enable_lora": True, "max_loras": 1,
                      "max_lora_rank": lora_rank_bound(spec.adapter_path)} if lora else {})
        share = engine_share(spec.gpu_memory_utilization, *visible_memory())
        print(f"[evaluate] vLLM engine: {share} of the GPU (eval.gpu_memory_utilization="
              f"{spec.gpu_memory_utilization}), {'the adapter as a LoRARequest' if lora else 'no LoRA'}", flush=True)
        args = EngineArgs(model=spec.model_path, tokenizer=spec.tokenizer_path, dtype=spec.dtype,
                          seed=spec.seed, tensor_parallel_size=spec.tensor_parallel_size,
                          gpu_memory_utilization=share,
                          max_model_len=spec.max_model_len, max_num_seqs=spec.max_num_seqs,
                          kv_cache_dtype=spec.kv_cache_dtype, enable_prefix_caching=True, disable_log_stats=True,
                          **lora_args)
        return LLMEngine.from_engine_args(args)

    def serve(self, prompts: Sequence[list[int]], feed: Feed, finish: Finish, progress: Progress) -> None:
        """Keep up to max_in_flight sequences in the engine; take a new shard whenever there is room,
        so a fast engine takes more shards than a slow one (work stealing across engines). An engine that
        outlives this plan (the trainer's) is left without the adapter."""
        self._serve(prompts, feed, finish, progress)
        if self.attached and self.lora_request is not None:
            self.engine.remove_lora(self.lora_request.lora_int_id)

    def _serve(self, prompts: Sequence[list[int]], feed: Feed, finish: Finish, progress: Progress) -> None:
        shards: dict[int, Shard] = {}
        results: dict[int, list[Sample | None]] = {}
        in_flight, exhausted = 0, False
        while True:
            while not exhausted and in_flight < self.spec.max_in_flight:
                shard = feed()
                if shard is None:
                    exhausted = True
                    break
                shards[shard.index], results[shard.index] = shard, [None] * len(shard.jobs)
                for position, job in enumerate(shard.jobs):
                    self.engine.add_request(f"{shard.index}:{position}",
                                            {"prompt_token_ids": list(prompts[job.problem])},
                                            request_params(self.spec.sampling, job),
                                            lora_request=self.lora_request)
                in_flight += len(shard.jobs)
            if not self.engine.has_unfinished_requests():
                if exhausted:
                    return
                continue
            for output in self.engine.step():
                if not output.finished:
                    continue
                shard_index, position = (int(part) for part in output.request_id.split(":"))
                completion = output.outputs[0]
                if completion.finish_reason not in ("stop", "length"):
                    raise RuntimeError(f"vLLM ended request {output.request_id} with finish_reason "
                                       f"{completion.finish_reason!r}; rerun the evaluation to resume")
                results[shard_index][position] = Sample(completion.text, len(completion.token_ids),
                                                        completion.finish_reason)
                in_flight -= 1
                progress(1)
                if all(sample is not None for sample in results[shard_index]):
                    finish(shards.pop(shard_index), results.pop(shard_index))
