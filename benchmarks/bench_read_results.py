"""What reading a results root costs per run, against the raw read of the same files.

    .venv/bin/python -m benchmarks.bench_read_results --runs 300 [--record] [--profile]

Builds N hand-built run dirs under a temp dir, as a sweep writes them (src/opsd_sweep/testing/rundirs.py's
write_run: config.yaml, status.json, train/metrics.jsonl, eval/eval.json; plus identity.json, which a
cycle records with RunDir.write_identity), learning rate and seed varied so there are several configs.
Then, in one process, it times per run:
  (a) raw     the raw read of every run dir's files: config.yaml with yaml.CSafeLoader, status.json,
              identity.json and eval.json with json, metrics.jsonl line by line with json (the dirs are
              listed beforehand: no discovery);
  (b) collect summarize.collect.collect([root]): the summary's whole scan (discovery, RunRecord, tables);
  (c) status  the status table's rows: status.run_row over status.find_runs(root);
  (d) record  run.record.RunRecord.read + .counts + .inputs + .collapse of every run dir alone.
Each part is warmed up once (first imports, lru caches), then timed 3 times (time.perf_counter); the
median is reported in ms per run with its ratio to (a). The target (issue: reading a results root costs
<= 10x the raw read) is judged on (b). The files are read from the page cache in every part (just written).

--record writes benchmarks/measured/read_results_<date>.json; --profile prints cProfile's top 15 (by
cumulative time) of one collect() call, in ms per run, and adds them to the record.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]

TARGET_RATIO = 10.0
LEARNING_RATES = (1e-6, 2e-6, 5e-6, 1e-5, 2e-5)
PARTS = {
    "raw": "(a) raw read: CSafeLoader + json",
    "collect": "(b) collect([root]): the summary's scan",
    "status": "(c) status rows: run_row over find_runs",
    "record": "(d) RunRecord.read + counts/inputs/collapse",
}


# --- the run dirs --------------------------------------------------------------------------------

def build_runs(root: Path, n_runs: int, n_problems: int, n_samples: int, steps: int) -> list[Path]:
    """N complete run dirs under root/sweep (learning rates x seeds), each with identity.json."""
    from opsd_sweep.run.keys import input_identities
    from opsd_sweep.run.rundir import read_json
    from opsd_sweep.testing.rundirs import base_run, draw_correct, write_run

    inputs = input_identities(base_run())  # learning rate and seed change no input
    difficulty = np.linspace(-2.5, 2.5, n_problems)
    paths = []
    for i in range(n_runs):
        lr, seed = LEARNING_RATES[i % len(LEARNING_RATES)], 1 + i // len(LEARNING_RATES)
        rng = np.random.default_rng(i)
        shift = 0.3 * np.log10(lr / 1e-5)
        run_dir = write_run(root / "sweep", learning_rate=lr, seed=seed, rng=rng, steps=steps,
                            correct=draw_correct(rng, difficulty, shift, n_samples))
        run_dir.write_identity(read_json(run_dir.status)["key"], inputs)
        paths.append(run_dir.path)
    return paths


# --- the parts timed -----------------------------------------------------------------------------

def raw_read(run_dirs: list[Path]) -> int:
    """Every file of every run dir parsed, nothing more; returns a count so nothing is optimised away."""
    n = 0
    for path in run_dirs:
        config = yaml.load((path / "config.yaml").read_text(), Loader=yaml.CSafeLoader)
        status = json.loads((path / "status.json").read_text())
        identity = json.loads((path / "identity.json").read_text())
        evaluation = json.loads((path / "eval" / "eval.json").read_text())
        steps = [json.loads(line) for line in (path / "train" / "metrics.jsonl").read_text().splitlines()]
        n += len(config) + len(status) + len(identity) + len(evaluation) + len(steps)
    return n


def collect_root(root: Path):
    from opsd_sweep.summarize.collect import collect

    return collect([str(root)])


def status_rows(root: Path) -> list:
    from opsd_sweep import status

    return [status.run_row(run_dir, root) for run_dir in status.find_runs(root)]


def records(root: Path) -> int:
    from opsd_sweep.run.record import RunRecord
    from opsd_sweep.run.rundir import find_run_dirs

    counted = 0
    for run_dir in find_run_dirs([root]):
        record = RunRecord.read(run_dir)
        counted += bool(record.counts)
        _ = record.inputs, record.collapse
    return counted


def time_parts(root: Path, run_dirs: list[Path], repeats: int) -> tuple[dict, dict]:
    """({part: [seconds of each repetition]}, {part: error message} for a part that raised)."""
    calls = {"raw": lambda: raw_read(run_dirs), "collect": lambda: collect_root(root),
             "status": lambda: status_rows(root), "record": lambda: records(root)}
    errors: dict[str, str] = {}
    for part, call in calls.items():  # warm-up: first imports, caches
        try:
            call()
        except Exception as err:  # a part whose API moved under it is reported, not fatal to the others
            errors[part] = f"{type(err).__name__}: {err}"[:300]
    seconds: dict[str, list[float]] = {part: [] for part in calls if part not in errors}
    for _ in range(repeats):  # interleaved, so a slow moment of the machine hits every part alike
        for part in seconds:
            start = time.perf_counter()
            calls[part]()
            seconds[part].append(time.perf_counter() - start)
    return seconds, errors


def profile_collect(root: Path, n_runs: int, top: int = 15) -> tuple[str, list[dict]]:
    """cProfile of one collect() call: pstats' top `top` by cumulative time, and the same rows in ms per run."""
    profiler = cProfile.Profile()
    profiler.enable()
    collect_root(root)
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out).sort_stats("cumulative")
    stats.print_stats(top)
    rows = []
    for (file, line, function), (_, calls, tottime, cumtime, _) in sorted(
            stats.stats.items(), key=lambda item: -item[1][3])[:top]:
        try:
            file = str(Path(file).resolve().relative_to(REPO))
        except ValueError:
            pass
        rows.append({"function": f"{file}:{line}:{function}", "calls": calls,
                     "cumulative_ms_per_run": round(1e3 * cumtime / n_runs, 3),
                     "own_ms_per_run": round(1e3 * tottime / n_runs, 3)})
    return out.getvalue(), rows


