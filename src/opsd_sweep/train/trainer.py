"""The OPSD training recipe: setup -> train loop -> checkpoints, one JSON line of metrics per step.

Student = base model + LoRA (PEFT), prompted with the problem. Teacher = the same weights with the
adapter disabled (the fixed initial model), prompted with problem + reference solution. Each step:
rollout from the student -> append the same completion ids to both prompts -> teacher forward
(no grad) -> student forward -> generalized-JSD loss over completion tokens -> AdamW.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import torch

from opsd_sweep.config import RunConfig, from_dict
from opsd_sweep.data import load_rows
from opsd_sweep.modeling import load_model, load_tokenizer
from opsd_sweep.prompts import render_prompt_ids
from opsd_sweep.runs import RunDir, atomic_write_json
from opsd_sweep.train.collate import collate, completion_logits
from opsd_sweep.train.loss import opsd_loss
from opsd_sweep.train.rollout import make_rollout


class OPSDTrainer:
    def __init__(self, run: RunConfig, run_dir: RunDir):
        self.run, self.run_dir, self.t = run, run_dir, run.train
        self.step = 0

    # --- setup -----------------------------------------------------------------------------------

    def setup(self) -> None:
        from accelerate import Accelerator
        from accelerate.utils import set_seed

        self.accelerator = Accelerator(cpu=self.t.num_gpus == 0)
        set_seed(self.run.seed + self.accelerator.process_index)
        self.tokenizer = load_tokenizer(self.run.model)
        self.rows = self._setup_data()
        model = self._setup_model()
        self.optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad],
                                           lr=self.run.learning_rate, weight_decay=self.t.weight_decay)
        self.scheduler = self._setup_scheduler()
        self.model, self.optimizer = self.accelerator.prepare(model, self.optimizer)
        self.rollout = make_rollout(self.run.rollout, self.tokenizer, self.accelerator.device)
        self._resume()

    def _setup_data(self) -> list[dict]:
        d = self.run.data
        rows = load_rows(d.path, d.split, {"problem": d.problem_field, "solution": d.solution_field},
                         d.max_problems)
        random.Random(self.run.seed).shuffle(rows)  # data order is part of the seed
        return rows

    def _setup_model(self):
        from peft import LoraConfig, get_peft_model

        model = load_model(self.run.model)
        lora = self.t.lora
        model = get_peft_model(model, LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                                                 target_modules=list(lora.target_modules), task_type="CAUSAL_LM"))
        if self.t.gradient_checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            model.enable_input_require_grads()
        return model

    def _setup_scheduler(self):
        total, warmup = self.t.max_steps, int(self.t.warmup_ratio * self.t.max_steps)

        def factor(step: int) -> float:
            if step < warmup:
                return (step + 1) / (warmup + 1)
            progress = (step - warmup) / max(total - warmup, 1)
            if self.t.lr_scheduler == "linear":
                return max(0.0, 1.0 - progress)
            if self.t.lr_scheduler == "cosine":
                return 0.5 * (1.0 + torch.cos(torch.tensor(progress * torch.pi)).item())
            return 1.0

        return torch.optim.lr_scheduler.LambdaLR(self.optimizer, factor)

    # --- one step --------------------------------------------------------------------------------

    def _micro_batch(self, step: int, micro: int) -> list[dict]:
        """This rank's problems for one micro-batch: the global batch is split rank-major."""
        acc = self.accelerator
        size = self.t.per_device_batch_size
        start = (step * self.t.global_batch_size
                 + (micro * acc.num_processes + acc.process_index) * size)
        return [self.rows[(start + i) % len(self.rows)] for i in range(size)]

    def _loss_step(self, problems: list[dict], seed: int) -> tuple[torch.Tensor, dict]:
        t, tok = self.t, self.tokenizer
        student_prompts = [render_prompt_ids(tok, t.student_prompt.format(problem=p["problem"]),
                                             t.student_thinking) for p in problems]
        teacher_prompts = [render_prompt_ids(tok, t.teacher_prompt.format(problem=p["problem"],
                                                                          solution=p["solution"]),
                                             t.teacher_thinking) for p in problems]
        model = self.accelerator.unwrap_model(self.model)
        started = time.monotonic()
        rollouts = self.rollout.generate(model, student_prompts, seed)
        rollout_s = time.monotonic() - started
        device = self.accelerator.device
        student = collate(student_prompts, rollouts.completions, tok.pad_token_id).to(device)
        teacher = collate(teacher_prompts, rollouts.completions, tok.pad_token_id).to(device)
        with torch.no_grad(), model.disable_adapter():
            teacher_logits = completion_logits(model, teacher)
        student_logits = completion_logits(self.model, student)
        loss, diagnostics = opsd_loss(student_logits, teacher_logits, student.completion_mask,
                                      beta=self.run.loss.beta, temperature=self.run.loss.temperature,
                                      clip=self.run.clip, clip_mode=self.run.loss.clip_mode,
                                      top_k=self.run.loss_top_k)
        lengths = [len(c) for c in rollouts.completions]
        diagnostics |= {"rollout_len": sum(lengths) / len(lengths),
                        "rollout_cap_frac": sum(rollouts.hit_cap) / len(lengths),
                        "rollout_seconds": rollout_s,
                        "tokens": int(student.attention_mask.sum() + teacher.attention_mask.sum())}
        return loss, diagnostics

    # --- loop ------------------------------------------------------------------------------------

    def train(self) -> None:
        acc, t = self.accelerator, self.t
        self.model.train()
        while self.step < t.max_steps:
            started = time.monotonic()
            records = []
            for micro in range(t.grad_accum_steps):
                seed = self.run.seed * 1_000_003 + self.step * 1_009 + micro * 101 + acc.process_index
                loss, diag = self._loss_step(self._micro_batch(self.step, micro), seed)
                acc.backward(loss / t.grad_accum_steps)
                records.append(diag | {"loss": loss.item()})
            grad_norm = acc.clip_grad_norm_(self.model.parameters(), t.max_grad_norm)
            lr = self.scheduler.get_last_lr()[0]
            self.optimizer.step()
            self.scheduler.step()
            self.optimizer.zero_grad(set_to_none=True)
            self.step += 1
            seconds = time.monotonic() - started
            self._log(records, float(grad_norm), lr, seconds)
            if self.step % t.save_steps == 0 or self.step == t.max_steps:
                self.save_checkpoint()

    def _log(self, records: list[dict], grad_norm: float, lr: float, seconds: float) -> None:
        keys = [k for k in records[0] if k != "tokens"]
        local = torch.tensor([[r[k] for k in keys] for r in records], device=self.accelerator.device).mean(0)
        mean = self.accelerator.reduce(local, reduction="mean").tolist()
        tokens = self.accelerator.reduce(torch.tensor(sum(r["tokens"] for r in records),
                                                      device=self.accelerator.device), reduction="sum").item()
        line = {"step": self.step, **dict(zip(keys, mean)), "grad_norm": grad_norm, "lr": lr,
                "tokens_per_s": tokens / seconds, "step_seconds": seconds}
        if self.accelerator.is_main_process:
            with open(self.run_dir.metrics, "a") as handle:
                handle.write(json.dumps(line) + "\n")
            print(f"step {self.step}/{self.t.max_steps} loss {line['loss']:.4f} kl {line['kl_true']:.4f} "
                  f"len {line['rollout_len']:.0f} {seconds:.2f}s", flush=True)

    # --- checkpoints -----------------------------------------------------------------------------

    def save_checkpoint(self) -> None:
        """PEFT adapter + trainer state; trainer_state.json is written last and marks completeness."""
        acc = self.accelerator
        path = self.run_dir.checkpoint(self.step)
        rng = {"torch": torch.get_rng_state(), "python": random.getstate()}
        if torch.cuda.is_available():
            rng["cuda"] = torch.cuda.get_rng_state_all()
        if acc.is_main_process:
            path.mkdir(parents=True, exist_ok=True)
            acc.unwrap_model(self.model).save_pretrained(path)
            torch.save({"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
                        "rng": rng, "step": self.step}, path / "state.pt")
            atomic_write_json(path / "trainer_state.json", {"step": self.step})
        acc.wait_for_everyone()

    def _resume(self) -> None:
        path = self.run_dir.latest_checkpoint()
        if path is None:
            return
        from peft import set_peft_model_state_dict
        from safetensors.torch import load_file

        set_peft_model_state_dict(self.accelerator.unwrap_model(self.model),
                                  load_file(path / "adapter_model.safetensors"))
        state = torch.load(path / "state.pt", weights_only=False)
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        torch.set_rng_state(state["rng"]["torch"])
        random.setstate(state["rng"]["python"])
        self.step = state["step"]
        self.accelerator.print(f"resumed from {path} at step {self.step}")

    def cleanup(self) -> None:
        self.accelerator.end_training()


def main(run_dir: str | Path) -> None:
    run_dir = RunDir(Path(run_dir))
    from omegaconf import OmegaConf

    run = from_dict(OmegaConf.to_container(OmegaConf.load(run_dir.config)))
    run_dir.train_dir.mkdir(parents=True, exist_ok=True)
    trainer = OPSDTrainer(run, run_dir)
    trainer.setup()
    trainer.train()
    trainer.cleanup()
