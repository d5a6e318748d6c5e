"""Where the steady training step's time goes on this GPU: one cycle of `make gpu-check`'s configuration (the 1-GPU
recipe batch, 8 x 4 = 32 rollouts of 1,024 tokens) whose last step runs under torch.profiler (train.profile_step).

    PYTHONPATH=/tmp/site:$PWD/src python -m benchmarks.profile_step --work /tmp/gc --out $OUT/step_profile
    ... --steps 100 --learning-rate 2e-5    # a recipe-length adapter: does it survive the bf16 merge? (~13 min, H100)

Takes the world gpu-check built under --work (or builds one), runs the cycle there (seed 3, its eval cut to one
sample of 16 tokens), and copies out the profiled step's kernel table, with the GPU's busy share of the step, every
step's metrics line (the steps before it are the unprofiled baseline: the profiler slows what it watches) and the
end-of-training merge check of the final adapter (eval/merge_check.json: whether merged weights may serve it).
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
from opsd_sweep.evaluate.merge_check import CHECK_FILE
from opsd_sweep.gpu_check import step_parts, sweep_args
from opsd_sweep.run.rundir import RunDir


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True, help="gpu-check's --work (its world is reused)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=4, help="steps of the cycle; the last one is profiled")
    parser.add_argument("--learning-rate", type=float, default=None, help="default: the recipe's")
    args = parser.parse_args(argv)
    work, out = args.work.absolute(), args.out.absolute()
    out.mkdir(parents=True, exist_ok=True)
    world = work / "world" if (work / "world" / "eval.jsonl").exists() else random_world.build(work / "world")
    results, group = work / "profile_results", f"steps{args.steps}-lr{args.learning_rate or 'recipe'}"
    command = [sys.executable, "-m", "opsd_sweep",
               *sweep_args(world, None, args.steps, 16, 1, "3", results, group),
               f"train.profile_step={args.steps}",
               *([f"learning_rate={args.learning_rate}"] if args.learning_rate is not None else [])]
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1", NCCL_NVLS_ENABLE="0")
    with open(out / "profile_sweep.log", "w") as log:
        code = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=env).returncode
    run_dirs = sorted((results / group).glob("*-s3-*"))
    if not run_dirs:
        raise SystemExit(f"the sweep exited {code} before it made its run dir; see {out / 'profile_sweep.log'}")
    run_dir = run_dirs[-1]
    table = run_dir / "train" / f"profile_step{args.steps}.txt"
    metrics = RunDir(run_dir).metrics
    shutil.copy(metrics, out / "metrics.jsonl")
    for found in (table, run_dir / "eval" / CHECK_FILE):
        if found.exists():
            shutil.copy(found, out / found.name)
    lines = [json.loads(line) for line in metrics.read_text().splitlines()]
    for line in lines:
        print(f"step {line['step']}{' (profiled)' if line.get('profiled') else ''}: {line['step_seconds']:.2f} s "
              f"{step_parts(line)}")
    print(table.read_text() if table.exists() else f"no {table.name}: the sweep exited {code}, see profile_sweep.log")
    if (out / CHECK_FILE).exists():
        print(f"merge check of the final adapter: {(out / CHECK_FILE).read_text()}")


if __name__ == "__main__":
    main()