# --- report --------------------------------------------------------------------------------------

def summarize(seconds: dict, errors: dict, n_runs: int) -> dict:
    per_run = {part: 1e3 * statistics.median(s) / n_runs for part, s in seconds.items()}
    raw = per_run.get("raw")
    parts = {}
    for part in PARTS:
        if part in errors:
            parts[part] = {"error": errors[part]}
            continue
        parts[part] = {"ms_per_run": round(per_run[part], 3),
                       "ratio_to_raw": round(per_run[part] / raw, 2) if raw else None,
                       "repetitions_s": [round(s, 4) for s in seconds[part]]}
    return parts


def table(parts: dict, n_runs: int, sizes: str, repeats: int) -> str:
    lines = [f"reading a results root of {n_runs} hand-built runs ({sizes}); median of {repeats}, ms per run",
             f"{'part':<46} {'ms/run':>9} {'x raw':>7}"]
    for part, label in PARTS.items():
        if "error" in parts[part]:
            lines.append(f"{label:<46} {'n/a':>9} {'':>7}  ({parts[part]['error']})")
            continue
        ratio = parts[part]["ratio_to_raw"]
        lines.append(f"{label:<46} {parts[part]['ms_per_run']:>9.2f} {ratio:>7.1f}")
    verdict = parts["collect"].get("ratio_to_raw")
    judged = "n/a" if verdict is None else ("PASS" if verdict <= TARGET_RATIO else "FAIL")
    lines.append(f"target: (b) <= {TARGET_RATIO:g}x the raw read: {judged}"
                 + (f" ({verdict:.1f}x)" if verdict is not None else ""))
    return "\n".join(lines)


def machine() -> dict:
    model = None
    try:
        model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                      if line.startswith("model name")), None)
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "cpu_model": model, "platform": platform.platform(),
            "python": platform.python_version(), "pyyaml_libyaml": bool(getattr(yaml, "__with_libyaml__", False))}


