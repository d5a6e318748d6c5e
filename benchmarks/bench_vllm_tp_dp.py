"""Evaluation speed at thinking-mode lengths (issue 10, part 3): the published configuration (one vLLM
engine, tensor parallel over both GPUs, enforce_eager) vs ours (one engine per GPU with CUDA graphs,
through opsd_sweep.evaluate.runner.run_plan), same GPUs, same 30 problems x 12 samples, same lengths.

    export PYTHONPATH=/tmp/site:$PWD/src NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
    python3 -m benchmarks.bench_vllm_tp_dp --config ours --work /tmp/tpdp --out $OUT
    python3 -m benchmarks.bench_vllm_tp_dp --config published --time-limit 480 --work /tmp/tpdp --out $OUT
    .venv/bin/python -m benchmarks.bench_vllm_tp_dp --tiny --work /tmp/tpdp-tiny --out /tmp/tpdp-tiny  # CPU

The first call builds a randomly initialised Qwen3-1.7B-shaped model (max_position_embeddings 40960) with
an offline tokenizer under --work; later calls reuse it. Completion lengths: --lengths (length_model.py:
`published`, the default, thinking-mode AIME24 on Qwen3-1.7B, mean ~19,000, ~5% at the 38,912 cap; `short`,
the mean-5,000 lognormal of the records before 2026-12-04, a probe; `sweep:RESULTS_DIR`, a real sweep's),
drawn once from --length-seed and divided by --scale; every request produces exactly its length
(min_tokens = max_tokens, ignore_eos). Each record carries length_model, eval_length_mean_tokens and the
eval's KV-read floor (eval_floor_s; eval_floor_ratio = wall / floor where the run finished).
Sampling as Qwen3 thinking-mode evaluation (t 0.6, top_p 0.95, top_k 20), a seed per request.
`published` steps one LLMEngine by hand, recording a timeline; at --time-limit s (wall, engine start
included) it stops and PROJECTS the rest: a least-squares fit step_s = c0 + c1 * context tokens, summed over
an exact simulation of the remaining decode steps (on the H200 run eager step times followed the number
of running requests, not context: that fit explained nothing and the JSON says so; read its
remaining_s_at_recent_rate there). Each config writes OUT/tp_dp_<config>.json (rewritten as
it runs). --tiny runs all but vLLM on CPU (tiny model; projection on a synthetic engine of known costs).
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import os
import statistics
import time
from collections import deque
from dataclasses import asdict
from pathlib import Path

from opsd_sweep.costs import length_model
from opsd_sweep.evaluate.engine import EngineSpec, Job, Sampling, Shard
from opsd_sweep.evaluate.shards import derive_seed
from opsd_sweep.run.rundir import atomic_write_text

N_PROBLEMS, N_SAMPLES, PROMPT_TOKENS = 30, 12, 100
MIN_TOKENS, CAP = length_model.MIN_TOKENS, length_model.CAP
MAX_MODEL_LEN, SEED, GPU_MEMORY = 40960, 0, 0.9
WARMUP_STEPS = 20  # prefill chunks and first-call kernel compiles: left out of the step-cost fit
SAMPLING = Sampling(temperature=0.6, top_p=0.95, top_k=20, max_new_tokens=CAP, min_new_tokens=0)


def summarize(lengths: list[int], drawn: list[int]) -> dict:
    return {"n": len(lengths), "min": min(lengths), "median": statistics.median(lengths),
            "mean": round(statistics.fmean(lengths), 1), "p90": statistics.quantiles(lengths, n=10)[-1],
            "max": max(lengths), "total": sum(lengths), "drawn_at_cap": sum(x == CAP for x in drawn)}


def synthetic_prompts(model_dir: Path, problems: Path) -> tuple[list[str], list[list[int]]]:
    """Problem ids and PROMPT_TOKENS-token prompts (each problem's tokens repeated: random weights make
    the content irrelevant, the length and the per-problem prefix shared by its samples are what count)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    rows = [json.loads(line) for line in problems.read_text().splitlines()][:N_PROBLEMS]
    token_lists = [tokenizer(row["problem"])["input_ids"] for row in rows]
    return [row["id"] for row in rows], [(ids * (PROMPT_TOKENS // len(ids) + 1))[:PROMPT_TOKENS]
                                         for ids in token_lists]


def plan(problem_ids: list[str], lengths: list[int]) -> list[Shard]:
    """One shard per problem, its samples forced to their drawn lengths and seeded as the evaluator does."""
    return [Shard(p, derive_seed(SEED, "shard", p),
                  tuple(Job(p, s, derive_seed(SEED, pid, s), lengths[p * N_SAMPLES + s])
                        for s in range(N_SAMPLES)))
            for p, pid in enumerate(problem_ids)]


def fit_step_cost(contexts: list[int], seconds: list[float]) -> dict:
    """Least squares step_s = c0 + c1 * context tokens, with R^2 and the residuals' standard deviation."""
    import numpy as np

    x, y = np.asarray(contexts, dtype=float), np.asarray(seconds, dtype=float)
    if len(x) < 3 or np.ptp(x) == 0:
        raise ValueError(f"{len(x)} measured decode steps after the {WARMUP_STEPS} warm-up ones: too few "
                         "(or all at one context) to fit step costs; raise --time-limit")
    c1, c0 = np.polyfit(x, y, 1)
    residuals = y - (c0 + c1 * x)
    total = float(((y - y.mean()) ** 2).sum())
    return {"c0": float(c0), "c1": float(c1), "steps_fitted": len(x),
            "r2": 1 - float(residuals @ residuals) / total if total > 0 else 1.0,
            "residual_sd_s": float(residuals.std(ddof=2)),
            # a trend here means the line is biased where it is extrapolated (fewer, longer requests)
            "last_tenth_mean_residual_s": float(residuals[-max(1, len(x) // 10):].mean())}


def simulate_decode(prompt_lens: list[int], lengths: list[int], generated: list[int],
                    max_num_seqs: int) -> list[int]:
    """Context tokens of every remaining decode step (decode_schedule's second column)."""
    return [context for _, context in decode_schedule(prompt_lens, lengths, generated, max_num_seqs)]


def decode_schedule(prompt_lens: list[int], lengths: list[int], generated: list[int],
                    max_num_seqs: int) -> list[tuple[int, int]]:
    """(requests decoding, context tokens) of every remaining decode step, scheduled as vLLM does when
    nothing is preempted: started requests (generated > 0) run to their length, waiting ones take, in
    order, the slots finished ones free, and each step adds one token to every running request (context
    counted after the step, as the timeline measures it). Requests with generated >= length are done."""
    ends = [(lengths[i] - g, i) for i, g in enumerate(generated) if 0 < g < lengths[i]]  # step it ends at
    heapq.heapify(ends)
    context = sum(prompt_lens[i] + generated[i] for _, i in ends)
    waiting = deque(i for i, g in enumerate(generated) if g == 0 < lengths[i])
    steps: list[tuple[int, int]] = []
    while ends or waiting:
        while waiting and len(ends) < max_num_seqs:
            i = waiting.popleft()
            heapq.heappush(ends, (len(steps) + lengths[i], i))
            context += prompt_lens[i]
        context += len(ends)
        steps.append((len(ends), context))
        while ends and ends[0][0] == len(steps):
            _, i = heapq.heappop(ends)
            context -= prompt_lens[i] + lengths[i]
    return steps


def project_remaining(contexts: list[int], seconds: list[float], prompt_lens: list[int], lengths: list[int],
                      generated: list[int], max_num_seqs: int) -> dict:
    """Fit measured steps (context tokens, seconds), then sum the fitted cost over the simulated rest."""
    fit = fit_step_cost(contexts, seconds)
    rest = simulate_decode(prompt_lens, lengths, generated, max_num_seqs)
    return {**fit, "remaining_steps": len(rest), "remaining_s": fit["c0"] * len(rest) + fit["c1"] * sum(rest)}


def run_published(args, model_dir: Path, prompts: list[list[int]], shards: list[Shard], save) -> dict:
    """One LLMEngine, TP=2, eager, every request at once, stepped by hand, projected past the limit."""
    jobs = [job for shard in shards for job in shard.jobs]
    prompt_lens, lengths = [len(prompts[job.problem]) for job in jobs], [job.length for job in jobs]
    if args.tiny:
        return tiny_published(prompt_lens, lengths)
    from vllm import EngineArgs, LLMEngine
    from vllm.sampling_params import RequestOutputKind
    from vllm.usage.usage_lib import UsageContext

    from opsd_sweep.evaluate.vllm_engine import request_params

    started = time.monotonic()
    engine_args = EngineArgs(model=str(model_dir), tokenizer=str(model_dir), dtype="bfloat16", seed=SEED,
                             tensor_parallel_size=2, enforce_eager=True, gpu_memory_utilization=GPU_MEMORY,
                             max_model_len=MAX_MODEL_LEN, disable_log_stats=True)
    # LLM()'s usage context, so the engine gets the defaults `LLM(...).generate` runs with
    engine = LLMEngine.from_engine_args(engine_args, usage_context=UsageContext.LLM_CLASS)
    scheduler = engine.vllm_config.scheduler_config
    row = {"engine": {"tensor_parallel_size": 2, "enforce_eager": True,
                      "max_num_seqs": scheduler.max_num_seqs,
                      "max_num_batched_tokens": scheduler.max_num_batched_tokens},
           "engine_start_s": round(time.monotonic() - started, 1), "time_limit_s": args.time_limit}
    print(f"[published] engine started in {row['engine_start_s']}s: {row['engine']}", flush=True)
    for i, job in enumerate(jobs):
        params = request_params(SAMPLING, job)
        params.output_kind = RequestOutputKind.DELTA  # each step's new tokens: counted without copying
        engine.add_request(str(i), {"prompt_token_ids": list(prompts[job.problem])}, params)
    generated, done = [0] * len(jobs), [False] * len(jobs)
    # per step: [wall s since start, step s, running requests, their context tokens, finished requests]
    timeline: list[list] = []
    last = last_saved = time.monotonic()
    while engine.has_unfinished_requests() and time.monotonic() - started < args.time_limit:
        outputs = engine.step()
        if not outputs:
            continue  # an empty step's time goes to the next recorded one
        now, context = time.monotonic(), 0
        for output in outputs:
            i = int(output.request_id)
            generated[i] += len(output.outputs[0].token_ids)
            done[i] = output.finished
            context += prompt_lens[i] + generated[i]
        timeline.append([round(now - started, 3), round(now - last, 6), len(outputs), context, sum(done)])
        last = now
        if now - last_saved > 30:
            last_saved = now
            save({**row, "status": "running", "timeline": timeline})
            print(f"[published] {now - started:.0f}s step {len(timeline)}: {len(outputs)} running, "
                  f"context {context}, {sum(done)}/{len(jobs)} finished, {sum(generated)} tokens", flush=True)
    wall = time.monotonic() - started
    row |= {"measured_wall_s": round(wall, 1), "steps": len(timeline), "finished": sum(done),
            "tokens": sum(generated), "tokens_per_s": round(sum(generated) / wall, 1),
            "length_mismatches": sum(d and g != n for d, g, n in zip(done, generated, lengths))}
    engine.engine_core.shutdown()
    save({**row, "status": "measured; projecting", "timeline": timeline})
    return finish_published(row, timeline, prompt_lens, lengths, generated, done, scheduler.max_num_seqs)


def finish_published(row: dict, timeline: list[list], prompt_lens: list[int], lengths: list[int],
                     generated: list[int], done: list[bool], max_num_seqs: int) -> dict:
    """The measured figures, and the projection to the end when the time limit cut the run short."""
    if all(done):
        return row | {"status": "complete", "wall_s": row["measured_wall_s"], "projection": None,
                      "timeline": timeline}
    fitted = timeline[WARMUP_STEPS:]
    progress = [n if d else g for d, g, n in zip(done, generated, lengths)]
    projection = project_remaining([r[3] for r in fitted], [r[1] for r in fitted], prompt_lens, lengths,
                                   progress, max_num_seqs)
    total = row["measured_wall_s"] + projection["remaining_s"]
    # a cross-check without the fit: the rest at the last 500 steps' mean rate (high if steps keep shrinking)
    recent = statistics.fmean(r[1] for r in timeline[-500:])
    projection["remaining_s_at_recent_rate"] = round(recent * projection["remaining_steps"], 1)
    if projection["r2"] < 0.5:  # seen on the H200 run: eager step times follow the running count, not context
        projection["warning"] = (f"the context fit explains little (R^2 {projection['r2']:.3f}): read "
                                 "remaining_s_at_recent_rate, not remaining_s")
    return row | {"status": "cut at the time limit; the rest is PROJECTED", "wall_s": None,
                  "projection": projection, "projected_total_s": round(total, 1), "timeline": timeline}


def tiny_published(prompt_lens: list[int], lengths: list[int]) -> dict:
    """CPU stand-in for the engine (no vllm here): a timeline from the simulator with known step costs, cut
    a quarter of the way, must be projected back to its true total."""
    c0, c1 = 0.03, 2e-8
    contexts = simulate_decode(prompt_lens, lengths, [0] * len(lengths), max_num_seqs=1024)
    cut = len(contexts) // 4
    timeline, clock = [], 0.0
    for context in contexts[:cut]:
        clock += c0 + c1 * context
        timeline.append([clock, c0 + c1 * context, 0, context, 0])
    row = {"engine": "synthetic (tiny mode)", "measured_wall_s": clock, "steps": cut}
    generated = [min(n, cut) for n in lengths]  # 360 < max_num_seqs: every request started at step 1
    done = [g == n for g, n in zip(generated, lengths)]
    row = finish_published(row, timeline, prompt_lens, lengths, generated, done, max_num_seqs=1024)
    truth = clock + sum(c0 + c1 * context for context in contexts[cut:])
    if not math.isclose(row["projected_total_s"], truth, rel_tol=1e-3):
        raise AssertionError(f"projection {row['projected_total_s']} s != synthetic truth {truth:.1f} s")
    return row | {"synthetic_truth_s": round(truth, 1)}


def run_ours(args, model_dir: Path, problem_ids: list[str], prompts: list[list[int]], shards: list[Shard],
             work: Path) -> dict:
    """Our evaluator's engines: one vLLM engine per GPU, CUDA graphs, shards pulled from one queue."""
    from opsd_sweep.evaluate.runner import engine_groups, run_plan, visible_gpus
    from opsd_sweep.evaluate.shards import ShardStore, fingerprint
    from opsd_sweep.run.identity import evaluator_identity

    spec = EngineSpec(backend="vllm", model_path=str(model_dir), tokenizer_path=str(model_dir),
                      adapter_path=None, dtype="bfloat16", attn_implementation="sdpa", sampling=SAMPLING,
                      batch_size=256, max_num_seqs=256, max_in_flight=256, hf_cache="dynamic", tensor_parallel_size=1,
                      gpu_memory_utilization=GPU_MEMORY, max_model_len=MAX_MODEL_LEN, seed=SEED)
    plan_id = fingerprint(spec, evaluator_identity("vllm", None, False), prompts, problem_ids, N_SAMPLES, N_SAMPLES, SEED)
    store = ShardStore(work / "shards-ours", plan_id)
    store.remove()  # a timing run never resumes earlier shards
    store.prepare()
    if args.tiny:
        return {"status": f"tiny mode: {len(shards)} shards planned in {store.root}; run_plan needs vllm"}
    groups = engine_groups("vllm", 1, None, visible_gpus())
    started = time.monotonic()
    run_plan(spec, prompts, shards, store, groups, desc="ours")
    wall = time.monotonic() - started
    samples = store.read(shards)
    tokens = sum(sample.n_tokens for sample in samples.values())
    jobs = [job for shard in shards for job in shard.jobs]
    mismatches = sum(samples[job.problem, job.sample].n_tokens != job.length for job in jobs)
    return {"status": "complete",
            "engine": {"engines": groups, "max_num_seqs": spec.max_num_seqs, "cuda_graphs": True},
            "wall_s": round(wall, 1), "tokens": tokens, "tokens_per_s": round(tokens / wall, 1),
            "length_mismatches": mismatches}


def gpu_floor_rate(tiny: bool) -> float:
    """The KV-read floor's rate on this GPU (the tiny CPU smoke test keeps the H200's: its floor is not a figure)."""
    if tiny:
        return length_model.HBM_BYTES_PER_S
    import torch

    return length_model.hbm_bytes_per_s(torch.cuda.get_device_name(0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", choices=["published", "ours", "both"], default="both")
    parser.add_argument("--work", default="/tmp/tpdp")
    parser.add_argument("--out", default="out")
    parser.add_argument("--time-limit", type=float, default=480.0,
                        help="published: wall seconds (engine start included) before projecting the rest")
    parser.add_argument("--scale", type=float, default=1.0, help="divide every drawn length by this")
    parser.add_argument("--length-seed", type=int, default=0)
    length_model.add_argument(parser)
    parser.add_argument("--tiny", action="store_true", help="CPU smoke test: tiny model, no vllm")
    args = parser.parse_args()
    try:
        lengths_model = length_model.parse(args.lengths)
    except ValueError as err:
        parser.error(str(err))
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    work, out = Path(args.work), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from benchmarks.bench_vllm_eval import build_assets

    started = time.monotonic()
    model_dir, _, problems = build_assets(work, args.tiny, max_positions=MAX_MODEL_LEN)
    problem_ids, prompts = synthetic_prompts(model_dir, problems)
    drawn = lengths_model.draw(N_PROBLEMS, N_SAMPLES, args.length_seed)
    lengths = [max(1, round(x / args.scale)) for x in drawn]
    shards = plan(problem_ids, lengths)
    prompt_lens = [len(prompts[job.problem]) for shard in shards for job in shard.jobs]
    forced = [job.length for shard in shards for job in shard.jobs]
    bytes_per_token = length_model.kv_bytes_per_token(model_dir)
    base = {"tiny": args.tiny, "scale": args.scale, "length_seed": args.length_seed,
            **length_model.record_fields(lengths_model, lengths), **length_model.kv_read_floor(
                prompt_lens, forced, bytes_per_token, bandwidth=gpu_floor_rate(args.tiny)),
            "lengths": summarize(lengths, drawn), "problems": N_PROBLEMS, "samples": N_SAMPLES,
            "prompt_tokens": PROMPT_TOKENS, "sampling": asdict(SAMPLING),
            "gpu_memory_utilization": GPU_MEMORY, "max_model_len": MAX_MODEL_LEN}
    print(f"assets ready in {time.monotonic() - started:.1f}s; lengths {base['lengths']}", flush=True)
    for config in ["ours", "published"] if args.config == "both" else [args.config]:
        def save(row: dict, config: str = config) -> None:
            path = out / f"tp_dp_{config}.json"
            atomic_write_text(path, json.dumps({"config": config, **base, **row}) + "\n")

        save({"status": "running"})
        if config == "ours":
            row = run_ours(args, model_dir, problem_ids, prompts, shards, work)
        else:
            row = run_published(args, model_dir, prompts, shards, save)
        wall = row.get("wall_s") or row.get("projected_total_s")
        if isinstance(wall, (int, float)) and base["eval_floor_s"] > 0:  # time / KV-read floor (a projection's too)
            row["eval_floor_ratio"] = round(wall / base["eval_floor_s"], 3)
        save(row)
        print(json.dumps({"config": config, **{k: v for k, v in row.items() if k != "timeline"}}), flush=True)


if __name__ == "__main__":
    main()
