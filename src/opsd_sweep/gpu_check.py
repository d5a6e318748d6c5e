"""`make gpu-check` / `python -m opsd_sweep.gpu_check`: the product's main job on this GPU box, end to end.

Offline. First one micro-batch of the OPSD step on the GPU against the same on the CPU (fp32;
train/step_parity.py), which takes seconds. Then it builds a random-init world of the Qwen3-1.7B
shape (or takes real weights with --model PATH), runs a 2-seed sweep through `python -m opsd_sweep
-m` with the default backends (auto: vllm here when it is installed), then `status` and `summary`,
and checks what a user relies on: both runs done, one metrics line per step, a complete eval.json
per run, the summary written. Prints per-phase seconds,
the steady step and each cycle's fixed cost (everything that is not steady steps or generating the
evaluation's tokens: process starts, loading, engine start, compiles, checkpoints, grading). The
second cycle must train in the first one's phase worker, on its kept student and rollout engine (the
evaluation's own engine runs beside the worker, not in place of it). Writes OUT/gpu_check.json.

    make gpu-check                       # = python -m opsd_sweep.gpu_check --work .cache/opsd_sweep/gpu_check
    python -m opsd_sweep.gpu_check --model /models/Qwen3-1.7B --steps 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

from opsd_sweep import random_world
from opsd_sweep.cycle import phase_starts
from opsd_sweep.evaluate.merge_check import CHECK_FILE
from opsd_sweep.run.rundir import RunDir, read_json_or_none
from opsd_sweep.train.step_parity import TOLERANCE, check_step_parity


class CheckFailed(AssertionError):
    """What the GPU check found wrong, in words."""


def sweep_args(world: Path, model: str | None, steps: int, eval_tokens: int, eval_samples: int, seeds: str,
               results: Path, group: str) -> list[str]:
    """The 1-GPU recipe batch (8 x 4 = 32 prompts per step) on the world, short runs, default backends."""
    data = random_world.cli_overrides(world)
    if model is not None:
        data = [f"model.path={model}", f"model.name={Path(model).name}", *data[2:]]
    return ["-m", *data, "train.num_gpus=1", "train.per_device_batch_size=8", "train.grad_accum_steps=4",
            "train.global_batch_size=32", f"train.max_steps={steps}", f"train.save_steps={steps}",
            f"eval.n_samples={eval_samples}", f"eval.max_new_tokens={eval_tokens}", f"seed={seeds}",
            f"results_root={results}", f"group={group}", "force=true"]


def run(command: list[str], log: Path, env: dict) -> float:
    """Run a command, its output teed to `log`; return its wall seconds. Raise when it fails."""
    started = time.monotonic()
    with open(log, "w") as handle:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        for line in proc.stdout:
            handle.write(line)
            print(line, end="", flush=True)
    if proc.wait() != 0:
        raise CheckFailed(f"`{' '.join(command[:4])} ...` exited with {proc.returncode}; see {log}")
    return time.monotonic() - started


def checked_cycle(run_dir: Path, steps: int) -> tuple[dict, list[dict], dict]:
    """A finished cycle's status, metrics lines and eval.json, read raw: a repeated or missing step line,
    which the summary's reader would smooth over, fails the check."""
    rd = RunDir(run_dir)
    status = rd.read_status()
    if status.get("state") != "done":
        raise CheckFailed(f"{run_dir.name}: state {status.get('state')!r}, error {status.get('error')}")
    lines = [json.loads(line) for line in rd.metrics.read_text().splitlines()]
    if [line["step"] for line in lines] != list(range(1, steps + 1)):
        raise CheckFailed(f"{run_dir.name}: metrics.jsonl steps {[line['step'] for line in lines]}, "
                          f"expected one line per step 1..{steps}")
    for line in lines:  # the phases are disjoint spans of the step (train/timing.py): more than the step is a bad clock
        parts = sum(step_parts(line).values())
        if parts > 1.05 * line["step_seconds"] + 0.05:
            raise CheckFailed(f"{run_dir.name}: step {line['step']}'s phases add up to {parts:.2f} s, more than the "
                              f"step's {line['step_seconds']:.2f} s")
    evaluation = rd.read_eval()
    if evaluation is None:
        raise CheckFailed(f"{run_dir.name}: {rd.eval_json} does not read back whole")
    return status, lines, evaluation


