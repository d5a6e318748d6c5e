"""The evaluation plan (problems x samples cut into shards) and the shard files that make it resumable.

Jobs are ordered sample-major (sample 0 of every problem, then sample 1, ...), so each shard mixes
problems and shards cost about the same: engines that pull shards from one queue stay balanced.
Each finished shard is one JSON file written atomically; a rerun skips the files that exist, as long
as the plan's fingerprint (weights by content, evaluator, prompts, sampling, seeds) is unchanged.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import asdict
from pathlib import Path

from opsd_sweep.evaluate.engine import EngineSpec, Job, Sample, Shard
from opsd_sweep.run.identity import content_identity
from opsd_sweep.run.rundir import atomic_write_json, read_json


def derive_seed(*parts: object) -> int:
    """A 31-bit seed from the run seed and a name (stable across processes, machines and versions)."""
    digest = hashlib.sha256("/".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def plan_shards(problem_ids: list[str], n_samples: int, shard_size: int, seed: int,
                stages: tuple[int, ...] = (), counts: list[int] | None = None) -> list[Shard]:
    """problems x samples jobs in sample-major order, cut into shards of `shard_size` jobs.

    A sample's seed depends on (run seed, problem id, sample number) only, and both backends draw each
    sample from its own seed (vllm per request, hf by generate.SeededSampler), so a sample is the same
    whatever the sharding, and whatever the samples per problem: with `counts` (an allocation: problem p
    draws counts[p] samples, not n_samples) sample s of problem p is the sample a uniform plan draws
    there, so two plans of one checkpoint share the samples both draw (hf up to batch rounding). `stages`
    (eval.checkpoints=race: the samples per problem after each round) also cut the shards, so that the
    first m samples of every problem are exactly the shards before stage m: a round draws whole shards
    and never a sample of the next.
    """
    counts = [n_samples] * len(problem_ids) if counts is None else counts
    jobs = [Job(problem, sample, derive_seed(seed, problem_ids[problem], sample))
            for sample in range(max(counts, default=0)) for problem in range(len(problem_ids))
            if sample < counts[problem]]
    bounds = sorted({0, *(m * len(problem_ids) for m in stages if 0 < m < n_samples), len(jobs)})
    starts = [(start, min(start + shard_size, end)) for begin, end in zip(bounds, bounds[1:])
              for start in range(begin, end, shard_size)]
    return [Shard(index, derive_seed(seed, "shard", index), tuple(jobs[start:stop]))
            for index, (start, stop) in enumerate(starts)]


def shards_for(shards: list[Shard], samples: int) -> list[Shard]:
    """The shards holding the first `samples` samples of every problem (a stage of plan_shards, or all)."""
    return [shard for shard in shards if shard.jobs[0].sample < samples]


def fingerprint(spec: EngineSpec, evaluator: dict, prompts: list[list[int]], problem_ids: list[str],
                n_samples: int, shard_size: int, seed: int, stages: tuple[int, ...] = (),
                counts: list[int] | None = None) -> str:
    """What the samples depend on: the weights served (by content: an adapter rewritten at the same path
    is a new plan), the evaluator (identity.evaluator_identity), sampling, prompts and the plan — not GPU
    layout, batch sizes or memory settings, which may change between a killed run and its resume. How
    many of the plan's samples an eval.json scored is its n_samples, not part of the plan."""
    identity = {"evaluator": evaluator, "model": _weights(spec.model_path),
                "adapter": _weights(spec.adapter_path) if spec.adapter_path else None,
                "tokenizer": _weights(spec.tokenizer_path), "dtype": spec.dtype, "sampling": asdict(spec.sampling),
                "prompts": hashlib.sha256(json.dumps(prompts).encode()).hexdigest(),
                "problem_ids": problem_ids, "n_samples": n_samples, "shard_size": shard_size, "seed": seed}
    if stages:  # only race plans hold it: every other plan keeps the fingerprint it had
        identity["stages"] = list(stages)
    if counts is not None:  # only allocated plans (eval.allocation=neyman) hold it, likewise
        identity["samples_per_problem"] = list(counts)
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]


def _weights(path: str) -> str:
    """A local model, adapter or tokenizer by content; a hub id by its name."""
    return content_identity(path) if Path(path).exists() else f"hub:{path}"


class ShardStore:
    """One directory of shard files for one plan fingerprint."""

    def __init__(self, root: Path, plan_fingerprint: str):
        self.root, self.fingerprint = Path(root), plan_fingerprint

    def path(self, index: int) -> Path:
        return self.root / f"shard-{index:05d}.json"

    def prepare(self) -> None:
        """Create the directory; drop shards of a different plan (they would mix two evaluations)."""
        marker = self.root / "plan.json"
        if marker.exists() and read_json(marker).get("fingerprint") != self.fingerprint:
            shutil.rmtree(self.root)
        self.root.mkdir(parents=True, exist_ok=True)
        atomic_write_json(marker, {"fingerprint": self.fingerprint})

    def done(self, index: int) -> bool:
        return self.path(index).exists()

    def write(self, shard: Shard, samples: list[Sample]) -> None:
        records = [{"problem": job.problem, "sample": job.sample, **asdict(sample)}
                   for job, sample in zip(shard.jobs, samples, strict=True)]
        atomic_write_json(self.path(shard.index), {"fingerprint": self.fingerprint, "samples": records})

    def read(self, shards: list[Shard]) -> dict[tuple[int, int], Sample]:
        """Every sample of the plan, keyed by (problem index, sample number)."""
        found: dict[tuple[int, int], Sample] = {}
        for shard in shards:
            for record in read_json(self.path(shard.index))["samples"]:
                found[record["problem"], record["sample"]] = Sample(record["text"], record["n_tokens"],
                                                                    record["finish_reason"])
        return found

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
