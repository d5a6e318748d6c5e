"""Where the eval's decode step goes at a 96-request part's batch: the fixed part a step pays above its KV reads.

    PYTHONPATH=/tmp/site:$PWD/src python -m benchmarks.profile_eval_step --work /tmp/gc --out $OUT/eval_profile

The 96-request parts at the published lengths run at 1.25x their KV-read floor at best (merged weights, an engine
of its own at 0.9, H100 2026-12-05): ~3.7 ms a step does not scale with the KV read, 1.13 ms of it reading the
weights. This starts the evaluator's own engine as a cycle's eval phase does (the world gpu-check built under
--work, the base model: merged weights' shapes and speed), decodes 96 requests of --tokens each with the eval's
sampling, twice: with the evaluator's per-sample seeds, and unseeded (vLLM then takes FlashInfer's sampler). In
each round it times every engine step and runs --profile-steps of them under vLLM's torch profiler, then reads the
trace: GPU kernel time a step by kind (attention, GEMMs, sampling, the rest) and the GPU's idle time between them,
the host's share. Writes eval_step_profile.json and the profiler's traces. ~3 min, PROJECTED: written on
2026-12-06 when no device was lent, so not yet run on a GPU (its trace reading is tested on CPU).
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import statistics
import time
from pathlib import Path

from opsd_sweep import random_world
from opsd_sweep.costs import length_model

# kernel names by kind, first match wins (flash-attention's, cuBLAS / CUTLASS / nvjet GEMMs, the samplers' kernels:
# vLLM's V2 runner applies temperature, the logit bias of min_tokens, top-p and its seeded Gumbel draw as Triton kernels)
KINDS = (("attention", re.compile(r"flash|fwd_kernel|attn|paged", re.I)),
         ("gemm", re.compile(r"gemm|nvjet|cutlass|sm90_xmma|splitk", re.I)),
         ("sampling", re.compile(r"top_?k|top_?p|gumbel|sampl|exponential|argmax|softmax|sort|cumsum|temperature|bias_kernel|min_p|penalt", re.I)))


def kind_of(name: str) -> str:
    return next((kind for kind, pattern in KINDS if pattern.search(name)), "other")


def read_trace(path: Path) -> list[dict]:
    """The GPU kernels of a chrome trace written by torch.profiler (gzipped or not)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as handle:
        events = json.load(handle)["traceEvents"]
    return [e for e in events if e.get("cat") == "kernel" and "dur" in e]


def kernel_split(kernels: list[dict], steps: int) -> dict:
    """Per engine step: kernel milliseconds by kind, the GPU's busy time (the union of kernel spans: overlapping
    streams counted once) and the window from the first kernel's start to the last one's end; the top kernels."""
    if not kernels:
        raise ValueError("the trace holds no GPU kernels: the profiler did not see the engine's GPU")
    by_kind: dict[str, float] = {}
    by_name: dict[str, float] = {}
    for k in kernels:
        by_kind[kind_of(k["name"])] = by_kind.get(kind_of(k["name"]), 0.0) + k["dur"]
        by_name[k["name"]] = by_name.get(k["name"], 0.0) + k["dur"]
    spans = sorted((k["ts"], k["ts"] + k["dur"]) for k in kernels)
    busy, end = 0.0, spans[0][0]
    for start, stop in spans:
        busy += max(stop - max(start, end), 0.0)
        end = max(end, stop)
    window = end - spans[0][0]
    per_step = lambda us: round(us / steps / 1000, 3)  # noqa: E731 - microseconds in all -> ms a step
    return {"window_ms_per_step": per_step(window), "gpu_busy_ms_per_step": per_step(busy),
            "gpu_idle_share": round(1 - busy / window, 3) if window else None,
            "kernel_ms_per_step": {kind: per_step(us) for kind, us in sorted(by_kind.items(), key=lambda i: -i[1])},
            "top_kernels_ms_per_step": {name[:90]: per_step(us) for name, us in
                                        sorted(by_name.items(), key=lambda i: -i[1])[:15]}}