def git_commit() -> str | None:
    try:
        done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "src"], cwd=REPO, capture_output=True,
                               text=True)
        return done.stdout.strip() + ("+uncommitted src/ edits" if dirty.stdout.strip() else "")
    except OSError:
        return None


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=300, help="hand-built run dirs (default 300)")
    parser.add_argument("--problems", type=int, default=30, help="eval problems per run (AIME24: 30)")
    parser.add_argument("--samples", type=int, default=12, help="samples per problem (conf/eval/aime24: 12)")
    parser.add_argument("--steps", type=int, default=100, help="metrics.jsonl lines per run (recipe=paper: 100)")
    parser.add_argument("--repeats", type=int, default=3, help="timed repetitions; the median is reported")
    parser.add_argument("--work", type=Path, default=None, help="where to build the runs (default: a temp dir)")
    parser.add_argument("--record", action="store_true", help="write benchmarks/measured/read_results_<date>.json")
    parser.add_argument("--out-dir", type=Path, default=REPO / "benchmarks" / "measured",
                        help="where --record writes (default benchmarks/measured)")
    parser.add_argument("--profile", action="store_true", help="cProfile one collect(): top 15 cumulative")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="bench_read_results.", dir=args.work) as tmp:
        root = Path(tmp) / "results"
        start = time.perf_counter()
        run_dirs = build_runs(root, args.runs, args.problems, args.samples, args.steps)
        build_s = time.perf_counter() - start
        n_bytes = sum(f.stat().st_size for d in run_dirs for f in d.rglob("*") if f.is_file())
        seconds, errors = time_parts(root, run_dirs, args.repeats)
        collection = collect_root(root)
        rows = status_rows(root) if "status" not in errors else []
        profile_text, profile_rows = profile_collect(root, args.runs) if args.profile else ("", [])

    sizes = f"{args.problems} problems x {args.samples} samples, {args.steps} steps"
    parts = summarize(seconds, errors, args.runs)
    print(table(parts, args.runs, sizes, args.repeats))
    if args.profile:
        print(f"\ncProfile of one collect() over {args.runs} runs (top 15 by cumulative time):")
        print(profile_text)
    ratio = parts["collect"].get("ratio_to_raw")
    record = {
        "benchmark": "bench_read_results",
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(["python3", "-m", "benchmarks.bench_read_results", *(argv if argv is not None
                                                                             else sys.argv[1:])]),
        "commit": git_commit(),
        "machine": machine(),
        "runs": args.runs,
        "run_dir": {"problems": args.problems, "samples": args.samples, "steps": args.steps,
                    "learning_rates": list(LEARNING_RATES), "files": ["config.yaml", "status.json",
                    "identity.json", "train/metrics.jsonl", "eval/eval.json"],
                    "kib_per_run": round(n_bytes / 1024 / args.runs, 1)},
        "build_s": round(build_s, 2),
        "repeats": args.repeats,
        "statistic": "median of the repetitions after one warm-up, ms per run",
        "parts": parts,
        "target": {"part": "collect", "max_ratio_to_raw": TARGET_RATIO, "ratio": ratio,
                   "pass": None if ratio is None else ratio <= TARGET_RATIO},
        "tables": {"runs": len(collection.runs), "runs_columns": len(collection.runs.columns),
                   "counted": int(collection.runs["counts"].sum()) if "counts" in collection.runs else None,
                   "samples": len(collection.samples), "skipped": len(collection.skipped),
                   "labels": sorted(set(collection.runs["label"])) if "label" in collection.runs else [],
                   "status_rows": len(rows)},
    }
    if profile_rows:
        record["profile_collect_top15"] = profile_rows
    if args.record:
        args.out_dir.mkdir(parents=True, exist_ok=True)
        out = args.out_dir / f"read_results_{record['date']}.json"
        out.write_text(json.dumps(record, indent=2) + "\n")
        print(f"\nrecord: {out}")
        record["path"] = str(out)
    return record


if __name__ == "__main__":
    main()
