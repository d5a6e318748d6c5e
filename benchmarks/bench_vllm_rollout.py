"""The trainer's vllm rollout backend for real: a colocated engine, a few OPSD steps, and proof that
the engine samples from the weights the trainer just produced.

    PYTHONPATH=/tmp/site:$PWD/src python -m benchmarks.bench_vllm_rollout --work /tmp/vroll --out $OUT

On one GPU, with a randomly initialised Qwen3-1.7B-shaped model (built under --work, as
bench_train.py builds it), the paper recipe's rollout and loss settings, rollout.backend=vllm and
rollout.vllm_sleep=true: the trainer (OPSDTrainer, in this process) starts its engine, then for each
optimizer step we score one fixed token sequence three ways: the engine's prompt log-probabilities
(served adapter), the trained PEFT model's (adapter on) and the base model's (adapter off). The
weight push works when the engine's values move with the student's and stay within bf16 noise of
them. Prints and writes vllm_rollout.json: the per-step breakdown and those distances.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import torch

from benchmarks.bench_train import RECIPE, build_model, write_world
from opsd_sweep.testing.run_config import composed_run_config
from opsd_sweep.run.rundir import RunDir
from opsd_sweep.train.trainer import OPSDTrainer


def make_run(world: Path, work: Path, steps: int, learning_rate: float):
    s = RECIPE
    overrides = ["hydra/launcher=basic", f"model.path={world / 'model'}", "model.name=random-qwen3-shape",
                 "data=local", f"data.path={world / 'train.jsonl'}", f"results_root={work}", "train.num_gpus=1",
                 f"train.per_device_batch_size={s.batch}", "train.grad_accum_steps=2",
                 f"train.global_batch_size={2 * s.batch}", f"train.max_steps={steps}", f"train.save_steps={steps}",
                 f"learning_rate={learning_rate}", "rollout.backend=vllm", "rollout.vllm_sleep=true",
                 f"rollout.max_new_tokens={s.completion}"]
    return composed_run_config(overrides)


def engine_logprobs(rollout, ids: list[int]) -> torch.Tensor:
    """log p(ids[i] | ids[:i]) for i >= 1 under the engine's current adapter (raw logits, temperature 1)."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    if not rollout.awake:
        rollout.llm.wake_up()
        rollout.awake = True
    params = SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=1.0, detokenize=False)
    (out,) = rollout.llm.generate([TokensPrompt(prompt_token_ids=ids)], params, lora_request=rollout.lora_request,
                                  use_tqdm=False)
    return torch.tensor([out.prompt_logprobs[i][ids[i]].logprob for i in range(1, len(ids))])


def hf_logprobs(peft_model, ids: list[int], adapter: bool) -> torch.Tensor:
    was_training = peft_model.training
    peft_model.eval()  # no LoRA dropout: the engine has none
    tokens = torch.tensor([ids], device=peft_model.device)
    with torch.no_grad():
        if adapter:
            logits = peft_model(input_ids=tokens).logits
        else:
            with peft_model.disable_adapter():
                logits = peft_model(input_ids=tokens).logits
    peft_model.train(was_training)
    logp = logits[0, :-1].float().log_softmax(-1)
    return logp.gather(-1, tokens[0, 1:, None]).squeeze(-1).cpu()


def probe(trainer: OPSDTrainer, ids: list[int]) -> dict[str, torch.Tensor]:
    return {"engine": engine_logprobs(trainer.rollout, ids), "student": hf_logprobs(trainer.peft_model, ids, True),
            "base": hf_logprobs(trainer.peft_model, ids, False)}


def mean_abs(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().mean().item()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--learning-rate", type=float, default=1e-3,
                        help="large on purpose: the student must move well beyond bf16 noise in a few steps")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    world = args.work / "world"
    if not (world / "train.jsonl").exists():
        write_world(RECIPE, build_model(RECIPE, torch.device("cuda"), torch.bfloat16), world)
        torch.cuda.empty_cache()
    run = make_run(world, args.work, args.steps, args.learning_rate)
    run_dir = RunDir(args.work / "vllm_run")
    run_dir.train_dir.mkdir(parents=True, exist_ok=True)
    report: dict = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "torch": torch.__version__, "steps": [],
                    "probe": []}

    def save():
        (args.out / "vllm_rollout.json").write_text(json.dumps(report, indent=2))

    started = time.perf_counter()
    trainer = OPSDTrainer(run, run_dir)
    trainer.setup()  # loads the model, starts the engine, pushes the step-0 adapter
    report["setup_s"] = time.perf_counter() - started
    import vllm

    report["vllm"] = vllm.__version__
    print(f"setup (engine start included) {report['setup_s']:.1f} s, vllm {vllm.__version__}", flush=True)
    rng = random.Random(3)
    ids = [rng.randrange(3, 1000) for _ in range(64)]  # in the tokenizer's range, as real text would be
    before = probe(trainer, ids)

    def record(step: int, now: dict, previous: dict) -> None:
        row = {"step": step, "engine_vs_student": mean_abs(now["engine"], now["student"]),
               "engine_vs_base": mean_abs(now["engine"], now["base"]),
               "engine_moved_since_start": mean_abs(now["engine"], previous["engine"]),
               "student_moved_since_start": mean_abs(now["student"], previous["student"])}
        report["probe"].append(row)
        print("  probe", {k: round(v, 5) if isinstance(v, float) else v for k, v in row.items()}, flush=True)
        save()

    record(0, before, before)
    trainer.model.train()
    for _ in range(args.steps):
        line = trainer.train_step()  # rollout (wake, generate, sleep) ... optimizer, adapter pushed
        report["steps"].append(line)
        print(f"step {line['step']}: {line['step_seconds']:.2f} s, " + ", ".join(
            f"{k[5:]} {line[k]:.2f}" for k in line if k.startswith("time_")), flush=True)
        now = probe(trainer, ids)
        record(line["step"], now, before)
    last = report["probe"][-1]
    report["weight_push_works"] = (last["engine_vs_student"] < 0.25 * last["student_moved_since_start"]
                                   and last["engine_vs_student"] < last["engine_vs_base"])
    print(f"weight push works: {report['weight_push_works']}", flush=True)
    save()
    trainer.cleanup()


if __name__ == "__main__":
    main()