def decode_round(engine, spec, prompts, seeded: bool, tokens: int, profile: range, trace_dir: Path,
                 label: str) -> dict:
    """96 requests of `tokens` forced tokens each, every step timed, steps `profile` under the profiler."""
    from opsd_sweep.evaluate.engine import Job
    from opsd_sweep.evaluate.vllm_engine import request_params

    requests = len(prompts)
    for i, prompt in enumerate(prompts):
        params = request_params(spec.sampling, Job(problem=i, sample=0, seed=1000 + i, length=tokens))
        params.seed = params.seed if seeded else None
        engine.add_request(f"{label}:{i}", {"prompt_token_ids": list(prompt)}, params)
    seconds, decoding, before = [], [], set(trace_dir.glob("*.pt.trace.json*"))
    while engine.has_unfinished_requests():
        step = len(seconds)
        if step == profile.start:
            engine.start_profile(profile_prefix=label)
        began = time.perf_counter()
        outputs = engine.step()
        seconds.append(time.perf_counter() - began)
        decoding.append(len(outputs))
        if step == profile.stop - 1:
            engine.stop_profile()
    full = [s for i, s in enumerate(seconds) if decoding[i] == requests and i not in profile and i >= 20]
    timed = {"seeded": seeded, "engine_steps": len(seconds), "steps_at_full_batch": len(full),
             "median_step_ms_unprofiled": round(1000 * statistics.median(full), 3),
             "profiled_steps": f"{profile.start}-{profile.stop - 1}"}
    traces = sorted(set(trace_dir.glob("*.pt.trace.json*")) - before, key=lambda p: p.stat().st_mtime)
    if not traces:  # the step timings still stand: keep them, and say what is missing
        return timed | {"trace": f"none: vLLM's profiler wrote no new trace under {trace_dir}"}
    return timed | {"trace": traces[-1].name, **kernel_split(read_trace(traces[-1]), len(profile))}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/gc"), help="where gpu-check built its world")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--requests", type=int, default=96, help="sequences decoding together (a part's 8 x 12)")
    parser.add_argument("--tokens", type=int, default=768, help="forced tokens a request")
    parser.add_argument("--profile-steps", type=int, default=40, help="steps under the profiler, from step 300")
    args = parser.parse_args(argv)
    if not 320 + args.profile_steps < args.tokens:
        parser.error(f"--tokens {args.tokens}: give more than {320 + args.profile_steps} (steps 300 on are profiled "
                     "while every request still decodes)")
    import torch

    from benchmarks.bench_cycle import composed_run, cycle_eval_setup
    from benchmarks.eval_trace import engine_args_with
    from opsd_sweep.evaluate.vllm_engine import VLLMEngine

    out = args.out.absolute()
    trace_dir = out / "traces"
    trace_dir.mkdir(parents=True, exist_ok=True)
    world = random_world.build(args.work.absolute() / "world")
    spec, prompts, _ = cycle_eval_setup(run=composed_run(world, []), adapter=False, engine_share=0.9)
    prompts = [prompts[i % len(prompts)] for i in range(args.requests)]
    profiler = {"profiler": "torch", "torch_profiler_dir": str(trace_dir), "torch_profiler_with_stack": False}
    device = torch.cuda.get_device_name(0)
    started = time.monotonic()
    with engine_args_with(profiler_config=profiler):
        engine = VLLMEngine._start(spec, False)
    engine_s = time.monotonic() - started
    profile = range(300, 300 + args.profile_steps)
    rounds = [decode_round(engine, spec, prompts, seeded, args.tokens, profile, trace_dir, label)
              for seeded, label in ((True, "seeded"), (False, "unseeded"))]
    # the bytes a decode step reads once: every weight (the tied LM head is stored, and read, once)
    weights = sum(f.stat().st_size for f in Path(spec.model_path).glob("*.safetensors"))
    record = {"date": time.strftime("%Y-%m-%d"), "gpu": device, "command": "python -m benchmarks.profile_eval_step "
              + " ".join(argv or []), "model": spec.model_path, "engine_share": spec.gpu_memory_utilization,
              "engine_start_s": round(engine_s, 1), "requests": args.requests, "tokens": args.tokens,
              "prompt_tokens_mean": round(statistics.fmean(len(p) for p in prompts), 1),
              "sampling": {"temperature": spec.sampling.temperature, "top_p": spec.sampling.top_p,
                           "top_k": spec.sampling.top_k},
              "weights_bytes": weights,
              "weights_read_ms_per_step": round(1000 * weights / length_model.hbm_bytes_per_s(device), 3),
              "rounds": rounds}
    (out / "eval_step_profile.json").write_text(json.dumps(record, indent=1))
    for r in rounds:
        print(f"[eval-profile] {'seeded' if r['seeded'] else 'unseeded'}: median step {r['median_step_ms_unprofiled']} "
              f"ms at {args.requests} sequences; GPU busy {r.get('gpu_busy_ms_per_step')} ms, idle share "
              f"{r.get('gpu_idle_share')}; kernels {r.get('kernel_ms_per_step', r['trace'])}", flush=True)
    print(f"[eval-profile] weights read {record['weights_read_ms_per_step']} ms a step; {out / 'eval_step_profile.json'}")
    return record


if __name__ == "__main__":
    main()
