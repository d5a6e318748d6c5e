"""`python -m opsd_sweep.evaluate compare` on the GPU: one checkpoint evaluated by the exact vLLM evaluator and by a
candidate setting (default eval.kv_cache_dtype=fp8), with the same per-sample seeds, then compared (issue 39).

    export PYTHONPATH=/tmp/site:$PWD/src NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
    python3 -m opsd_sweep.gpu_check --work /tmp/gc                              # the world and a checkpoint
    python3 -m benchmarks.compare_on_gpu --work /tmp/gc --out /tmp/res/compare   # GPU only

It runs docs/evaluator.md's three commands as a user would (the standalone evaluator twice, each in its own group, then
compare) on gpu_check's random world and its seed-1 final checkpoint; `--world` replaces both (e.g. `--world
profile=tiny --backend hf --candidate eval.hf_cache=static` on a CPU). Random weights score 0 on every problem, so
the verdict says only that the path runs; what the record adds is how far the candidate moves the sampled tokens:
the share of samples whose completion text is identical under both settings (same seeds, so any difference is the
setting's). Writes OUT/compare_on_gpu.json, with the compare record and both evaluations' metrics.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from opsd_sweep import random_world


def evaluate(overrides: list[str], log: Path) -> float:
    """Run the standalone evaluator with these overrides, its output to `log`; return its wall seconds."""
    started = time.monotonic()
    with open(log, "w") as handle:
        done = subprocess.run([sys.executable, "-m", "opsd_sweep.evaluate", *overrides], stdout=handle,
                              stderr=subprocess.STDOUT)
    if done.returncode != 0:
        raise SystemExit(f"compare_on_gpu: the evaluation exited {done.returncode}; see {log}")
    return round(time.monotonic() - started, 1)


def identical_completions(a: Path, b: Path) -> tuple[int, int]:
    """(samples whose text is the same under both, samples) from two completions.jsonl of the same plan."""
    def texts(path: Path) -> dict:
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        return {(row["id"], row["sample"]): row["text"] for row in rows}
    first, second = texts(a), texts(b)
    if first.keys() != second.keys():
        raise SystemExit(f"compare_on_gpu: {a} and {b} hold different samples")
    return sum(first[k] == second[k] for k in first), len(first)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, required=True, help="gpu_check's --work (its world and results)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--candidate", nargs="+", default=["eval.kv_cache_dtype=fp8"],
                        help="the overrides that make evaluator B (default: eval.kv_cache_dtype=fp8)")
    parser.add_argument("--world", nargs="+", default=None,
                        help="overrides naming the model and problems (default: gpu_check's world and checkpoint)")
    parser.add_argument("--backend", default="vllm", choices=["vllm", "hf"])
    parser.add_argument("--n-samples", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=1024)
    args = parser.parse_args(argv)
    work, out = args.work.absolute(), args.out.absolute()
    out.mkdir(parents=True, exist_ok=True)
    world = args.world or gpu_check_world(work)
    results = work / "compare"
    common = [*world, f"eval.backend={args.backend}", f"eval.n_samples={args.n_samples}",
              f"eval.max_new_tokens={args.max_new_tokens}", "seed=1", f"results_root={results}", "force=true"]
    seconds = {"exact": evaluate([*common, "group=exact"], out / "exact.log"),
               "candidate": evaluate([*common, "group=candidate", *args.candidate], out / "candidate.log")}
    (a,), (b,) = (list((results / group).glob("eval-*")) for group in ("exact", "candidate"))
    with open(out / "compare.log", "w") as handle:
        done = subprocess.run([sys.executable, "-m", "opsd_sweep.evaluate", "compare", str(a), str(b)],
                              stdout=handle, stderr=subprocess.STDOUT)
    print((out / "compare.log").read_text(), end="")
    if done.returncode != 0:
        raise SystemExit(f"compare_on_gpu: compare exited {done.returncode}; see {out / 'compare.log'}")
    same, samples = identical_completions(a / "eval" / "completions.jsonl", b / "eval" / "completions.jsonl")
    metrics = {name: json.loads((d / "eval" / "eval.json").read_text())["metrics"] for name, d in
               (("exact", a), ("candidate", b))}
    report = {"gpu": _gpu_name(), "world": world, "backend": args.backend, "candidate": args.candidate,
              "n_samples": args.n_samples, "max_new_tokens": args.max_new_tokens, "wall_s": seconds,
              "identical_completions": same, "samples": samples, "metrics": metrics,
              "compare": json.loads(next((b / "eval").glob("compare_exact_*.json")).read_text())}
    (out / "compare_on_gpu.json").write_text(json.dumps(report, indent=1))
    print(f"[compare_on_gpu] {same} of {samples} completions identical under {' '.join(args.candidate)}; "
          f"{out / 'compare_on_gpu.json'}")
    return report


def gpu_check_world(work: Path) -> list[str]:
    """The overrides that evaluate gpu_check's seed-1 final checkpoint on its random world."""
    checkpoints = sorted((work / "results" / "gpu-check").glob("*-s1-*/checkpoint-*"))
    if not checkpoints:
        raise SystemExit(f"compare_on_gpu: no checkpoint under {work / 'results' / 'gpu-check'}; run "
                         f"python3 -m opsd_sweep.gpu_check --work {work} first, or name a world with --world")
    return [*random_world.cli_overrides(work / "world"), f"eval.checkpoint={checkpoints[-1]}"]


def _gpu_name() -> str:
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"


if __name__ == "__main__":
    main()
