"""Where the steady training step's time goes on this GPU: one cycle of `make gpu-check`'s configuration (the 1-GPU
recipe batch, 8 x 4 = 32 rollouts of 1,024 tokens) whose last step runs under torch.profiler (train.profile_step).

    PYTHONPATH=/tmp/site:$PWD/src python -m benchmarks.profile_step --work /tmp/gc --out $OUT/step_profile

Takes the world gpu-check built under --work (or builds one), runs the cycle there (seed 3, its eval cut to one
sample of 16 tokens), and copies out the profiled step's kernel table, with the GPU's busy share of the step, and
every step's metrics line (the steps before it are the unprofiled baseline: the profiler slows what it watches).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from opsd_sweep import random_world
from opsd_sweep.gpu_check import step_parts, sweep_args


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True, help="gpu-check's --work (its world is reused)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=4, help="steps of the cycle; the last one is profiled")
    args = parser.parse_args(argv)
    work, out = args.work.absolute(), args.out.absolute()
    out.mkdir(parents=True, exist_ok=True)
    world = work / "world" if (work / "world" / "eval.jsonl").exists() else random_world.build(work / "world")
    results = work / "profile_results"
    command = [sys.executable, "-m", "opsd_sweep",
               *sweep_args(world, None, args.steps, 16, 1, "3", results, "profile"),
               f"train.profile_step={args.steps}"]
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1", NCCL_NVLS_ENABLE="0")
    with open(out / "profile_sweep.log", "w") as log:
        code = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=env).returncode
    (run_dir,) = (results / "profile").glob("*-s3-*")
    table = run_dir / "train" / f"profile_step{args.steps}.txt"
    shutil.copy(run_dir / "metrics.jsonl", out / "metrics.jsonl")
    if table.exists():
        shutil.copy(table, out / table.name)
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    for line in lines:
        print(f"step {line['step']}{' (profiled)' if line.get('profiled') else ''}: {line['step_seconds']:.2f} s "
              f"{step_parts(line)}")
    print(table.read_text() if table.exists() else f"no {table.name}: the sweep exited {code}, see profile_sweep.log")


if __name__ == "__main__":
    main()
