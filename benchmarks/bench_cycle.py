"""GPU-minutes per recipe cycle (issues 14 and 23), measured from a real sweep's own records.

    export PYTHONPATH=/tmp/site:$PWD/src NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
    python3 -m benchmarks.bench_cycle --work /tmp/cycle [--cycles 3 --steps 8] [--per-phase]
    python3 -m benchmarks.bench_cycle --work /tmp/cycle --eval-from benchmarks/measured/aime_sized_eval_<date>.json
    python3 -m benchmarks.bench_cycle --work /tmp/cycle --tiny    # CPU smoke check (tiny profile, no GPU)
    python3 -m benchmarks.bench_cycle --work /tmp/cycle --steps 5 --profile-step 5   # + each cycle's step 5 profiled
    python3 -m benchmarks.bench_cycle --work /tmp/cycle --eval-only --eval-kv-cache fp8   # part 2 alone
    python3 -m benchmarks.bench_cycle --work /tmp/cycle --eval-only --eval-attention-backend FLASHINFER
    python3 -m benchmarks.bench_cycle --work /tmp/cycle --eval-only --eval-without-adapter
    python3 -m benchmarks.bench_cycle --work /tmp/cycle --eval-only --adapter init --eval-problems 8 \
        --lengths published --time-limit 900      # a measured part of 96 real-length requests (issue 39)
    python3 -m benchmarks.bench_cycle --work /tmp/x --eval-from PART.json --sweep-from SWEEP.json  # CPU: the record

Part 1, cycles as a user runs them: one sweep of --cycles seeds through `python -m opsd_sweep -m` on the
random-init Qwen3-1.7B world (opsd_sweep.random_world: student / teacher prompts ~300 / ~1,500 tokens),
the recipe's 32 prompts x 1,024-token rollouts per step on one GPU (8 x 4), --steps steps, default
backends and launcher (warm phase workers; --per-phase: a process per phase, the path before issue 23),
a small evaluation (30 x 1 x 256 tokens). Read back from each run's files: its GPU-minutes (status.json
gpu_hours, what the cycle recorded for its phases), step times (metrics.jsonl) and eval generation
time (eval.json). The steady step is the median of every cycle's steps 2..N; a cycle's fixed cost is
its phase time minus N steady steps minus its eval generation (process or worker hand-over, loading,
engine start, compiles, checkpoints, grading).

Part 2 (GPU only), an AIME24-sized evaluation at thinking lengths: --eval-problems (30) problems x 12
samples, each forced to a length drawn from --lengths (length_model.py: `published`, the default, mean
~19,000 with ~5% at the 38,912 cap as thinking-mode AIME24 on Qwen3-1.7B is published; `short`, the old
mean-5,000 probe; `sweep:RESULTS_DIR`, a real sweep's own lengths), through the evaluator's run_plan on a
vLLM engine configured as the cycle's own (the adapter as a LoRARequest, eval.max_num_seqs, the GPU share
of the engine that evaluates a cycle: the rollout engine's, or with --eval-kv-cache fp8 the eval phase's
own engine's), timed from the first request to the last sample, every engine step timed with its
sequences decoding and the KV tokens they read (eval_trace.py; `step_trace` in the record; the plot:
`python3 -m benchmarks.eval_trace RECORD.json`). The record carries the length model
(`length_model`, `eval_length_mean_tokens`), the forced and prompt lengths, and the eval's KV-read floor
from the lengths generated (`eval_floor_s`, `eval_floor_ratio` = generation time / floor). --time-limit
stops the part past that many seconds of generation (the record says so and keeps the trace).
--adapter init serves a PEFT adapter of the run's LoRA shape as the trainer initialises it (no 1-step
cycle: the trained weights change neither the forced lengths nor the work a step does). With --eval-kv-cache fp8 the sweep's cycles use it
too, so their fixed cost includes the eval engine each one starts. Two probes of part 2 alone change its
engine, to find where the eval's tail goes: --eval-attention-backend (vLLM's attention kernels) and
--eval-without-adapter (the base model served without LoRA: the speed of merged weights, same shapes).

The 100-step cycle is then PROJECTED (not measured end to end), per cycle after the sweep's first:
its fixed cost + 100 x the measured steady step + the AIME-sized generation and grading (part 1's own
small eval with --skip-eval or --tiny, and the JSON says which), times the GPUs. --eval-only runs part 2
alone, on the adapter of one 1-step uncompiled cycle (its trained weights do not change the forced
lengths; a later --eval-only with the same --work, --eval-kv-cache and --override reuses it), and writes
OUT/aime_sized_eval_<UTC date>_<kv cache>[_<probe>][_<lengths>].json, the record --eval-from reads (a
probe's record is refused there: not the cycle's eval). A part of fewer than 360 samples is projected to
the 360-sample eval by eval_step_model.py refitted on its trace (PROJECTION, with the part's fit error).
--sweep-from takes part 1's figures from an earlier record (bench_cycle or gpu_check) instead of a sweep:
with --eval-from, the record is written on the CPU from two measured records. Writes
OUT/bench_cycle_<UTC date>.json with gpu_minutes_per_cycle and fixed_cost_s_after_first. Random weights
never emit EOS, so rollouts always run 1,024 tokens (the recipe's cap; real rollouts are shorter). On
CPU (--tiny) the "GPU-minutes" are the phases' wall minutes on the CPU: a smoke check, not a figure.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import re
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

from opsd_sweep.costs import length_model
from benchmarks.bench_vllm_tp_dp import N_SAMPLES, summarize
from benchmarks.eval_trace import TimedSteps, TimeLimit, engine_args_with, summarize_steps
from opsd_sweep.testing.run_config import composed_run_config
from opsd_sweep import random_world
from opsd_sweep.gpu_check import checked_cycle, run, step_parts, sweep_args
from opsd_sweep.run.rundir import gpu_hours

RECIPE_STEPS, TARGET_GPU_MINUTES, SEED_WORKFLOW_GPU_MINUTES = 100, 12.0, (112, 132)
EVAL_PROBLEMS = 30  # AIME24
TARGET_FIXED_COST_S = 20.0
DEFAULT_ATTENTION, WITHOUT_ADAPTER = "vLLM's choice", "none (the base model: merged weights' speed)"
MERGED_CHECKED = "merged weights (the run's merge check passed)"  # the cycle's evaluator since eval.merge_check
TINY = ["profile=tiny", "eval.max_problems=4", "eval.n_samples=1", "hydra.launcher.max_parallel=1"]
WORKER = re.compile(r"=== \S+ phase worker (\d+): train ===")


def run_and_checkpoint(run_dir: Path):
    """(the run's config, its latest checkpoint) as a cycle's run dir records them."""
    from omegaconf import OmegaConf

    from opsd_sweep.config import from_dict
    from opsd_sweep.run.rundir import RunDir

    rd = RunDir(run_dir)
    return from_dict(OmegaConf.to_container(OmegaConf.load(rd.config))), rd.latest_checkpoint()


def composed_run(world: Path, settings: list[str]):
    """The config a 1-step cycle on the world with `settings` would run, composed as `python -m opsd_sweep`
    composes it, without running it."""
    overrides = [a for a in sweep_args(world, None, 1, 16, 1, "1", world / "results", "bench-eval") if a != "-m"]
    return composed_run_config(overrides + settings)


def init_adapter(run, out: Path) -> Path:
    """A PEFT adapter of the run's LoRA shape as the trainer initialises it (its seed; B = 0), saved on the
    CPU: what a LoRARequest serves costs the same whatever its values."""
    if (out / "adapter_config.json").exists():
        return out
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, set_seed

    lora = run.train.lora
    model = AutoModelForCausalLM.from_pretrained(run.model.path, dtype=torch.bfloat16)
    set_seed(run.seed)
    model = get_peft_model(model, LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                                             target_modules=list(lora.target_modules), task_type="CAUSAL_LM"))
    model.save_pretrained(out)
    return out


def cycle_eval_setup(run_dir: Path | None = None, kv_cache_dtype: str = "auto", adapter: bool = True,
                     problems: int = EVAL_PROBLEMS, run=None, checkpoint: Path | None = None,
                     engine_share: float | None = None):
    """(engine spec, prompts, planned shards) of part 2 on a cycle's run dir (or its config and checkpoint):
    the engine set up as the cycle's evaluator sets up its own (its GPU share where the rollout engine
    evaluates; engine_share: a probe's share instead), `problems` problems x 12 samples."""
    from opsd_sweep.evaluate.datasets import load_problems
    from opsd_sweep.evaluate.evaluator import engine_spec, merge_adapter, serving_choice
    from opsd_sweep.evaluate.merge_check import MERGED_DIR
    from opsd_sweep.evaluate.prompts import render_eval_prompts
    from opsd_sweep.evaluate.shards import plan_shards
    from opsd_sweep.modeling import load_tokenizer
    from opsd_sweep.train.engine_plan import rollout_engine_serves_eval

    if run is None:
        run, checkpoint = run_and_checkpoint(run_dir)
    run = replace(run, eval=replace(run.eval, backend="vllm", n_samples=N_SAMPLES, max_new_tokens=38912,
                                    kv_cache_dtype=kv_cache_dtype, max_problems=problems))
    chosen = load_problems(run.eval)
    spec = engine_spec(run, checkpoint)
    spec = spec if adapter else replace(spec, adapter_path=None)
    if adapter and run_dir is not None and serving_choice(run, checkpoint, run_dir / "eval")[0]:
        spec = merge_adapter(spec, run_dir / "eval" / MERGED_DIR)  # as the cycle serves it: merged, checked
    if engine_share is not None:  # the probe: the eval on an engine of its own, freed of the trainer's memory
        spec = replace(spec, gpu_memory_utilization=engine_share)
    elif rollout_engine_serves_eval(run, world_size=1)[0]:  # the cycle evaluates on its rollout engine: that share
        spec = replace(spec, gpu_memory_utilization=run.rollout.gpu_memory_utilization)
    prompts = render_eval_prompts(load_tokenizer(run.model), run.eval, chosen)
    return spec, prompts, plan_shards([p.id for p in chosen], N_SAMPLES, run.eval.shard_size, run.seed)


def kv_cache_tokens(engine) -> int | None:
    """The engine's KV cache in tokens (its blocks x block size), where vLLM tells the front end."""
    try:
        cache = engine.vllm_config.cache_config
        return int(cache.num_gpu_blocks) * int(cache.block_size) if cache.num_gpu_blocks else None
    except Exception:  # noqa: BLE001 - a figure for the record, never a reason to fail the run
        return None


def aime_sized_eval(run_dir: Path | None, work: Path, length_seed: int, kv_cache_dtype: str = "auto",
                    attention_backend: str | None = None, adapter: bool = True, lengths: str = "published",
                    problems: int = EVAL_PROBLEMS, time_limit: float | None = None, run=None,
                    checkpoint: Path | None = None, partial: Path | None = None,
                    engine_share: float | None = None) -> dict:
    """Part 2: problems x 12 forced-length requests on an engine set up like the cycle's, every step traced
    (kv_cache_dtype: the evaluator option eval.kv_cache_dtype; attention_backend, adapter: probes; lengths:
    length_model.parse's; partial: where the record so far is rewritten every 30 s while it runs; engine_share:
    a probe's GPU share of the engine)."""
    from opsd_sweep.evaluate.engine import Job, Shard
    from opsd_sweep.evaluate.runner import run_plan
    from opsd_sweep.evaluate.shards import ShardStore

    spec, prompts, planned = cycle_eval_setup(run_dir, kv_cache_dtype, adapter, problems, run, checkpoint,
                                              engine_share)
    model = length_model.parse(lengths)
    drawn = model.draw(problems, N_SAMPLES, length_seed)  # problem p's sample s at p * 12 + s
    shards = [Shard(s.index, s.seed, tuple(Job(j.problem, j.sample, j.seed, drawn[j.problem * N_SAMPLES + j.sample])
                                           for j in s.jobs)) for s in planned]
    jobs = [j for s in shards for j in s.jobs]  # in the order they are submitted
    forced, prompt_lens = [j.length for j in jobs], [len(prompts[j.problem]) for j in jobs]
    bytes_per_token = length_model.kv_bytes_per_token(Path(spec.model_path), kv_cache_dtype)
    import torch

    bandwidth = length_model.hbm_bytes_per_s(torch.cuda.get_device_name(0))  # before the engine: a GPU it knows
    store = ShardStore(work / "aime_shards", "bench")
    store.remove()
    store.prepare()
    started = time.monotonic()
    from opsd_sweep.evaluate.vllm_engine import VLLMEngine

    with engine_args_with(**({"attention_backend": attention_backend} if attention_backend else {})):
        started_engine = VLLMEngine._start(spec, spec.adapter_path is not None)
    engine_s = time.monotonic() - started
    base = {"requests": len(forced), "problems": problems, "samples_per_problem": N_SAMPLES,
            "length_seed": length_seed, **length_model.record_fields(model, forced),
            "lengths": summarize(forced, forced), "forced_lengths": forced, "prompt_lengths": prompt_lens,
            "engine_start_s": round(engine_s, 1), "max_num_seqs": spec.max_num_seqs,
            "kv_cache_dtype": kv_cache_dtype, "kv_cache_tokens": kv_cache_tokens(started_engine),
            "gpu_memory_utilization": spec.gpu_memory_utilization,
            **probe_fields(attention_backend, adapter, engine_share, merged=adapter and spec.adapter_path is None),
            "time_limit_s": time_limit, "hbm_bytes_per_s": bandwidth}

    def progress(timed: TimedSteps) -> None:
        if partial is not None:
            partial.write_text(json.dumps(base | {"status": "running", "steps_so_far": len(timed.steps),
                                                  "done_so_far": sum(s[3] for s in timed.steps),
                                                  "engine_steps": summarize_steps(timed.steps, spec.max_num_seqs),
                                                  "step_trace": timed.trace}))

    timed = TimedSteps(started_engine, trace=True, limit_s=time_limit, progress=progress)
    engine = VLLMEngine(spec, timed)  # served as the evaluator serves an engine it is given
    started, status = time.monotonic(), "complete"
    try:
        run_plan(spec, prompts, shards, store, [["0"]], desc="aime-sized eval", attach=lambda _spec: engine)
    except TimeLimit as stopped:
        status = f"cut by --time-limit: {stopped}"
    generation_s = time.monotonic() - started
    record = base | {"status": status, "generation_s": round(generation_s, 1),
                     "engine_steps": summarize_steps(timed.steps, spec.max_num_seqs), "step_trace": timed.trace}
    if status != "complete":  # what was decoded before the cut: the trace's own KV reads
        traced = sum(timed.trace["kv_tokens"])
        floor = traced * bytes_per_token / bandwidth
        return record | {"done": sum(s[3] for s in timed.steps), "kv_bytes_per_token": bytes_per_token,
                         "traced_kv_read_tokens": traced, "traced_floor_s": round(floor, 1),
                         "traced_floor_ratio": round(sum(timed.trace["seconds"]) / floor, 3) if floor else None}
    samples = store.read(shards)
    generated = [samples[j.problem, j.sample].n_tokens for j in jobs]
    floor = length_model.kv_read_floor(prompt_lens, generated, bytes_per_token, generation_s, bandwidth)
    traced = sum(timed.trace["kv_tokens"])
    return record | {"tokens_per_s": round(sum(generated) / generation_s),
                     "length_mismatches": sum(g != n for g, n in zip(generated, forced)), **floor,
                     "traced_kv_read_tokens": traced,
                     "traced_step_floor_ratio": round(sum(timed.trace["seconds"]) / (traced * bytes_per_token /
                                                      bandwidth), 3) if traced else None}


def probe_fields(attention_backend: str | None, adapter: bool, engine_share: float | None = None,
                 merged: bool = False) -> dict:
    """How part 2's engine differed from the cycle's evaluator, as its record says it (merged: the adapter
    served as the cycle serves a checkpoint whose merge check passed)."""
    return {"attention_backend": attention_backend or DEFAULT_ATTENTION,
            "adapter": MERGED_CHECKED if merged else "LoRARequest" if adapter else WITHOUT_ADAPTER,
            "engine_share": "the cycle's" if engine_share is None else engine_share}


def probe_suffix(args) -> str:
    """The record's name part for a probe of part 2 ('' for the cycle's own evaluator)."""
    return ((f"_{args.eval_attention_backend.lower()}" if args.eval_attention_backend else "")
            + ("_without_adapter" if args.eval_without_adapter else "")
            + (f"_share{args.eval_engine_share:g}" if args.eval_engine_share is not None else ""))


def adapter_settings(args) -> list[str]:
    """The 1-step cycle's own overrides: they set the engine part 2 copies (its KV cache, its GPU share)."""
    return ["train.compile=false", f"eval.kv_cache_dtype={args.eval_kv_cache}", *args.override]


def adapter_group(settings: list[str]) -> str:
    """The 1-step cycle's group, named by its settings: a cycle run with other overrides is never reused."""
    return f"bench-eval-{hashlib.sha256(' '.join(settings).encode()).hexdigest()[:8]}"


def finished_adapter_run(results: Path, settings: list[str]) -> Path | None:
    """A 1-step cycle an earlier --eval-only finished in this --work with the same settings, or None."""
    from opsd_sweep.run.rundir import RunDir

    done = [d for d in sorted((results / adapter_group(settings)).glob("*-s1-*"))
            if RunDir(d).read_status().get("state") == "done"]
    return done[0] if done else None


def adapter_run(work: Path, settings: list[str], env: dict) -> Path:
    """The run dir of a 1-step cycle (uncompiled: its step is not measured) whose adapter part 2 serves; one
    finished in this --work before with the same settings is reused."""
    results = work / "results"
    run_dir = finished_adapter_run(results, settings)
    if run_dir is not None:
        print(f"[bench_cycle] reusing the adapter of {run_dir}", flush=True)
        return run_dir
    sweep = sweep_args(random_world.build(work / "world"), None, 1, 16, 1, "1", results, adapter_group(settings))
    run([sys.executable, "-m", "opsd_sweep", *sweep, *settings], work / "bench_eval_sweep.log", env)
    run_dir = finished_adapter_run(results, settings)
    if run_dir is None:
        raise RuntimeError(f"the 1-step cycle for part 2's adapter did not end done; see {work / 'bench_eval_sweep.log'}")
    return run_dir


def eval_only(work: Path, out: Path, args, command: str, env: dict) -> dict:
    """Part 2 alone: an adapter (a 1-step cycle's, or --adapter init), then its eval, then (a part of fewer
    than 360 samples) its PROJECTION to the 360-sample eval."""
    import torch

    date = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    lengths = "" if args.lengths == "published" else "_" + args.lengths.split(":")[0]
    path = out / f"aime_sized_eval_{date}_{args.eval_kv_cache}{probe_suffix(args)}{lengths}.json"
    head = {"device": torch.cuda.get_device_name(0), "date": date, "command": command}
    if args.adapter == "init":
        run = composed_run(random_world.build(work / "world"), adapter_settings(args))
        checkpoint = init_adapter(run, work / "init_adapter")
        where = {"run": run, "checkpoint": checkpoint, "run_dir": None}
        head["adapter_weights"] = "PEFT-initialised (untrained) adapter of the run's LoRA shape"
    elif args.adapter_from is not None:
        where = {"run_dir": args.adapter_from.absolute()}
        head["adapter_weights"] = f"the trained adapter of {args.adapter_from.name} (its own config and merge check)"
    else:
        where = {"run_dir": adapter_run(work, adapter_settings(args), env)}
        head["adapter_weights"] = "a 1-step cycle's trained adapter"
    partial = path.with_name(path.stem + "_partial.json")
    part = aime_sized_eval(where.pop("run_dir"), work, args.length_seed, args.eval_kv_cache,
                           args.eval_attention_backend, not args.eval_without_adapter, args.lengths,
                           args.eval_problems, args.time_limit, partial=partial,
                           engine_share=args.eval_engine_share, **where)
    record = head | part
    path.write_text(json.dumps(record, indent=1))
    partial.unlink(missing_ok=True)
    steps = record["engine_steps"]
    print(f"[bench_cycle] AIME24-sized eval part, {record['requests']} requests, lengths "
          f"{record['length_model']['name']} (mean {record['eval_length_mean_tokens']}), kv cache "
          f"{args.eval_kv_cache}, {record['attention_backend']}, adapter {record['adapter']}: {record['status']}; "
          f"generation {record['generation_s']} s, " + (f"floor {record['eval_floor_s']} s (ratio "
          f"{record['eval_floor_ratio']})" if "eval_floor_s" in record else f"its traced steps' floor "
          f"{record['traced_floor_s']} s (ratio {record['traced_floor_ratio']})") + f", engine start {record['engine_start_s']} s, KV cache "
          f"{record['kv_cache_tokens']} tokens; done by {steps['done_by_s']}; steps by sequences decoding "
          f"{steps['by_sequences']}; {path}", flush=True)
    return record


def eval_projection(recorded: dict) -> dict:
    """The 360-sample eval of a recorded part: measured when it was one, else the step model refitted on the
    part's trace (eval_step_model.traced_part: a PROJECTION, with the part's fit errors; a part cut short,
    by --time-limit or a lost machine, is fitted on what it traced)."""
    complete = recorded.get("status", "complete") == "complete"
    if recorded["requests"] >= EVAL_PROBLEMS * N_SAMPLES and complete:
        return {"eval_s": recorded["generation_s"], "measured": True}
    if "step_trace" not in recorded or not recorded["step_trace"]:
        raise ValueError(f"a part of {recorded['requests']} requests ({recorded.get('status', 'complete')}) without a "
                         "step trace: nothing to project the 360-sample eval from")
    from benchmarks import eval_step_model

    figures = eval_step_model.traced_part(recorded, [EVAL_PROBLEMS * N_SAMPLES], [])
    projected = figures["projections"][0]
    return {"eval_s": projected["seconds"], "eval_s_low": projected["seconds_low"], "measured": False,
            "projection": projected, "fit": {k: v for k, v in figures["fit"].items() if k != "bands"},
            "measured_part": figures["measured_part"]}


def sweep_from(path: Path) -> dict:
    """Part 1's figures from an earlier measured record: a bench_cycle record (steady_step_s,
    fixed_cost_s_after_first) or a gpu_check record (its last, warm cycle's steady step and fixed cost)."""
    recorded = json.loads(path.read_text())
    if "steady_step_s" in recorded and "fixed_cost_s_after_first" in recorded:
        steady, fixed = recorded["steady_step_s"], recorded["fixed_cost_s_after_first"]
        grading = statistics.mean(c["eval_grading_s"] for c in recorded["per_cycle"][1:])
    elif "cycles" in recorded and isinstance(recorded["cycles"], list):
        warm = recorded["cycles"][-1]
        steady, fixed, grading = warm["steady_step_s"], warm["fixed_cost_s"], warm["eval_grading_s"]
    else:
        raise ValueError(f"{path}: neither a bench_cycle record nor a gpu_check record")
    return {"source": path.name, "device": recorded.get("device") or recorded.get("gpu"), "date": recorded.get("date"),
            "steady_step_s": steady, "fixed_cost_s_after_first": fixed, "eval_grading_s": grading}


def record_from_records(sweep: dict, recorded: dict, eval_from: Path, command: str) -> dict:
    """The bench_cycle record of a recipe cycle from two measured records (part 1 from --sweep-from, part 2
    from --eval-from): every figure of it a PROJECTION to 100 steps and the 360-sample eval. Both parts must
    come from one kind of GPU: a cycle priced half on an H200 and half on an H100 is no GPU's cycle."""
    if sweep["device"] and recorded.get("device") and sweep["device"] != recorded["device"]:
        raise ValueError(f"part 1 ({sweep['source']}) was measured on {sweep['device']}, part 2 ({eval_from.name}) on "
                         f"{recorded['device']}: pass a --sweep-from and an --eval-from of the same GPU")
    evaluated = eval_projection(recorded)
    grading_s = sweep["eval_grading_s"] * 12
    eval_s = evaluated["eval_s"] + grading_s
    steps_s = RECIPE_STEPS * sweep["steady_step_s"]
    minutes = (sweep["fixed_cost_s_after_first"] + steps_s + eval_s) / 60
    complete = recorded.get("status", "complete") == "complete"
    part = evaluated.get("measured_part", {})
    if complete:
        ratio, scope = recorded.get("eval_floor_ratio"), "the measured part, every sample generated"
    else:  # the steps traced before the cut: their time over the KV their outputs read
        ratio = part["traced"]["floor_ratio"]
        scope = (f"the measured part's first {part['traced']['steps']:,} steps ({part['traced']['seconds']} s, "
                 f"{part['traced']['decoding'][0]}-{part['traced']['decoding'][1]} sequences decoding, "
                 f"{part['traced']['done']} of {recorded['requests']} samples done) before it was cut short")
    low = {"gpu_minutes_per_cycle_low": round((sweep["fixed_cost_s_after_first"] + steps_s + evaluated["eval_s_low"]
                                               + grading_s) / 60, 2)} if "eval_s_low" in evaluated else {}
    return {"device": recorded.get("device"), "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
            "command": command, "sweep_from": sweep, "eval_from": eval_from.name,
            "length_model": recorded["length_model"], "eval_length_mean_tokens": recorded["eval_length_mean_tokens"],
            "eval_part": {"status": recorded.get("status", "complete"),
                          **{k: recorded.get(k) for k in ("requests", "length_seed", "generation_s", "engine_start_s",
                                                          "tokens_per_s", "eval_floor_s", "kv_cache_tokens",
                                                          "gpu_memory_utilization", "max_num_seqs", "adapter",
                                                          "adapter_weights", "length_mismatches") if k in recorded},
                          **({"traced": part["traced"], "fit_error": part["fit_error"],
                              "holdout_error": part["holdout_error"], "schedule": part["schedule"],
                              "whole_part": part["replayed"]} if part else {})},
            "eval_floor_ratio": ratio, "eval_floor_ratio_of": scope, "eval_360": evaluated,
            "gpu_minutes_per_cycle": round(minutes, 2), **low, "target": TARGET_GPU_MINUTES,
            "vs_seed_workflow": [round(x / minutes, 1) for x in SEED_WORKFLOW_GPU_MINUTES],
            "parts_minutes": {"fixed": round(sweep["fixed_cost_s_after_first"] / 60, 2),
                              "steps": round(steps_s / 60, 2), "eval": round(eval_s / 60, 2)},
            "note": "gpu_minutes_per_cycle is a PROJECTION: 100 x the steady step and the fixed cost measured in "
                    f"{sweep['source']}, the 360-sample eval " + ("measured" if evaluated["measured"] else
                    "PROJECTED by the step model refitted on the measured part's trace") + f" ({eval_from.name}); "
                    "eval_floor_ratio is measured (eval_floor_ratio_of says over what)"}


def cycle_record(run_dir: Path, steps: int) -> dict:
    """One cycle as its own files tell it."""
    status, lines, evaluation = checked_cycle(run_dir, steps)
    timing = evaluation["timing"]
    gpus = len(status["gpus"])
    workers = WORKER.findall((run_dir / "logs/train.log").read_text())
    return {"run": run_dir.name, "gpus": gpus, "phase_seconds": status["phase_seconds"],
            # CPU runs record no GPU-hours: their phases' wall minutes stand in (the smoke check)
            "gpu_minutes": round(gpu_hours(status)["gpu_hours.total"] * 60 if gpus else sum(status["phase_seconds"].values()) / 60, 3),
            "phase_worker": int(workers[-1]) if workers else None,
            "step_seconds": [round(line["step_seconds"], 3) for line in lines],
            "profiled_steps": [line["step"] for line in lines if line.get("profiled")],
            "steady_step_parts_s": step_parts([line for line in lines if not line.get("profiled")][-1]),
            "rollout_tokens_per_s": round(statistics.median(line["rollout_tokens_per_s"] for line in lines[1:])),
            "eval_engine": timing.get("engine"), "eval_serving": evaluation["evaluator"]["serving"],
            "eval_generation_s": timing["generation_seconds"], "eval_grading_s": timing["grading_seconds"]}


def sweep_figures(cycles: list[dict], steps: int) -> dict:
    """Steady step (every cycle's steps 2..N), each cycle's fixed cost, and what the sweep's first and
    later cycles recorded."""
    steady = statistics.median(s for c in cycles for step, s in enumerate(c["step_seconds"], 1)
                               if step > 1 and step not in c["profiled_steps"])
    for c in cycles:  # a profiled step counts as its own time, not as a steady step
        profiled_s = sum(c["step_seconds"][step - 1] for step in c["profiled_steps"])
        c["fixed_cost_s"] = round(sum(c["phase_seconds"].values()) - (steps - len(c["profiled_steps"])) * steady
                                  - profiled_s - c["eval_generation_s"], 1)
    later = cycles[1:]
    return {"steady_step_s": round(steady, 3), "fixed_cost_s_first": cycles[0]["fixed_cost_s"],
            "fixed_cost_s_after_first": round(statistics.mean(c["fixed_cost_s"] for c in later), 1),
            "recorded_gpu_minutes_first": cycles[0]["gpu_minutes"],
            "recorded_gpu_minutes_after_first": round(statistics.mean(c["gpu_minutes"] for c in later), 3),
            "cycles_in_a_used_worker": sum(c["phase_worker"] is not None and c["phase_worker"] in
                                           {p["phase_worker"] for p in cycles[:i]} for i, c in enumerate(cycles))}


def projection(cycles: list[dict], figures: dict, eval_s: float, eval_source: str) -> dict:
    """The recipe cycle (100 steps, the given eval seconds), per cycle after the first, PROJECTED."""
    gpus = max(cycles[0]["gpus"], 1)
    steps_s = RECIPE_STEPS * figures["steady_step_s"]
    per_cycle = [gpus * (c["fixed_cost_s"] + steps_s + eval_s) / 60 for c in cycles[1:]]
    minutes = statistics.mean(per_cycle)
    compared = {"vs_seed_workflow": [round(x / minutes, 1) for x in SEED_WORKFLOW_GPU_MINUTES]} if cycles[0]["gpus"] else {}
    return {"gpu_minutes_per_cycle": round(minutes, 2), "target": TARGET_GPU_MINUTES, **compared, "eval": eval_source,
            "parts_minutes": {"fixed": round(gpus * figures["fixed_cost_s_after_first"] / 60, 2),
                              "steps": round(gpus * steps_s / 60, 2), "eval": round(gpus * eval_s / 60, 2)}}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "measured")
    parser.add_argument("--cycles", type=int, default=3, help="cycles (seeds) in the sweep, >= 3")
    parser.add_argument("--steps", type=int, default=8, help="steps per cycle, >= 2 (step 1 is not steady)")
    parser.add_argument("--length-seed", type=int, default=0)
    parser.add_argument("--skip-eval", action="store_true", help="part 1 only")
    parser.add_argument("--eval-only", action="store_true", help="part 2 only (GPU), after a 1-step cycle")
    parser.add_argument("--eval-from", type=Path, default=None,
                        help="instead of part 2: the AIME-sized eval an earlier run of part 2 recorded (its JSON)")
    parser.add_argument("--tiny", action="store_true", help="CPU smoke check: the tiny profile, no GPU, part 1 only")
    parser.add_argument("--per-phase", action="store_true", help="a process per phase (hydra.launcher.phase_workers=false)")
    parser.add_argument("--cache-dir", type=Path, default=None, help="--tiny: where the tiny world is (built if missing)")
    parser.add_argument("--profile-step", type=int, default=None,
                        help="profile this step of every cycle (train.profile_step); it is left out of the steady step")
    parser.add_argument("--eval-kv-cache", default="auto", choices=["auto", "fp8"],
                        help="the sweep's cycles and part 2 with this eval.kv_cache_dtype (an evaluator option; "
                             "the cycles then evaluate on an engine of their own)")
    parser.add_argument("--eval-attention-backend", default=None, choices=["FLASH_ATTN", "FLASHINFER", "TRITON_ATTN"],
                        help="--eval-only probe: part 2's engine with these attention kernels (default: vLLM's choice)")
    parser.add_argument("--eval-without-adapter", action="store_true",
                        help="--eval-only probe: part 2 serves the base model without LoRA (merged weights' speed)")
    parser.add_argument("--eval-engine-share", type=float, default=None, metavar="F",
                        help="probe: part 2's engine at this GPU share (e.g. 0.9: the eval on an engine of its own, "
                             "the trainer's memory freed) instead of the cycle's (the rollout engine's 0.5)")
    parser.add_argument("--override", action="append", default=[], help="one more sweep override, e.g. train.fp32_matmul=ieee")
    length_model.add_argument(parser)
    parser.add_argument("--eval-problems", type=int, default=EVAL_PROBLEMS,
                        help="part 2's problems (x 12 samples): fewer than 30 measure a part, projected to the 360")
    parser.add_argument("--adapter", default="cycle", choices=["cycle", "init"],
                        help="--eval-only: the adapter of a 1-step cycle, or one of the run's LoRA shape as the "
                             "trainer initialises it (no cycle: ~4 GPU-minutes less)")
    parser.add_argument("--adapter-from", type=Path, default=None, metavar="RUN_DIR",
                        help="--eval-only: a finished cycle's run dir (e.g. make gpu-check's seed 1) instead of a "
                             "1-step cycle: its config, final checkpoint and merge check, as its eval phase served them")
    parser.add_argument("--time-limit", type=float, default=None,
                        help="part 2: stop past this many seconds of generation (the record keeps the trace)")
    parser.add_argument("--sweep-from", type=Path, default=None,
                        help="with --eval-from: part 1's figures from this earlier record (bench_cycle or gpu_check) "
                             "instead of a sweep; the record is written on the CPU")
    args = parser.parse_args(argv)
    try:
        lengths = length_model.parse(args.lengths)
    except ValueError as err:
        parser.error(str(err))
    if not 1 <= args.eval_problems <= EVAL_PROBLEMS:
        parser.error(f"--eval-problems {args.eval_problems}: give 1 to {EVAL_PROBLEMS}")
    if args.cycles < 3 or args.steps < 2:
        parser.error(f"--cycles {args.cycles} --steps {args.steps}: give >= 3 cycles (the first is cold) and "
                     ">= 2 steps (step 1 compiles)")
    recorded = None
    if args.eval_from is not None:
        recorded = json.loads(args.eval_from.read_text())
        recorded = recorded.get("aime_eval", recorded)  # a whole bench_cycle record, or part 2's own
        if not isinstance(recorded, dict):
            parser.error(f"--eval-from {args.eval_from}: its part 2 is {recorded!r} (the machine was lost during it); "
                         "give a record whose AIME-sized eval finished")
        probe = {k: v for k, v in recorded.items() if k in ("attention_backend", "adapter", "engine_share")}
        cycles = (probe_fields(None, True), probe_fields(None, True, merged=True))  # either is a cycle's evaluator
        if probe and not any(all(own[k] == v for k, v in probe.items()) for own in cycles):  # older: fewer keys
            parser.error(f"--eval-from {args.eval_from} is a probe of part 2 ({probe}), not the cycle's evaluator: "
                         "give a record of `--eval-only` without --eval-attention-backend, --eval-without-adapter "
                         "or --eval-engine-share")
        if recorded.get("kv_cache_dtype", "auto") != args.eval_kv_cache:
            parser.error(f"--eval-from {args.eval_from} recorded an eval with kv_cache_dtype "
                         f"{recorded.get('kv_cache_dtype', 'auto')}, not --eval-kv-cache {args.eval_kv_cache}: give "
                         "a record of the same evaluator")
        recorded_lengths = recorded.get("length_model", {}).get("name", "short")  # before issue 39: the short model
        if recorded_lengths != lengths.name:
            parser.error(f"--eval-from {args.eval_from} was forced to the {recorded_lengths} length model, not "
                         f"--lengths {args.lengths}: the short model is a probe, never a cycle's eval; give "
                         f"--lengths {recorded_lengths} to project with it anyway")
    if args.sweep_from is not None and args.eval_from is None:
        parser.error("--sweep-from takes part 1 from a record: give part 2's record with --eval-from too")
    if args.tiny and args.eval_kv_cache != "auto":
        parser.error(f"--tiny --eval-kv-cache {args.eval_kv_cache}: the tiny profile evaluates on hf, whose KV cache "
                     "keeps the model's dtype; give --eval-kv-cache auto or run on a GPU")
    if args.eval_only and (args.tiny or args.skip_eval or args.eval_from is not None):
        parser.error("--eval-only measures part 2 on a GPU: leave out --tiny, --skip-eval and --eval-from")
    if args.eval_engine_share is not None and not 0 < args.eval_engine_share <= 0.95:
        parser.error(f"--eval-engine-share {args.eval_engine_share}: a GPU share in (0, 0.95], e.g. 0.9 (the eval "
                     "phase's own engine, eval.gpu_memory_utilization)")
    if not args.eval_only and (args.eval_attention_backend or args.eval_without_adapter
                               or args.eval_engine_share is not None):
        parser.error("--eval-attention-backend, --eval-without-adapter and --eval-engine-share are probes of part 2 "
                     "alone: add --eval-only "
                     "(a sweep's cycles keep the evaluator's engine)")
    work, out = args.work.absolute(), args.out.absolute()
    for folder in (work, out):
        folder.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1", NCCL_NVLS_ENABLE="0")
    command = "python3 -m benchmarks.bench_cycle " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.eval_only:
        return eval_only(work, out, args, command, env)
    if args.sweep_from is not None:
        report = record_from_records(sweep_from(args.sweep_from), recorded, args.eval_from, command)
        name = "" if lengths.name == "published" else f"_{lengths.name}"
        path = out / f"bench_cycle_{report['date']}{name}.json"
        return written(report, path, f"from {args.sweep_from.name} and {args.eval_from.name}: PROJECTED "
                       f"{report['gpu_minutes_per_cycle']} GPU-minutes per recipe cycle {report['parts_minutes']}, "
                       f"eval at {report['length_model']['name']} lengths (mean {report['eval_length_mean_tokens']}); "
                       f"measured {report['eval_floor_ratio']}x the KV-read floor over "
                       f"{report['eval_floor_ratio_of']}")
    results, seeds = work / "results", ",".join(str(i) for i in range(1, args.cycles + 1))
    if args.tiny:
        cache = (args.cache_dir or work / "cache").absolute()
        sweep = ["-m", *TINY, f"train.max_steps={args.steps}", f"train.save_steps={args.steps}", f"seed={seeds}",
                 f"results_root={results}", "group=bench-cycle", "force=true", f"cache_dir={cache}"]
        device = "CPU (tiny profile)"
    else:
        import torch

        world = random_world.build(work / "world")
        sweep = sweep_args(world, None, args.steps, 256, 1, seeds, results, "bench-cycle")
        device = torch.cuda.get_device_name(0)
    if args.per_phase:
        sweep.append("hydra.launcher.phase_workers=false")
    if args.profile_step is not None:
        sweep.append(f"train.profile_step={args.profile_step}")
    if args.eval_kv_cache != "auto":  # the cycles take the path this evaluator option takes (its own eval engine)
        sweep.append(f"eval.kv_cache_dtype={args.eval_kv_cache}")
    sweep += args.override
    wall = run([sys.executable, "-m", "opsd_sweep", *sweep], work / "bench_cycle_sweep.log", env)
    runs = sorted((results / "bench-cycle").glob("*-s*-*"), key=lambda p: int(p.name.rsplit("-", 2)[1][1:]))
    cycles = [cycle_record(r, args.steps) for r in runs]
    figures = sweep_figures(cycles, args.steps)
    report = {"device": device, "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
              "command": command, "launcher_path": "a process per phase" if args.per_phase else "warm phase workers",
              "cycles": len(cycles), "steps_per_cycle": args.steps, "sweep_wall_s": round(wall, 1), **figures,
              "note": "gpu_minutes_per_cycle is a PROJECTION to 100 steps from the measured steady step and "
                      "each later cycle's measured fixed cost", "per_cycle": cycles}
    path = out / f"bench_cycle_{report['date']}.json"
    if recorded is not None:
        report = with_aime_eval(report, cycles, figures, recorded,
                                f"AIME24-sized, recorded in {args.eval_from.name} (not measured in this run")
    elif args.tiny or args.skip_eval:
        small = statistics.mean(c["eval_generation_s"] + c["eval_grading_s"] for c in cycles[1:])
        report |= projection(cycles, figures, small, "the sweep's own small eval (not AIME-sized)")
    else:  # part 1's figures are kept should part 2 not finish (a lost machine)
        path.write_text(json.dumps(report | {"aime_eval": "not finished"}, indent=1))
        report["aime_eval"] = aime = aime_sized_eval(runs[0], work, args.length_seed, args.eval_kv_cache,
                                                     lengths=args.lengths, problems=args.eval_problems,
                                                     time_limit=args.time_limit)
        report = with_aime_eval(report, cycles, figures, aime, "AIME24-sized (part 2")
    return written(report, path, f"{device}, {report['launcher_path']}: steady step {figures['steady_step_s']} s, "
                   f"fixed cost {figures['fixed_cost_s_first']} s (first cycle), {figures['fixed_cost_s_after_first']} "
                   f"s after (target {TARGET_FIXED_COST_S}); PROJECTED {report['gpu_minutes_per_cycle']} GPU-minutes "
                   f"per recipe cycle (target {TARGET_GPU_MINUTES}): {report['parts_minutes']}")


def written(report: dict, path: Path, line: str) -> dict:
    """Write the report's record to `path` and say `line` (with where it went)."""
    path.write_text(json.dumps(report, indent=1))
    print(f"[bench_cycle] {line}; {path}", flush=True)
    return report



def with_aime_eval(report: dict, cycles: list[dict], figures: dict, record: dict, source: str) -> dict:
    """The report with the recipe cycle projected at an AIME24-sized eval `record` (its 360 samples measured,
    or PROJECTED from a measured part), grading scaled by 12x the samples, and the eval's length model."""
    evaluated = eval_projection(record)
    eval_s = evaluated["eval_s"] + statistics.mean(c["eval_grading_s"] for c in cycles[1:]) * 12
    words = source + ("" if evaluated["measured"] else "; its 360 samples PROJECTED from a measured part")
    return report | projection(cycles, figures, eval_s, words + "), grading scaled by 12x the samples") | {
        "length_model": record.get("length_model", {"name": "short"}),
        "eval_length_mean_tokens": record.get("eval_length_mean_tokens", (record.get("lengths") or {}).get("mean")),
        "eval_floor_ratio": record.get("eval_floor_ratio"), "eval_360": evaluated}

if __name__ == "__main__":
    main()
