"""Several checkpoints' AIME24-sized evals in one engine: does one tail of long samples serve them all? (issue 23)

    export PYTHONPATH=/tmp/site:$PWD/src NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
    python3 -m benchmarks.bench_shared_tail --work /tmp/be --checkpoints 2      # GPU only

Lengths: --lengths (length_model.py; default `published`, thinking-mode AIME24 at mean ~19,000; `short` is
the old mean-5,000 probe). One checkpoint's eval at the short lengths spent ~40% of its time on its last few
long samples, at 5-8 ms a step for a handful of sequences (benchmarks/measured/2026-12-03_merged_eval_on_the_rollout_engine.md). Checkpoints evaluated together in one engine (the saved
checkpoints of `eval.checkpoints=all`, or several cycles' final ones), each its own LoRARequest, would
decode their tails side by side. This measures that: --checkpoints copies of bench_cycle.py's part 2 (360
requests forced to --lengths, each copy its own length draw, --length-seed + copy) submitted at once
to one engine set up as the cycle's evaluator (its GPU share, max_num_seqs; max_loras raised to
--checkpoints), each copy its own LoRARequest of the adapter of bench_cycle.py --eval-only's 1-step cycle (the
weights do not change forced lengths; the same --work reuses it). Every engine step is timed (eval_trace.py).
Compare generation_s with --checkpoints x bench_cycle.py --eval-only's at the same --lengths (470.8 s on
2026-12-02 at the short lengths: one LoRARequest). The record carries length_model, eval_length_mean_tokens and
the KV-read floor of all copies' lengths (eval_floor_s, eval_floor_ratio).
Writes OUT/shared_tail_<UTC date>_<checkpoints>[_<lengths>].json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from argparse import Namespace
from dataclasses import replace
from pathlib import Path

from opsd_sweep.costs import length_model
from benchmarks.bench_cycle import adapter_run, adapter_settings, cycle_eval_setup
from benchmarks.bench_vllm_tp_dp import N_SAMPLES, summarize
from benchmarks.eval_trace import TimedSteps, engine_args_with, summarize_steps

# the adapter of `bench_cycle.py --eval-only` without options: the cycle's own evaluator
DEFAULT_ADAPTER = Namespace(eval_kv_cache="auto", override=[])


def shared_tail_eval(run_dir: Path, checkpoints: int, length_seed: int, lengths: str = "published") -> dict:
    """`checkpoints` copies of part 2 in one engine, all submitted before its first step."""
    from tqdm import tqdm
    from vllm.lora.request import LoRARequest

    from opsd_sweep.evaluate.vllm_engine import VLLMEngine, request_params

    spec, prompts, planned = cycle_eval_setup(run_dir)
    jobs = [job for shard in planned for job in shard.jobs]
    started = time.monotonic()
    with engine_args_with(max_loras=checkpoints):
        engine = TimedSteps(VLLMEngine._start(spec, lora=True))
    engine_s = time.monotonic() - started
    model = length_model.parse(lengths)
    problems = max(job.problem for job in jobs) + 1
    forced, draws, prompt_lens = {}, [], []
    for copy in range(checkpoints):
        drawn = model.draw(problems, N_SAMPLES, length_seed + copy)  # problem p's sample s at p * 12 + s
        copy_lengths = [drawn[job.problem * N_SAMPLES + job.sample] for job in jobs]
        draws.append(summarize(copy_lengths, copy_lengths) | {"length_model": model.describe(copy_lengths)})
        prompt_lens += [len(prompts[job.problem]) for job in jobs]
        lora = LoRARequest(f"copy-{copy}", copy + 1, spec.adapter_path)
        for position, (job, length) in enumerate(zip(jobs, copy_lengths)):
            request_id = f"{copy}:{position}"
            forced[request_id] = length
            engine.add_request(request_id, {"prompt_token_ids": list(prompts[job.problem])},
                               request_params(spec.sampling, replace(job, length=length)),
                               lora_request=lora)
    copy_done_s, mismatches = [0.0] * checkpoints, 0
    started = time.monotonic()
    with tqdm(total=len(forced), desc=f"{checkpoints} checkpoints in one engine", unit="sample") as bar:
        while engine.has_unfinished_requests():
            for output in engine.step():
                if output.finished:
                    copy = int(output.request_id.split(":")[0])
                    copy_done_s[copy] = time.monotonic() - started
                    mismatches += len(output.outputs[0].token_ids) != forced[output.request_id]
                    bar.update(1)
    generation_s = time.monotonic() - started
    every = list(forced.values())
    import torch

    floor = length_model.kv_read_floor(prompt_lens, every, length_model.kv_bytes_per_token(Path(spec.model_path)),
                                       generation_s, length_model.hbm_bytes_per_s(torch.cuda.get_device_name(0)))
    return {"checkpoints": checkpoints, "requests": len(forced), **length_model.record_fields(model, every),
            "length_draws": draws, **floor,
            "engine_start_s": round(engine_s, 1), "generation_s": round(generation_s, 1),
            "generation_s_per_checkpoint": round(generation_s / checkpoints, 1),
            "each_checkpoint_done_s": [round(s, 1) for s in copy_done_s],
            "tokens_per_s": round(sum(forced.values()) / generation_s), "length_mismatches": mismatches,
            "max_num_seqs": spec.max_num_seqs, "gpu_memory_utilization": spec.gpu_memory_utilization,
            "engine_steps": summarize_steps(engine.steps, spec.max_num_seqs)}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, required=True, help="as bench_cycle.py --eval-only's (its adapter is reused)")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "measured")
    parser.add_argument("--checkpoints", type=int, default=2, help="evals in one engine, >= 2")
    parser.add_argument("--length-seed", type=int, default=0, help="copy c draws its lengths with this + c")
    length_model.add_argument(parser)
    args = parser.parse_args(argv)
    try:
        length_model.parse(args.lengths)
    except ValueError as err:
        parser.error(str(err))
    if args.checkpoints < 2:
        parser.error(f"--checkpoints {args.checkpoints}: give >= 2 (one checkpoint alone is bench_cycle.py --eval-only)")
    import torch

    work, out = args.work.absolute(), args.out.absolute()
    for folder in (work, out):
        folder.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1", NCCL_NVLS_ENABLE="0")
    run_dir = adapter_run(work, adapter_settings(DEFAULT_ADAPTER), env)
    record = {"device": torch.cuda.get_device_name(0),
              "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
              "command": "python3 -m benchmarks.bench_shared_tail " + " ".join(argv if argv is not None else sys.argv[1:]),
              **shared_tail_eval(run_dir, args.checkpoints, args.length_seed, args.lengths)}
    name = "" if args.lengths == "published" else "_" + args.lengths.split(":")[0]
    path = out / f"shared_tail_{record['date']}_{args.checkpoints}{name}.json"
    path.write_text(json.dumps(record, indent=1))
    print(f"[bench_shared_tail] {args.checkpoints} checkpoints' AIME24-sized evals in one engine: generation "
          f"{record['generation_s']} s ({record['generation_s_per_checkpoint']} s a checkpoint; floor "
          f"{record['eval_floor_s']} s, {record['eval_floor_ratio']}x; lengths {record['length_model']['name']}, mean "
          f"{record['eval_length_mean_tokens']}), each done at "
          f"{record['each_checkpoint_done_s']} s, {record['length_mismatches']} length mismatches; {path}", flush=True)
    return record


if __name__ == "__main__":
    main()