def cycle_figures(run_dir: Path, steps: int, eval_samples: int, n_eval: int) -> dict:
    """Check one run dir and return its timings."""
    status, lines, evaluation = checked_cycle(run_dir, steps)
    samples = sum(len(p["samples"]) for p in evaluation["problems"])
    if evaluation["n_problems"] != n_eval or samples != n_eval * eval_samples or "avg_at_n" not in evaluation["metrics"]:
        raise CheckFailed(f"{run_dir.name}: eval.json has {evaluation['n_problems']} problems and {samples} samples, "
                          f"expected {n_eval} x {eval_samples}")
    check = read_json_or_none(run_dir / "eval" / CHECK_FILE)
    if evaluation["backend"] == "vllm" and lines[-1].get("rollout_backend") == "vllm" and not isinstance(check, dict):
        raise CheckFailed(f"{run_dir.name}: no {CHECK_FILE}: the merge check did not run at the end of training")
    step_seconds = [line["step_seconds"] for line in lines]
    steady = statistics.median(step_seconds[1:]) if len(step_seconds) > 1 else step_seconds[0]
    phases = status["phase_seconds"]
    timing = evaluation["timing"]
    cycle = sum(phases.values())
    last = lines[-1]
    return {"run": run_dir.name, "phase_seconds": phases, "cycle_seconds": round(cycle, 1),
            "rollout_backend": last.get("rollout_backend"), "eval_backend": evaluation["backend"],
            "eval_engine": timing.get("engine"), "eval_serving": evaluation["evaluator"]["serving"],
            "merge_check": check, "first_step_s": round(step_seconds[0], 1),
            "steady_step_s": round(steady, 2),
            "first_step_parts_s": step_parts(lines[0]), "steady_step_parts_s": step_parts(last),
            "eval_generation_s": timing["generation_seconds"], "eval_grading_s": timing["grading_seconds"],
            "fixed_cost_s": round(cycle - steps * steady - timing["generation_seconds"], 1),
            "trainer_peak_gb": last.get("peak_mem_gb"), "engine_gb": last.get("engine_mem_gb"),
            "train_worker": phase_starts(RunDir(run_dir).log("train"), "train")[-1]}


def check_kept_worker(cycles: list[dict]) -> None:
    """The second cycle trains in the first one's phase worker: a new worker builds and compiles the student
    and starts the rollout engine again (145 s of an H100 cycle, 2026-12-06)."""
    cold_worker, warm_worker = (c["train_worker"] for c in cycles)
    if cold_worker is None or warm_worker != cold_worker:
        where = f"phase worker {warm_worker}" if warm_worker else "a process of its own"
        raise CheckFailed(f"the second cycle trained in {where}, not in the first cycle's phase worker {cold_worker}: "
                          "it built its student and rollout engine again")


