"""Packing benchmark: N one-GPU cycles packed on 2 GPUs (local_gpus) vs one after another (Hydra's basic
launcher), wall time of each whole sweep.

    python -m benchmarks.bench_packing --gpus 0,1            # a GPU box; target: packed <= 0.55 x sequential
    python -m benchmarks.bench_packing --gpus 0,1 --cycles 2 --steps 1   # a CPU smoke run (fake GPU ids)

Each cycle is a real tiny-profile cycle (train.num_gpus=1): a small randomly initialised Qwen3 (warm-started
once, before timing), a few OPSD steps, a short evaluation. Both sweeps run the same cycles in separate
groups, so neither finds the other's runs done.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUILD_TINY = """
import sys
from hydra import compose, initialize_config_dir
from opsd_sweep import CONF_DIR
from opsd_sweep.config import load_run_config
from opsd_sweep.tiny import ensure_tiny_assets
with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
    cfg = compose(config_name="config", overrides=["profile=tiny", "cache_dir=" + sys.argv[1]])
ensure_tiny_assets(load_run_config(cfg).tiny)
"""


def sweep(launcher_args: list[str], group: str, args, env: dict) -> float:
    """Wall seconds of one `python -m opsd_sweep -m ...` sweep of the benchmark's cycles."""
    seeds = ",".join(str(s) for s in range(1, args.cycles + 1))
    command = [sys.executable, "-m", "opsd_sweep", "-m", "profile=tiny", "train.num_gpus=1", f"group={group}",
               f"seed={seeds}", f"train.max_steps={args.steps}", f"train.save_steps={args.steps}",
               f"eval.max_problems={args.problems}", "eval.n_samples=2", *launcher_args]
    started = time.monotonic()
    proc = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    seconds = time.monotonic() - started
    if proc.returncode != 0:
        sys.exit(f"{group} sweep failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return seconds


def cycle_seconds(results: Path, group: str) -> list[float]:
    """Train + eval seconds of each cycle of a group, from the run dirs' status.json."""
    statuses = [json.loads(p.read_text()) for p in (results / group).glob("*/status.json")]
    return sorted(round(sum(s["phase_seconds"].values()), 1) for s in statuses if s.get("state") == "done")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", default="0,1", help="the GPU ids to pack onto (the sequential sweep uses the first)")
    parser.add_argument("--cycles", type=int, default=4)
    parser.add_argument("--steps", type=int, default=4, help="OPSD steps per cycle")
    parser.add_argument("--problems", type=int, default=16, help="eval problems per cycle (2 samples each)")
    parser.add_argument("--cache", default=None, help="cache dir holding (or to hold) the tiny world")
    args = parser.parse_args()
    gpus = args.gpus.split(",")
    work = Path(tempfile.mkdtemp(prefix="bench_packing_"))
    cache = Path(args.cache).absolute() if args.cache else work / "cache"
    env = dict(os.environ, OPSD_RESULTS=str(work / "results"), OPSD_CACHE=str(cache), HF_HUB_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false")

    started = time.monotonic()
    subprocess.run([sys.executable, "-c", BUILD_TINY, str(cache)], cwd=REPO, env=env, check=True)
    print(f"tiny world ready in {time.monotonic() - started:.1f}s (not timed below)", flush=True)

    # Hydra's basic launcher runs the cycles one after another, on the first GPU.
    sequential = sweep(["hydra/launcher=basic"], "sequential", args, env | {"CUDA_VISIBLE_DEVICES": gpus[0]})
    print(f"sequential (basic launcher, GPU {gpus[0]}): {sequential:.1f}s", flush=True)
    packed = sweep([f"hydra.launcher.gpus=[{args.gpus}]"], "packed", args, env)
    print(f"packed (local_gpus, GPUs {args.gpus}): {packed:.1f}s", flush=True)

    results = work / "results"
    print(f"\n{args.cycles} one-GPU cycles ({args.steps} steps, eval {args.problems} problems x 2 samples each)")
    print(f"  sequential, basic launcher : {sequential:7.1f} s   cycles {cycle_seconds(results, 'sequential')}")
    print(f"  packed on {len(gpus)} GPUs, local_gpus: {packed:7.1f} s   cycles {cycle_seconds(results, 'packed')}")
    print(f"  packed / sequential        : {packed / sequential:7.3f}   (target <= 0.55)")


if __name__ == "__main__":
    main()
