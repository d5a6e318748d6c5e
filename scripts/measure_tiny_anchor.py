"""Measure the tiny demo's anchor and write it to conf/anchor/tiny.yaml.

The anchor is the untrained base model (the warm-started tiny Qwen3) evaluated by the real evaluator
with the demo's settings (profile=tiny +sweep=demo) under several evaluation seeds: mean, SD and n of
avg@n. Its seeds start at 101, apart from the demo's own seeds, so the anchor is an independent
measurement.

    python scripts/measure_tiny_anchor.py              # 10 evaluation seeds
    python scripts/measure_tiny_anchor.py --seeds 5 --out /tmp/tiny_anchor.yaml
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEMO = ["profile=tiny", "+sweep=demo", "train.max_steps=0"]


def evaluate_base_model(seeds: list[int], results: Path) -> list[float]:
    """avg@n of the base model per evaluation seed, from the evaluator's eval.json files."""
    command = [sys.executable, "-m", "opsd_sweep.evaluate", "-m", *DEMO, f"seed={','.join(map(str, seeds))}",
               f"results_root={results}", "group=anchor"]
    subprocess.run(command, cwd=REPO, check=True)
    scores = [json.loads(path.read_text())["metrics"]["avg_at_n"] for path in sorted(results.glob("anchor/*/eval/eval.json"))]
    if len(scores) != len(seeds):
        raise SystemExit(f"expected {len(seeds)} evaluations under {results}/anchor, found {len(scores)}")
    return scores


def anchor_yaml(scores: list[float], seeds: list[int]) -> str:
    import torch

    mean, sd = statistics.mean(scores), statistics.stdev(scores)
    measured = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    return (
        "# The tiny demo's anchor: the untrained (warm-started) tiny base model, avg@n on the held-out\n"
        "# problems, evaluated with the demo's settings under evaluation seeds "
        f"{seeds[0]}..{seeds[-1]}. Measured, not typed:\n"
        "#   python scripts/measure_tiny_anchor.py\n"
        f"# on {measured}, {platform.machine()} {platform.system()}, torch {torch.__version__}; per-seed scores:\n"
        f"#   {', '.join(f'{s:.2f}' for s in scores)}\n"
        "# Another machine may build a slightly different base model (float rounding in the warm start),\n"
        "# which is why the demo's verdicts use its own in-sweep baseline first.\n"
        "label: tiny base model (no OPSD)\n"
        "metric: avg_at_n\n"
        f"mean: {mean:.2f}\n"
        f"sd: {sd:.2f}\n"
        f"n: {len(scores)}\n"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=10, help="number of evaluation seeds (>= 2)")
    parser.add_argument("--out", type=Path, default=REPO / "conf/anchor/tiny.yaml")
    args = parser.parse_args(argv)
    if args.seeds < 2:
        parser.error(f"--seeds {args.seeds}: an SD needs at least 2 evaluations")
    seeds = list(range(101, 101 + args.seeds))
    with tempfile.TemporaryDirectory(prefix="tiny_anchor_") as results:
        scores = evaluate_base_model(seeds, Path(results))
    text = anchor_yaml(scores, seeds)
    args.out.write_text(text)
    print(text, end="")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
