"""GPU-minutes per recipe cycle (issues 14 and 23), measured from a real sweep's own records.

    export PYTHONPATH=/tmp/site:$PWD/src NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
    python3 benchmarks/bench_cycle.py --work /tmp/cycle [--cycles 3 --steps 8] [--per-phase]
    python3 benchmarks/bench_cycle.py --work /tmp/cycle --eval-from benchmarks/measured/aime_sized_eval_<date>.json
    python3 benchmarks/bench_cycle.py --work /tmp/cycle --tiny    # CPU smoke check (tiny profile, no GPU)
    python3 benchmarks/bench_cycle.py --work /tmp/cycle --steps 5 --profile-step 5   # + each cycle's step 5 profiled
    python3 benchmarks/bench_cycle.py --work /tmp/cycle --eval-only --eval-kv-cache fp8   # part 2 alone
    python3 benchmarks/bench_cycle.py --work /tmp/cycle --eval-only --eval-attention-backend FLASHINFER
    python3 benchmarks/bench_cycle.py --work /tmp/cycle --eval-only --eval-without-adapter

Part 1, cycles as a user runs them: one sweep of --cycles seeds through `python -m opsd_sweep -m` on the
random-init Qwen3-1.7B world (opsd_sweep.random_world: student / teacher prompts ~300 / ~1,500 tokens),
the recipe's 32 prompts x 1,024-token rollouts per step on one GPU (8 x 4), --steps steps, default
backends and launcher (warm phase workers; --per-phase: a process per phase, the path before issue 23),
a small evaluation (30 x 1 x 256 tokens). Read back from each run's files: its GPU-minutes (status.json
gpu_hours, what the cycle recorded for its phases), step times (metrics.jsonl) and eval generation
time (eval.json). The steady step is the median of every cycle's steps 2..N; a cycle's fixed cost is
its phase time minus N steady steps minus its eval generation (process or worker hand-over, loading,
engine start, compiles, checkpoints, grading).

Part 2 (GPU only), an AIME24-sized evaluation at thinking lengths: 30 problems x 12 samples, each
forced to its length (lognormal, mean 5,000, clipped to [64, 38,912], drawn as in bench_vllm_tp_dp.py:
mean 4,765), through the evaluator's run_plan on a vLLM engine configured as the cycle's own (the
trained adapter as a LoRARequest, eval.max_num_seqs, the GPU share of the engine that evaluates a cycle:
the rollout engine's, or with --eval-kv-cache fp8 the eval phase's own engine's), timed from the first
request to the last sample, every engine step timed with the requests in the engine (eval_trace.py; its
plot: `python3 benchmarks/eval_trace.py RECORD.json`). With --eval-kv-cache fp8 the sweep's cycles use it
too, so their fixed cost includes the eval engine each one starts. Two probes of part 2 alone change its
engine, to find where the eval's tail goes: --eval-attention-backend (vLLM's attention kernels) and
--eval-without-adapter (the base model served without LoRA: the speed of merged weights, same shapes).

The 100-step cycle is then PROJECTED (not measured end to end), per cycle after the sweep's first:
its fixed cost + 100 x the measured steady step + the AIME-sized generation and grading (part 1's own
small eval with --skip-eval or --tiny, and the JSON says which), times the GPUs. --eval-only runs part 2
alone, on the adapter of one 1-step uncompiled cycle (its trained weights do not change the forced
lengths; a later --eval-only with the same --work, --eval-kv-cache and --override reuses it), and writes OUT/aime_sized_eval_<UTC date>_<kv
cache>[_<probe>].json, the record --eval-from reads (a probe's record is refused there: not the cycle's eval). Writes
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from bench_vllm_tp_dp import N_SAMPLES, draw_lengths, summarize  # noqa: E402
from eval_trace import TimedSteps, engine_args_with, summarize_steps  # noqa: E402

from opsd_sweep import random_world  # noqa: E402
from opsd_sweep.gpu_check import checked_cycle, run, step_parts, sweep_args  # noqa: E402
from opsd_sweep.run.rundir import gpu_hours  # noqa: E402

RECIPE_STEPS, TARGET_GPU_MINUTES, SEED_WORKFLOW_GPU_MINUTES = 100, 12.0, (112, 132)
TARGET_FIXED_COST_S = 20.0
DEFAULT_ATTENTION, WITHOUT_ADAPTER = "vLLM's choice", "none (the base model: merged weights' speed)"
TINY = ["profile=tiny", "eval.max_problems=4", "eval.n_samples=1", "hydra.launcher.max_parallel=1"]
WORKER = re.compile(r"=== \S+ phase worker (\d+): train ===")


def cycle_eval_setup(run_dir: Path, kv_cache_dtype: str = "auto", adapter: bool = True):
    """(engine spec, prompts, planned shards) of part 2 on a cycle's run dir: the engine set up as the cycle's
    evaluator sets up its own (its GPU share where the rollout engine evaluates), 30 problems x 12 samples."""
    from omegaconf import OmegaConf

    from opsd_sweep.config import from_dict
    from opsd_sweep.evaluate.datasets import load_problems
    from opsd_sweep.evaluate.evaluator import engine_spec
    from opsd_sweep.evaluate.prompts import render_eval_prompts
    from opsd_sweep.evaluate.shards import plan_shards
    from opsd_sweep.modeling import load_tokenizer
    from opsd_sweep.run.rundir import RunDir
    from opsd_sweep.train.engine_plan import rollout_engine_serves_eval

    rd = RunDir(run_dir)
    run = from_dict(OmegaConf.to_container(OmegaConf.load(rd.config)))
    run = replace(run, eval=replace(run.eval, backend="vllm", n_samples=N_SAMPLES, max_new_tokens=38912,
                                    kv_cache_dtype=kv_cache_dtype))
    problems = load_problems(run.eval)
    spec = engine_spec(run, rd.latest_checkpoint())
    spec = spec if adapter else replace(spec, adapter_path=None)
    if rollout_engine_serves_eval(run, world_size=1)[0]:  # the cycle evaluates on its rollout engine: that share
        spec = replace(spec, gpu_memory_utilization=run.rollout.gpu_memory_utilization)
    prompts = render_eval_prompts(load_tokenizer(run.model), run.eval, problems)
    return spec, prompts, plan_shards([p.id for p in problems], N_SAMPLES, run.eval.shard_size, run.seed)


def aime_sized_eval(run_dir: Path, work: Path, length_seed: int, kv_cache_dtype: str = "auto",
                    attention_backend: str | None = None, adapter: bool = True) -> dict:
    """Part 2: 360 forced-length requests on an engine set up like the cycle's, timed step by step
    (kv_cache_dtype: the evaluator option eval.kv_cache_dtype; attention_backend, adapter: probes)."""
    from opsd_sweep.evaluate.generate import Job, Shard
    from opsd_sweep.evaluate.runner import run_plan
    from opsd_sweep.evaluate.shards import ShardStore

    spec, prompts, planned = cycle_eval_setup(run_dir, kv_cache_dtype, adapter)
    lengths = iter(draw_lengths(sum(len(s.jobs) for s in planned), length_seed))
    shards = [Shard(s.index, s.seed, tuple(Job(j.problem, j.sample, j.seed, next(lengths)) for j in s.jobs))
              for s in planned]
    forced = [j.length for s in shards for j in s.jobs]
    store = ShardStore(work / "aime_shards", "bench")
    store.remove()
    store.prepare()
    started = time.monotonic()
    from opsd_sweep.evaluate.vllm_engine import VLLMEngine

    with engine_args_with(**({"attention_backend": attention_backend} if attention_backend else {})):
        timed = TimedSteps(VLLMEngine._start(spec, spec.adapter_path is not None))
    engine = VLLMEngine(spec, timed)  # served as the evaluator serves an engine it is given
    engine_s = time.monotonic() - started
    started = time.monotonic()
    run_plan(spec, prompts, shards, store, [["0"]], desc="aime-sized eval", attach=lambda _spec: engine)
    generation_s = time.monotonic() - started
    samples = store.read(shards)
    mismatches = sum(samples[j.problem, j.sample].n_tokens != j.length for s in shards for j in s.jobs)
    return {"requests": len(forced), "lengths": summarize(forced, forced), "engine_start_s": round(engine_s, 1),
            "generation_s": round(generation_s, 1), "tokens_per_s": round(sum(forced) / generation_s),
            "length_mismatches": mismatches, "max_num_seqs": spec.max_num_seqs, "kv_cache_dtype": kv_cache_dtype,
            "gpu_memory_utilization": spec.gpu_memory_utilization, **probe_fields(attention_backend, adapter),
            "engine_steps": summarize_steps(timed.steps, spec.max_num_seqs)}


def probe_fields(attention_backend: str | None, adapter: bool) -> dict:
    """How part 2's engine differed from the cycle's evaluator, as its record says it."""
    return {"attention_backend": attention_backend or DEFAULT_ATTENTION,
            "adapter": "LoRARequest" if adapter else WITHOUT_ADAPTER}


def probe_suffix(args) -> str:
    """The record's name part for a probe of part 2 ('' for the cycle's own evaluator)."""
    return ((f"_{args.eval_attention_backend.lower()}" if args.eval_attention_backend else "")
            + ("_without_adapter" if args.eval_without_adapter else ""))


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
    """Part 2 alone: one 1-step cycle for an adapter, then its eval."""
    import torch

    run_dir = adapter_run(work, adapter_settings(args), env)
    record = {"device": torch.cuda.get_device_name(0),
              "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(), "command": command,
              **aime_sized_eval(run_dir, work, args.length_seed, args.eval_kv_cache, args.eval_attention_backend,
                                not args.eval_without_adapter)}
    path = out / f"aime_sized_eval_{record['date']}_{args.eval_kv_cache}{probe_suffix(args)}.json"
    path.write_text(json.dumps(record, indent=1))
    steps = record["engine_steps"]
    print(f"[bench_cycle] AIME24-sized eval, kv cache {args.eval_kv_cache}, {record['attention_backend']}, adapter "
          f"{record['adapter']}: generation {record['generation_s']} s, {record['tokens_per_s']} tok/s, engine start "
          f"{record['engine_start_s']} s; done by {steps['done_by_s']}; steps by sequences decoding "
          f"{steps['by_sequences']}; {path}", flush=True)
    return record


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
    parser.add_argument("--override", action="append", default=[], help="one more sweep override, e.g. train.fp32_matmul=ieee")
    args = parser.parse_args(argv)
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
        probe = {k: v for k, v in recorded.items() if k in ("attention_backend", "adapter")}
        if probe and probe != probe_fields(None, True):
            parser.error(f"--eval-from {args.eval_from} is a probe of part 2 ({probe}), not the cycle's evaluator: "
                         "give a record of `--eval-only` without --eval-attention-backend or --eval-without-adapter")
        if recorded.get("kv_cache_dtype", "auto") != args.eval_kv_cache:
            parser.error(f"--eval-from {args.eval_from} recorded an eval with kv_cache_dtype "
                         f"{recorded.get('kv_cache_dtype', 'auto')}, not --eval-kv-cache {args.eval_kv_cache}: give "
                         "a record of the same evaluator")
    if args.tiny and args.eval_kv_cache != "auto":
        parser.error(f"--tiny --eval-kv-cache {args.eval_kv_cache}: the tiny profile evaluates on hf, whose KV cache "
                     "keeps the model's dtype; give --eval-kv-cache auto or run on a GPU")
    if args.eval_only and (args.tiny or args.skip_eval or args.eval_from is not None):
        parser.error("--eval-only measures part 2 on a GPU: leave out --tiny, --skip-eval and --eval-from")
    if not args.eval_only and (args.eval_attention_backend or args.eval_without_adapter):
        parser.error("--eval-attention-backend and --eval-without-adapter are probes of part 2 alone: add --eval-only "
                     "(a sweep's cycles keep the evaluator's engine)")
    work, out = args.work.absolute(), args.out.absolute()
    for folder in (work, out):
        folder.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1", NCCL_NVLS_ENABLE="0")
    command = "python3 benchmarks/bench_cycle.py " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.eval_only:
        return eval_only(work, out, args, command, env)
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
        eval_s = recorded["generation_s"] + statistics.mean(c["eval_grading_s"] for c in cycles[1:]) * 12
        report |= projection(cycles, figures, eval_s, f"AIME24-sized, recorded in {args.eval_from.name} (not "
                             "measured in this run), grading scaled by 12x the samples")
    elif args.tiny or args.skip_eval:
        small = statistics.mean(c["eval_generation_s"] + c["eval_grading_s"] for c in cycles[1:])
        report |= projection(cycles, figures, small, "the sweep's own small eval (not AIME-sized)")
    else:  # part 1's figures are kept should part 2 not finish (a lost machine)
        path.write_text(json.dumps(report | {"aime_eval": "not finished"}, indent=1))
        report["aime_eval"] = aime = aime_sized_eval(runs[0], work, args.length_seed, args.eval_kv_cache)
        eval_s = aime["generation_s"] + statistics.mean(c["eval_grading_s"] for c in cycles[1:]) * 12
        report |= projection(cycles, figures, eval_s, "AIME24-sized (part 2), grading scaled by 12x the samples")
    path.write_text(json.dumps(report, indent=1))
    print(f"[bench_cycle] {device}, {report['launcher_path']}: steady step {figures['steady_step_s']} s, fixed cost "
          f"{figures['fixed_cost_s_first']} s (first cycle), {figures['fixed_cost_s_after_first']} s after "
          f"(target {TARGET_FIXED_COST_S}); PROJECTED {report['gpu_minutes_per_cycle']} GPU-minutes per recipe "
          f"cycle (target {TARGET_GPU_MINUTES}): {report['parts_minutes']}; {path}", flush=True)
    return report


if __name__ == "__main__":
    main()
