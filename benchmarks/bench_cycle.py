"""GPU-minutes per recipe cycle (issue 14, item 7), measured through the CLI on the GPUs it is given.

    export PYTHONPATH=/tmp/site:$PWD/src NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
    python3 benchmarks/bench_cycle.py --work /tmp/cycle --out $OUT [--steps 8]

Part 1, a cycle as a user runs it: `python -m opsd_sweep -m` on the random-init Qwen3-1.7B world
(opsd_sweep.random_world: student / teacher prompts ~300 / ~1,500 tokens), the recipe's 32 prompts x
1,024-token rollouts per step on one GPU (8 x 4), --steps steps, default backends, a small evaluation
(30 x 1 x 256 tokens). From its files: the steady step (median of steps 2..N, with its parts), the
fixed cost (cycle wall - N x steady step - eval generation) and the trainer's own peak memory.

Part 2, an AIME24-sized evaluation at thinking lengths: 30 problems x 12 samples, each forced to its
length (lognormal, mean 5,000, clipped to [64, 38,912], drawn as in bench_vllm_tp_dp.py: mean 4,765),
through the evaluator's run_plan on a vLLM engine configured as the cycle's own (the trained adapter
as a LoRARequest, rollout.gpu_memory_utilization of the GPU, eval.max_num_seqs), timed from the first
request to the last sample.

The 100-step cycle is then PROJECTED (not measured end to end): fixed + 100 x steady step + the
AIME-sized generation + its grading, times the GPUs; the JSON says so. Random weights never emit EOS,
so rollouts always run 1,024 tokens (the recipe's cap; real rollouts are shorter).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from bench_vllm_tp_dp import N_SAMPLES, draw_lengths, summarize  # noqa: E402

from opsd_sweep import random_world  # noqa: E402
from opsd_sweep.gpu_check import cycle_figures, run, sweep_args  # noqa: E402

RECIPE_STEPS, TARGET_GPU_MINUTES, SEED_WORKFLOW_GPU_MINUTES = 100, 15.0, (112, 132)


def aime_sized_eval(run_dir: Path, work: Path, length_seed: int) -> dict:
    """Part 2: 360 forced-length requests on an engine set up like the cycle's, timed."""
    from omegaconf import OmegaConf

    from opsd_sweep.config import from_dict
    from opsd_sweep.evaluate.datasets import load_problems
    from opsd_sweep.evaluate.evaluator import engine_spec
    from opsd_sweep.evaluate.generate import Job, Shard
    from opsd_sweep.evaluate.prompts import render_eval_prompts
    from opsd_sweep.evaluate.runner import run_plan
    from opsd_sweep.evaluate.shards import ShardStore, plan_shards
    from opsd_sweep.modeling import load_tokenizer
    from opsd_sweep.run.rundir import RunDir

    rd = RunDir(run_dir)
    run = from_dict(OmegaConf.to_container(OmegaConf.load(rd.config)))
    run = replace(run, eval=replace(run.eval, backend="vllm", n_samples=N_SAMPLES, max_new_tokens=38912))
    problems = load_problems(run.eval)
    spec = replace(engine_spec(run, rd.latest_checkpoint()),
                   gpu_memory_utilization=run.rollout.gpu_memory_utilization)  # the share the shared engine has
    prompts = render_eval_prompts(load_tokenizer(run.model), run.eval, problems)
    planned = plan_shards([p.id for p in problems], N_SAMPLES, run.eval.shard_size, run.seed)
    lengths = iter(draw_lengths(sum(len(s.jobs) for s in planned), length_seed))
    shards = [Shard(s.index, s.seed, tuple(Job(j.problem, j.sample, j.seed, next(lengths)) for j in s.jobs))
              for s in planned]
    forced = [j.length for s in shards for j in s.jobs]
    store = ShardStore(work / "aime_shards", "bench")
    store.remove()
    store.prepare()
    started = time.monotonic()
    from opsd_sweep.evaluate.vllm_engine import VLLMEngine

    engine = VLLMEngine(spec)
    engine_s = time.monotonic() - started
    started = time.monotonic()
    run_plan(spec, prompts, shards, store, [["0"]], desc="aime-sized eval", attach=lambda _spec: engine)
    generation_s = time.monotonic() - started
    samples = store.read(shards)
    mismatches = sum(samples[j.problem, j.sample].n_tokens != j.length for s in shards for j in s.jobs)
    return {"requests": len(forced), "lengths": summarize(forced, forced), "engine_start_s": round(engine_s, 1),
            "generation_s": round(generation_s, 1), "tokens_per_s": round(sum(forced) / generation_s),
            "length_mismatches": mismatches, "max_num_seqs": spec.max_num_seqs,
            "gpu_memory_utilization": spec.gpu_memory_utilization}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--length-seed", type=int, default=0)
    parser.add_argument("--skip-eval", action="store_true", help="part 1 only")
    args = parser.parse_args(argv)
    import torch

    work, out = args.work.absolute(), args.out.absolute()
    out.mkdir(parents=True, exist_ok=True)
    world = random_world.build(work / "world")
    results = work / "results"
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1", NCCL_NVLS_ENABLE="0")
    report = {"gpu": torch.cuda.get_device_name(0), "gpus": 1, "steps_measured": args.steps,
              "note": "the 100-step cycle is a PROJECTION from the measured parts"}
    run([sys.executable, "-m", "opsd_sweep", *sweep_args(world, None, args.steps, 256, 1, "1", results, "bench-cycle")],
        out / "bench_cycle_sweep.log", env)
    run_dir = next((results / "bench-cycle").glob("*-s1-*"))
    n_eval = len((world / "eval.jsonl").read_text().splitlines())
    report["cycle"] = cycle = cycle_figures(run_dir, args.steps, 1, n_eval)
    steps = [json.loads(line) for line in (run_dir / "train/metrics.jsonl").read_text().splitlines()]
    report["step_seconds"] = [round(s["step_seconds"], 2) for s in steps]
    report["rollout_tokens_per_s"] = round(statistics.median(s["rollout_tokens_per_s"] for s in steps[1:]))
    (out / "bench_cycle.json").write_text(json.dumps(report, indent=1))
    if not args.skip_eval:
        report["aime_eval"] = aime = aime_sized_eval(run_dir, work, args.length_seed)
        minutes = (cycle["fixed_cost_s"] + RECIPE_STEPS * cycle["steady_step_s"] + aime["generation_s"]
                   + cycle["eval_grading_s"] * 12) / 60  # grading scales with the 12x more samples
        report["projection"] = {
            "gpu_minutes_per_cycle": round(minutes, 1), "target": TARGET_GPU_MINUTES,
            "vs_seed_workflow": [round(x / minutes, 1) for x in SEED_WORKFLOW_GPU_MINUTES],
            "parts_minutes": {"fixed": round(cycle["fixed_cost_s"] / 60, 2),
                              "steps": round(RECIPE_STEPS * cycle["steady_step_s"] / 60, 2),
                              "eval_generation": round(aime["generation_s"] / 60, 2)}}
        print(f"[bench_cycle] PROJECTED {minutes:.1f} GPU-minutes per recipe cycle on 1 GPU "
              f"(target {TARGET_GPU_MINUTES}): {report['projection']['parts_minutes']}", flush=True)
    (out / "bench_cycle.json").write_text(json.dumps(report, indent=1))
    print(json.dumps({k: v for k, v in report.items() if k != "step_seconds"}, indent=1))


if __name__ == "__main__":
    main()
