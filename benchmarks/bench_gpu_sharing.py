"""Can an eval's decode share one GPU with the next cycle's training? (issue 23: overlap the eval)

    python3 -m benchmarks.bench_gpu_sharing --out $OUT [--seconds 20] [--mps]

Two loads, each in its own process, as a training phase and an eval phase of two cycles would be:
  train   compute-bound bf16 GEMMs of the trainer's shape ([8 x 2,524 tokens, 2,048] x [2,048, 6,144]),
  decode  the eval's bandwidth-bound tail, captured in a CUDA graph: 28 layers of a small-batch GEMM plus
          GQA attention of 17 sequences over a 25,000-token KV cache (~49 GB of KV read a step, as the
          AIME24-sized eval's last 17 requests), with a 2 ms host gap a step (the engine's scheduling).
Each runs alone, then both at once. The figure of merit is the sum of their rates relative to alone:
1.0 = the GPU only time-slices them (no gain from overlapping), 2.0 = neither slows the other.
`--mps` starts the CUDA MPS control daemon for the shared run (kernels of both processes then run on the
GPU at the same time instead of taking turns), where the machine allows it. Writes gpu_sharing.json.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import subprocess
import time
from pathlib import Path

LAYERS, HIDDEN, INTERMEDIATE = 28, 2048, 6144
TAIL_SEQS, TAIL_CONTEXT, KV_HEADS, HEADS, HEAD_DIM = 17, 25_000, 8, 16, 128


def train_load(seconds: float, start, out) -> None:
    import torch

    x = torch.randn(8 * 2524, HIDDEN, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(HIDDEN, INTERMEDIATE, device="cuda", dtype=torch.bfloat16)
    w2 = torch.randn(INTERMEDIATE, HIDDEN, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        (x @ w) @ w2
    torch.cuda.synchronize()
    start.wait()
    done, began = 0, time.perf_counter()
    while time.perf_counter() - began < seconds:
        for _ in range(10):
            (x @ w) @ w2
        torch.cuda.synchronize()
        done += 10
    elapsed = time.perf_counter() - began
    flops = done * 2 * 2 * x.shape[0] * HIDDEN * INTERMEDIATE
    out.put(("train", done / elapsed, flops / elapsed / 1e12))


def decode_load(seconds: float, start, out) -> None:
    import torch
    import torch.nn.functional as F

    q = torch.randn(TAIL_SEQS, HEADS, 1, HEAD_DIM, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(TAIL_SEQS, KV_HEADS, TAIL_CONTEXT, HEAD_DIM, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    h = torch.randn(TAIL_SEQS, HIDDEN, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(LAYERS, HIDDEN, 3 * INTERMEDIATE, device="cuda", dtype=torch.bfloat16)

    def step():
        for layer in range(LAYERS):
            F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
            h @ w[layer]

    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        step()  # warm-up (kernel choice) before capture
        torch.cuda.synchronize()
        with torch.cuda.graph(graph):
            step()
    torch.cuda.synchronize()
    start.wait()
    done, began = 0, time.perf_counter()
    while time.perf_counter() - began < seconds:
        graph.replay()
        torch.cuda.synchronize()
        time.sleep(0.002)
        done += 1
    elapsed = time.perf_counter() - began
    kv_bytes = LAYERS * 2 * k.numel() * k.element_size()
    out.put(("decode", done / elapsed, kv_bytes * done / elapsed / 1e12))


def run(loads: list, seconds: float) -> dict:
    ctx = mp.get_context("spawn")
    start, out = ctx.Barrier(len(loads) + 1), ctx.Queue()
    procs = [ctx.Process(target=load, args=(seconds, start, out)) for load in loads]
    for p in procs:
        p.start()
    start.wait()
    results = {}
    for _ in procs:
        name, rate, throughput = out.get()
        results[name] = {"rate_per_s": round(rate, 2), "tflops_or_tb_per_s": round(throughput, 2)}
    for p in procs:
        p.join()
    return results


def start_mps(pipe_dir: Path) -> bool:
    if shutil.which("nvidia-cuda-mps-control") is None:
        return False
    pipe_dir.mkdir(parents=True, exist_ok=True)
    os.environ["CUDA_MPS_PIPE_DIRECTORY"] = str(pipe_dir)
    os.environ["CUDA_MPS_LOG_DIRECTORY"] = str(pipe_dir)
    return subprocess.run(["nvidia-cuda-mps-control", "-d"], capture_output=True).returncode == 0


def stop_mps() -> None:
    subprocess.run(["nvidia-cuda-mps-control"], input=b"quit\n", capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--mps", action="store_true", help="also run both at once under CUDA MPS")
    args = parser.parse_args()
    report = {"train_alone": run([train_load], args.seconds)["train"],
              "decode_alone": run([decode_load], args.seconds)["decode"]}
    modes = ["time-sliced"]
    if args.mps:
        modes.append("mps")
    for mode in modes:
        if mode == "mps" and not start_mps(args.out / "mps"):
            report["mps"] = "not available on this machine"
            break
        both = run([train_load, decode_load], args.seconds)
        if mode == "mps":
            stop_mps()
        both["combined_rate_vs_alone"] = round(both["train"]["rate_per_s"] / report["train_alone"]["rate_per_s"]
                                               + both["decode"]["rate_per_s"] / report["decode_alone"]["rate_per_s"], 3)
        report[f"both_{mode}"] = both
        print(mode, json.dumps(both), flush=True)
    print(json.dumps(report, indent=1))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu_sharing.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