def step_parts(line: dict) -> dict:
    """A metrics line's time per part of the step (rollout, teacher, ...), in seconds."""
    return {k.removeprefix("time_"): round(v, 3) for k, v in line.items() if k.startswith("time_")}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m opsd_sweep.gpu_check", description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path(".cache/opsd_sweep/gpu_check"), help="world + results")
    parser.add_argument("--model", default=None, help="real weights (a model dir) instead of the random-init world")
    parser.add_argument("--steps", type=int, default=3, help="OPSD steps per cycle (step 1 includes the compiles)")
    parser.add_argument("--eval-samples", type=int, default=2)
    parser.add_argument("--eval-tokens", type=int, default=1024)
    parser.add_argument("--out", type=Path, default=None, help="folder for gpu_check.json (default: --work)")
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("gpu-check needs a CUDA GPU (torch.cuda.is_available() is False); on CPU run make test")
    parity = check_step_parity("cuda")
    if parity.problems:
        raise CheckFailed("one micro-batch of the OPSD step on the GPU differs from the CPU's: " + "; ".join(parity.problems))
    torch.cuda.empty_cache()  # the sweep's engines size themselves by the free memory
    print(f"[gpu-check] step parity: loss {parity.loss_rel_diff:.1e}, LoRA gradients {parity.worst_grad_rel_diff:.1e} "
          f"(relative, fp32, tolerance {TOLERANCE:g}) against the CPU", flush=True)
    work = args.work.absolute()
    world = random_world.build(work / "world")
    results, out = work / "results", (args.out or work)
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1", NCCL_NVLS_ENABLE="0")
    n_eval = len((world / "eval.jsonl").read_text().splitlines())
    started = time.monotonic()
    sweep_s = run([sys.executable, "-m", "opsd_sweep",
                   *sweep_args(world, args.model, args.steps, args.eval_tokens, args.eval_samples, "1,2", results,
                               "gpu-check")], out / "gpu_check_sweep.log", env)
    run([sys.executable, "-m", "opsd_sweep.status", str(results)], out / "gpu_check_status.log", env)
    run([sys.executable, "-m", "opsd_sweep.summary", str(results / "gpu-check"), "--anchor", "none"],
        out / "gpu_check_summary.log", env)
    for name in ("summary.csv", "summary.md", "runs.csv"):
        if not (results / "gpu-check" / name).exists():
            raise CheckFailed(f"the summary did not write {results / 'gpu-check' / name}")
    runs = sorted((results / "gpu-check").glob("*-s[12]-*"), key=lambda p: p.name.rsplit("-", 2)[1])
    if len(runs) != 2:
        raise CheckFailed(f"expected 2 run dirs under {results / 'gpu-check'}, found {[p.name for p in runs]}")
    cycles = [cycle_figures(r, args.steps, args.eval_samples, n_eval) for r in runs]
    report = {"gpu": torch.cuda.get_device_name(0), "steps": args.steps, "eval": f"{n_eval} x {args.eval_samples} "
              f"x {args.eval_tokens} tokens", "sweep_wall_s": round(sweep_s, 1),
              "total_wall_s": round(time.monotonic() - started, 1), "step_parity": asdict(parity), "cycles": cycles}
    (out / "gpu_check.json").write_text(json.dumps(report, indent=1))
    for label, c in zip(("cold", "warm"), cycles):
        print(f"[gpu-check] {label} cycle {c['run']}: {c['phase_seconds']} | rollout {c['rollout_backend']}, eval "
              f"{c['eval_backend']} ({c['eval_engine']}, {c['eval_serving']}) | step 1 {c['first_step_s']} s {c['first_step_parts_s']}, steady {c['steady_step_s']} s "
              f"{c['steady_step_parts_s']} | eval generation {c['eval_generation_s']} s | fixed cost "
              f"{c['fixed_cost_s']} s | phase worker {c['train_worker']} | trainer peak {c['trainer_peak_gb']} GB, engine {c['engine_gb']} GB", flush=True)
    for c in cycles:
        if c["merge_check"]:
            m = c["merge_check"]
            print(f"[gpu-check] merge check {c['run']}: mean |Δ log p| {m['mean_abs_diff']} (max {m['max_abs_diff']}, "
                  f"adapter effect {m['adapter_mean_abs_effect']}) over {m['positions']} positions, tolerance "
                  f"{m['tolerance']}: {'passed' if m['passed'] else 'FAILED (served as a LoRARequest)'}", flush=True)
    check_kept_worker(cycles)
    print(f"[gpu-check] PASSED: 2 cycles done in {report['sweep_wall_s']} s; {out / 'gpu_check.json'}", flush=True)
    return report


if __name__ == "__main__":
    try:
        main()
    except CheckFailed as err:
        sys.exit(f"[gpu-check] FAILED: {err}")
