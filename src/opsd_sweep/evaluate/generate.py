"""Generation for evaluation: the engine interface (engine.py), two backends.

An engine pulls shards (groups of (problem, sample) jobs) from a feed, generates them and hands each
finished shard back, reporting progress per finished sample:

    engine.serve(prompts, feed, finish, progress)

`hf` (here) fills each transformers `generate` call with up to eval.batch_size jobs, from as many
shards as that takes; `vllm` (vllm_engine.py, which imports vllm only when an engine starts) keeps many
shards in flight with continuous batching. Both draw every sample from its own Job.seed, so a sample does
not depend on the sharding, the number of engines or a resume (hf: nor on its batch mates, as far as the
batched kernels give its row the same logits; see SeededSampler). This module imports no transformers at
import time, so benchmarks can import HFEngine without paying for it.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from itertools import islice

from opsd_sweep.config import ModelConfig
from opsd_sweep.evaluate.engine import Engine, EngineSpec, Feed, Finish, Job, Progress, Sample, Sampling, Shard
from opsd_sweep.evaluate.vllm_engine import VLLMEngine
from opsd_sweep.modeling import load_model
from opsd_sweep.worker import warm


def open_engine(spec: EngineSpec, device: str) -> Engine:
    """Start the engine the spec names on `device` ("cpu" or "cuda"; vllm always uses the visible GPUs)."""
    if spec.backend == "hf":
        if device == "cuda" and warm.kept("rollout_engine") is not None:
            raise warm.RunsBeside("this evaluation loads a model onto the GPU beside the kept vLLM engine")
        return HFEngine.from_spec(spec, device)
    if spec.backend == "vllm":
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

        model = load_model(ModelConfig(name=spec.model_path, path=spec.model_path, dtype=spec.dtype,
                                       attn_implementation=spec.attn_implementation))
        if spec.adapter_path is not None:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, spec.adapter_path)  # unmerged: see the class docstring
        tokenizer = AutoTokenizer.from_pretrained(spec.tokenizer_path)
        # max_in_flight <= batch_size: data-parallel engines share a small remainder, not one takes it all
        return cls(model.to(device), tokenizer, spec.sampling, min(spec.batch_size, spec.max_in_flight),
                   spec.hf_cache, device)

    def serve(self, prompts: Sequence[list[int]], feed: Feed, finish: Finish, progress: Progress) -> None:
        """Take shards until batch_size jobs are waiting (or the feed ends), generate them in one call,
        and finish every shard whose samples are all done (a shard may span two calls)."""
        held: list[tuple[Shard, list[Sample]]] = []  # taken shards in feed order, with their samples so far
        waiting: list[Job] = []                      # their jobs not generated yet, in the same order
        fed_all = False
        while True:
            while not fed_all and len(waiting) < self.batch_size:
                shard = feed()
                if shard is None:
                    fed_all = True  # a queue feed yields one None per engine: never ask again
                    break
                if any(job.length is not None for job in shard.jobs):
                    raise ValueError(f"shard {shard.index} forces completion lengths (Job.length), which "
                                     "only the vllm backend honours; use eval.backend=vllm or leave "
                                     "Job.length None")
                held.append((shard, []))
                waiting += shard.jobs
            if not waiting:
                return
            batch, waiting = waiting[:self.batch_size], waiting[self.batch_size:]
            samples = iter(self.generate([prompts[job.problem] for job in batch],
                                         [job.seed for job in batch]))
            progress(len(batch))
            for shard, done in held:  # the batch continues the held shards in order
                done += islice(samples, len(shard.jobs) - len(done))
            while held and len(held[0][1]) == len(held[0][0].jobs):
                finish(*held.pop(0))

    def generate(self, prompts: Sequence[list[int]], seeds: Sequence[int]) -> list[Sample]:
        """One left-padded generate call over the prompts (one sample each, prompt i drawn with seeds[i])."""
        import torch

        pad = self.pad_id
        width = max(len(p) for p in prompts)
        ids = torch.tensor([[pad] * (width - len(p)) + list(p) for p in prompts], device=self.device)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=self.device)
        with torch.no_grad():
            out = self.model.generate(input_ids=ids, attention_mask=mask, **self._generate_kwargs(seeds))
        return [self._sample(row) for row in out[:, width:].tolist()]

    def _generate_kwargs(self, seeds: Sequence[int]) -> dict:
        from transformers import LogitsProcessorList

        s = self.sampling
        # every knob explicit: values left unset would be filled from the model's generation_config.
        # generate itself decodes greedily: when sampling, SeededSampler has already left one token per row.
        kwargs = {"max_new_tokens": s.max_new_tokens, "min_new_tokens": s.min_new_tokens,
                  "pad_token_id": self.pad_id, "eos_token_id": self.eos_ids, "do_sample": False}
        if s.temperature > 0:
            kwargs["logits_processor"] = LogitsProcessorList([SeededSampler(s, seeds)])
        if self.cache == "static":
            kwargs["cache_implementation"] = "static"
        return kwargs

    def _sample(self, row: list[int]) -> Sample:
        stop = next((i + 1 for i, token in enumerate(row) if token in self.eos_ids), None)
        completion = row[:stop] if stop else row
        return Sample(self.tokenizer.decode(completion, skip_special_tokens=True), len(completion),
                      "stop" if stop else "length")


class SeededSampler:
    """A logits processor for `generate` that draws row i's next token from its own random stream
    (seeded with seeds[i]) and masks every other token, so the greedy step emits the draw.

    transformers' own sampling draws all rows from one global generator, so a row's sample would
    depend on which sequences share its batch. Here it depends on its seed and its logits only: the
    same sample whatever the batching, the engine count or a resume, as long as the logits are equal
    bit for bit (batched kernels may round a row differently with other batch mates or padding; a
    draw then flips only when it lies within that rounding of a token boundary). Temperature, top-k
    and top-p are transformers' own warpers, applied in generate's order.
    """

    def __init__(self, sampling: Sampling, seeds: Sequence[int]):
        from transformers import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

        self.warpers = [TemperatureLogitsWarper(sampling.temperature)]
        if sampling.top_k > 0:
            self.warpers.append(TopKLogitsWarper(sampling.top_k))
        if sampling.top_p < 1.0:
            self.warpers.append(TopPLogitsWarper(sampling.top_p))
        self.streams = [random.Random(seed) for seed in seeds]

    def __call__(self, input_ids, scores):
        import torch

        for warp in self.warpers:
            scores = warp(input_ids, scores)
        cdf = scores.double().softmax(dim=-1).cumsum(dim=-1)
        # inverse CDF at a point in (0, total]: a zero-probability token is never the first to reach it
        point = torch.tensor([[1.0 - stream.random()] for stream in self.streams], dtype=torch.float64,
                             device=scores.device) * cdf[:, -1:]
        drawn = torch.searchsorted(cdf, point)
        return torch.full_like(scores, float("-inf")).scatter_(1, drawn, 0.0)
