"""The OPSD training recipe: setup -> train loop -> checkpoints, one JSON line of metrics per step.

Student = base model + LoRA (PEFT), prompted with the problem. Teacher = the same weights with the
adapter disabled (the fixed initial model), prompted with problem + reference solution. Each
optimizer step, on every rank: sample one completion per problem from the student (all of this
rank's problems in one rollout call) -> per micro-batch, append the same completion ids to both
prompts -> teacher forward (no grad) -> student forward -> chunked generalized-JSD loss over the
completion tokens -> backward (gradients all-reduced on the last micro-batch) -> clip -> AdamW ->
push the new weights to the rollout engine -> metrics line -> checkpoint when due.
"""

from __future__ import annotations

import json
import math
import random
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import torch

from opsd_sweep.config import RunConfig
from opsd_sweep.data import DatasetUnavailableError, load_rows
from opsd_sweep.evaluate.datasets import load_problems
from opsd_sweep.evaluate.evaluator import engine_spec, evaluate_run, merge_adapter
from opsd_sweep.evaluate.merge_check import MERGED_DIR, compare_logprobs, failure, write_check
from opsd_sweep.evaluate.vllm_engine import VLLMEngine
from opsd_sweep.evaluate.prompts import render_eval_prompts
from opsd_sweep.modeling import ModelUnavailableError, eos_token_ids, load_model, load_tokenizer
from opsd_sweep.prompts import render_prompt_ids
from opsd_sweep.run import collapse
from opsd_sweep.run.rundir import RunDir, atomic_write_text
from opsd_sweep.train import checkpoint
from opsd_sweep.train.collate import collate
from opsd_sweep.train.distill import DistillationModel
from opsd_sweep.train.loss import DIAGNOSTICS, LossSpec
from opsd_sweep.train.precision import fp32_matmul
from opsd_sweep.train.profiling import profiled
from opsd_sweep.backends import prepare_vllm_process, resolve_backend
from opsd_sweep.train.engine_plan import base_weight_bytes, plan_rollout_engine, training_step_bytes
from opsd_sweep.train.rollout import HFRollout, Rollouts
from opsd_sweep.train.rollout_vllm import VLLMRollout, kept_engine_bytes
from opsd_sweep.train.schedule import make_scheduler
from opsd_sweep.train.teacher import Teacher
from opsd_sweep.train.timing import PhaseTimer, StepMemory
from opsd_sweep.trackers import open_tracker
from opsd_sweep.worker import warm

PHASES = ("rollout", "teacher", "student", "loss", "backward", "optimizer", "weight_sync")
MAX_CHECK_PROMPTS = 64  # the merge check's eval prompts (AIME's 30 all; a suite's first 64)


class OPSDTrainer:
    def __init__(self, run: RunConfig, run_dir: RunDir):
        self.run, self.run_dir, self.t = run, run_dir, run.train
        self.step = 0

    # --- setup -----------------------------------------------------------------------------------

    def setup(self) -> None:
        from accelerate import Accelerator, DistributedType
        from accelerate.state import AcceleratorState, GradientState
        from accelerate.utils import set_seed

        if warm.active():  # accelerate's singletons outlive a cycle in a phase worker; a new process has none
            AcceleratorState._reset_state(reset_partial_state=True)
            GradientState._reset_state()
        # CPU when asked (num_gpus=0) or when there is no GPU (CPU processes then talk over gloo)
        self.accelerator = acc = Accelerator(cpu=self.t.num_gpus == 0 or not torch.cuda.is_available())
        self.sharded = acc.distributed_type == DistributedType.FSDP
        self._check_world()
        set_seed(self.run.seed)  # same LoRA init on every rank
        self.rows = self._setup_data()  # before the model: a missing dataset fails in seconds
        # a phase worker's kept tokenizer and student serve only the model files they were built from
        self.model_identity = warm.model_identity(self.run)
        self.tokenizer = warm.reuse("tokenizer", self.model_identity, lambda: load_tokenizer(self.run.model))
        peft_model = self._setup_model()
        self.eos_ids = eos_token_ids(peft_model, self.tokenizer)
        latest = self.run_dir.latest_checkpoint()
        if latest is not None:  # adapter weights go in before DDP / FSDP wrap the model
            checkpoint.load_adapter(latest, peft_model)
        spec = LossSpec(beta=self.run.loss.beta, temperature=self.run.loss.temperature, clip=self.run.clip,
                        clip_mode=self.run.loss.clip_mode, top_k=self.run.loss_top_k,
                        chunk_size=self.run.loss.chunk_size)
        self.teacher = Teacher(self.t.teacher, self.t.ema_decay, peft_model, sharded=self.sharded)
        model = DistillationModel(peft_model, spec, self.teacher)
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad],
                                      lr=self.run.learning_rate, weight_decay=self.t.weight_decay)
        self.scheduler = make_scheduler(optimizer, self.t)
        self.model, self.optimizer = acc.prepare(model, optimizer)
        self.peft_model = acc.unwrap_model(self.model).peft_model
        if latest is not None:
            self._resume(latest)
        elif acc.is_main_process:  # a fresh start (or a restart before the first checkpoint) logs from step 1
            _truncate_metrics(self.run_dir.metrics, 0)
        # the steps so far, for the collapse rule (every rank reads them: the lines up to its step are the same)
        self.history = [line for line in self.run_dir.training_steps() if line["step"] <= self.step]
        if acc.is_main_process:
            collapse.clear_marker(self.run_dir)
        self.rollout = self._setup_rollout()
        if self.t.compile and acc.device.type == "cuda":  # on CPU compiling costs more than it saves
            compile_decoder_layers(self.peft_model)
        self.rollout.update(self.step)
        self.tracker = open_tracker(self.run, self.run_dir, phase="train", step=self.step)

    def _setup_rollout(self):
        acc = self.accelerator
        self.backend, why = resolve_backend(self.run.rollout.backend, acc.device.type == "cuda", "rollout.backend")
        acc.print(f"[train] rollout backend: {self.backend} ({why})")
        self.engine_plan = None
        if self.backend == "hf" and self.run.rollout.kv_cache_dtype != "auto":  # never sample an fp8 run in bf16
            raise ValueError(f"rollout.kv_cache_dtype={self.run.rollout.kv_cache_dtype} is a vLLM option, but the "
                             f"rollouts run on hf ({why}); train on GPUs with vllm, or set rollout.kv_cache_dtype=auto")
        if self.sharded and self.backend == "hf":
            raise ValueError("FSDP shards the weights that HF generate needs on every rank; use train.strategy=ddp "
                             "or rollout.backend=vllm (make install-gpu)")
        if self.backend == "hf":
            return HFRollout(self.run.rollout, self.peft_model, self.tokenizer.pad_token_id, self.eos_ids,
                             static_cache=acc.device.type == "cuda")
        prepare_vllm_process(self.run.cache_dir)
        free, total = torch.cuda.mem_get_info(acc.device)
        free += kept_engine_bytes()  # a phase worker's engine from the last cycle: planned as if not started
        longest = self._longest_student_prompt()
        model_config = self.peft_model.get_base_model().config
        step_bytes = training_step_bytes(self.run, model_config, longest)
        self.engine_plan = plan = plan_rollout_engine(self.run, acc.num_processes, free, total, step_bytes, longest,
                                                      model_config, base_weight_bytes(self.peft_model))
        size = (f"KV cache {plan.kv_cache_bytes / 1e9:.1f} GB for one step's rollouts" if plan.kv_cache_bytes
                else f"{self.run.rollout.gpu_memory_utilization} of the GPU (it evaluates too)")
        acc.print(f"[train] vllm engine: {size}; sleep={plan.sleep} ({plan.sleep_why}); evaluates the final "
                  f"checkpoint: {plan.serves_eval} ({plan.serves_eval_why})")
        return VLLMRollout(self.run, self.peft_model, self.eos_ids, acc.device, acc.process_index, plan)

    def _check_world(self) -> None:
        acc, t = self.accelerator, self.t
        expected = max(t.num_gpus, 1)
        if acc.num_processes != expected:
            raise ValueError(f"train.num_gpus={t.num_gpus} but {acc.num_processes} processes were launched; "
                             f"global_batch_size {t.global_batch_size} = processes x per_device_batch_size "
                             f"{t.per_device_batch_size} x grad_accum_steps {t.grad_accum_steps} needs them "
                             "to agree: launch with --num_processes matching train.num_gpus")
        launched = "fsdp" if self.sharded else "ddp"
        if acc.num_processes > 1 and launched != t.strategy:
            raise ValueError(f"train.strategy={t.strategy} but this was launched as {launched}: launch with "
                             f"--config_file launchers/accelerate/{t.strategy}.yaml")
        acc.print(f"[train] {acc.num_processes} process(es), {acc.distributed_type.value}, {acc.device.type}")

    def _setup_data(self) -> list[dict]:
        d = self.run.data
        rows = load_rows(d.path, d.split, {"problem": d.problem_field, "solution": d.solution_field},
                         d.max_problems)
        if not rows:
            raise ValueError(f"dataset {d.name!r} at {d.path!r} (split {d.split!r}) has no rows")
        random.Random(self.run.seed).shuffle(rows)  # data order is part of the seed
        return rows

    def _setup_model(self):
        """Base model + LoRA. A phase worker keeps it for the next cycle of the same model (by content: see
        warm.model_identity), LoRA and compile settings, whose LoRA values are drawn afresh exactly as
        get_peft_model draws them here."""
        from accelerate.utils import set_seed
        from peft import LoraConfig, get_peft_model

        lora = self.t.lora
        config = LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                            target_modules=list(lora.target_modules), task_type="CAUSAL_LM")

        def build():
            model = load_model(self.run.model)
            set_seed(self.run.seed)  # the LoRA draw starts at the run's seed, on a new or a kept model alike
            model = get_peft_model(model, config)
            if self.t.gradient_checkpointing:
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            return model

        def refresh(model):
            set_seed(self.run.seed)
            warm.fresh_adapter(model)

        key = (self.model_identity, self.run.model, repr(config), self.t.gradient_checkpointing,
               self.t.compile)
        return warm.reuse("student", key, build, refresh)

    # --- one step --------------------------------------------------------------------------------

    def _rank_problems(self, step: int) -> list[dict]:
        """This rank's problems for one optimizer step, micro-batch after micro-batch.

        The global batch is consecutive rows of the shuffled data; micro-batch m of rank r takes
        slot m * world + r, so the split does not depend on how the work is spread."""
        acc, t = self.accelerator, self.t
        size = t.per_device_batch_size
        out = []
        for micro in range(t.grad_accum_steps):
            start = step * t.global_batch_size + (micro * acc.num_processes + acc.process_index) * size
            out += [self.rows[(start + i) % len(self.rows)] for i in range(size)]
        return out

    def _longest_student_prompt(self) -> int:
        """Over every row, not the first of this seed's order: the rollout engine is sized from it, and a phase
        worker keeps its engine for the next seed only when that size is the same."""
        return max(len(self._student_prompt(row)) for row in self.rows)

    def _student_prompt(self, problem: dict) -> list[int]:
        return render_prompt_ids(self.tokenizer, self.t.student_prompt.format(problem=problem["problem"]),
                                 self.t.student_thinking)

    def _prompts(self, problems: list[dict]) -> tuple[list[list[int]], list[list[int]]]:
        t, tok = self.t, self.tokenizer
        student = [self._student_prompt(p) for p in problems]
        teacher = [render_prompt_ids(tok, t.teacher_prompt.format(problem=p["problem"], solution=p["solution"]),
                                     t.teacher_thinking) for p in problems]
        return student, teacher

    def _rollout_seed(self) -> int:
        """A pure function of (seed, step, rank): a resumed run samples exactly what it would have."""
        return self.run.seed * 1_000_003 + self.step * 1_009 + self.accelerator.process_index

    def train_step(self) -> dict:
        acc, t = self.accelerator, self.t
        timer = PhaseTimer(acc.device)
        started = time.perf_counter()
        student_prompts, teacher_prompts = self._prompts(self._rank_problems(self.step))
        memory = StepMemory(acc.device, self.rollout)
        with timer("rollout"):
            rollouts = self.rollout.generate(student_prompts, self._rollout_seed())
        memory.rollout_done()
        values, tokens, size, pad = [], 0, t.per_device_batch_size, self.tokenizer.pad_token_id
        for micro in range(t.grad_accum_steps):
            part = slice(micro * size, (micro + 1) * size)
            student = collate(student_prompts[part], rollouts.completions[part], pad).to(acc.device)
            teacher = collate(teacher_prompts[part], rollouts.completions[part], pad).to(acc.device)
            last = micro == t.grad_accum_steps - 1
            with nullcontext() if last else acc.no_sync(self.model):  # all-reduce once per step
                loss, diagnostics = self.model(student, teacher, timer)
                with timer("backward"):
                    acc.backward(loss / t.grad_accum_steps)
            # kept on the GPU and read once per step: every read makes the host wait for the queued kernels
            values.append(torch.cat([diagnostics, loss.detach()[None]]))
            tokens += student.n_tokens + teacher.n_tokens
        with timer("optimizer"):
            grad_norm = acc.clip_grad_norm_(self.model.parameters(), t.max_grad_norm)
            lr = self.scheduler.get_last_lr()[0]
            self.optimizer.step()
            self.scheduler.step()
            self.teacher.update()
            self.optimizer.zero_grad(set_to_none=True)
        self.step += 1
        with timer("weight_sync"):  # the rollout backend samples from the updated student from now on
            self.rollout.update(self.step)
        memory.end()
        return self._metrics(values, tokens, rollouts, float(grad_norm), lr, timer, memory,
                             time.perf_counter() - started)

    def _profiled_step(self) -> dict:
        """train_step under torch.profiler (train.profile_step): the table goes next to metrics.jsonl and the
        line says the step was profiled (the profiler slows it: not a steady step)."""
        line, table = profiled(self.train_step)
        if self.accelerator.is_main_process:
            atomic_write_text(self.run_dir.train_dir / f"profile_step{self.step}.txt", table + "\n")
        return line | {"profiled": True}

    def _save_adapter(self, path: Path) -> None:
        """Write the student's PEFT adapter (rank 0 writes; under FSDP every rank helps gather it)."""
        acc = self.accelerator
        state = None
        if self.sharded:
            prefix = "peft_model."
            state = {k[len(prefix):]: v for k, v in acc.get_state_dict(self.model).items() if "lora_" in k}
        if acc.is_main_process:
            self.peft_model.save_pretrained(path, state_dict=state)

    # --- loop ------------------------------------------------------------------------------------

    def train(self) -> collapse.Collapse | None:
        """Train to train.max_steps, or (train.stop_on_collapse) to the step the run is found collapsed."""
        from tqdm import tqdm

        t = self.t
        self.model.train()
        bar = tqdm(total=t.max_steps, initial=self.step, desc="OPSD steps", unit="step",
                   disable=not self.accelerator.is_main_process)
        found = None
        while self.step < t.max_steps:
            line = self._profiled_step() if self.step + 1 == t.profile_step else self.train_step()
            self._write_metrics(line)
            self.history.append(line)
            self.tracker.log({"train": line}, self.step)
            bar.update(1)
            bar.set_postfix(loss=f"{line['loss']:.4f}", kl=f"{line['kl_true']:.4f}",
                            len=f"{line['rollout_len']:.0f}", s=f"{line['step_seconds']:.2f}")
            # the rule reads all-reduced values only, so every rank stops at the same step
            found = collapse.find_collapse(self.history, t.collapse) if t.stop_on_collapse else None
            if self.step % t.save_steps == 0 or self.step == t.max_steps or found:
                self.save_checkpoint()  # a stopped run keeps its weights: stop_on_collapse=false trains it on
            if found:
                self.accelerator.print(f"[train] collapsed at step {found.step} ({found.reason}); stopped at "
                                       f"step {self.step} (train.stop_on_collapse)")
                if self.accelerator.is_main_process:
                    collapse.write_marker(self.run_dir, found)
                break
        bar.close()
        return found

    def _metrics(self, values: list[torch.Tensor], tokens: int, rollouts: Rollouts, grad_norm: float, lr: float,
                 timer: PhaseTimer, memory: StepMemory, seconds: float) -> dict:
        """One metrics line: means over micro-batches and ranks, token counts summed over ranks.

        values: one tensor per micro-batch, the loss's DIAGNOSTICS then the loss; tokens: this rank's."""
        acc = self.accelerator
        step = [rollouts.mean_length, rollouts.cap_fraction] + [timer.seconds.get(p, 0.0) for p in PHASES]
        local = torch.cat([torch.stack(values).double().mean(0), torch.tensor(step, dtype=torch.float64).to(acc.device)])
        names = [*DIAGNOSTICS, "loss", "rollout_len", "rollout_cap_frac"] + [f"time_{p}" for p in PHASES]
        mean = acc.reduce(local, reduction="mean").tolist()
        counts = torch.tensor([tokens, rollouts.n_tokens], device=acc.device)
        tokens, generated = acc.reduce(counts, reduction="sum").tolist()
        line = {"step": self.step, **dict(zip(names, mean)), "grad_norm": grad_norm, "lr": lr,
                "tokens_per_s": tokens / seconds, "step_seconds": seconds}
        # ranks sample in parallel: all ranks' tokens over the (mean) rollout time
        line["rollout_tokens_per_s"] = generated / max(line["time_rollout"], 1e-9)
        line["rollout_backend"] = self.backend
        return line | memory.figures()

    def _write_metrics(self, line: dict) -> None:
        if self.accelerator.is_main_process:
            with open(self.run_dir.metrics, "a") as handle:
                handle.write(json.dumps(line) + "\n")

    # --- checkpoints -----------------------------------------------------------------------------

    def save_checkpoint(self) -> None:
        checkpoint.save_checkpoint(self.run_dir.checkpoint(self.step), accelerator=self.accelerator,
                                   save_adapter=self._save_adapter, optimizer=self.optimizer,
                                   scheduler=self.scheduler, step=self.step, sharded_optimizer=self.sharded,
                                   teacher=self.teacher.state_dict())

    def _resume(self, path: Path) -> None:
        self.step = checkpoint.load_trainer_state(path, accelerator=self.accelerator, optimizer=self.optimizer,
                                                  scheduler=self.scheduler, sharded_optimizer=self.sharded,
                                                  teacher=self.teacher)
        if self.accelerator.is_main_process:
            checkpoint.remove_partial_checkpoints(self.run_dir.train_dir)
            _truncate_metrics(self.run_dir.metrics, self.step)
        self.accelerator.print(f"resumed from {path} at step {self.step}")

    def after_training(self) -> None:
        """The rollout engine's last work (engine_plan): the merge check of the final checkpoint
        (eval.merge_check), then, with eval.engine=rollout, its evaluation, served exactly as the eval phase
        would: the base weights restored with the adapter as a LoRARequest, or the merged model dir loaded."""
        if self.engine_plan is None:
            return
        self.model = self.optimizer = self.scheduler = None  # training is over: release its GPU memory
        self.accelerator.free_memory()
        final = self.run_dir.latest_checkpoint()
        if self.accelerator.is_main_process and self.run.eval.merge_check and not self.run.eval.merge_lora:
            try:
                self._check_merge(final)
            except Exception as err:  # noqa: BLE001 - a check that cannot run leaves the exact path, never the run
                print(f"[train] the merge check could not run ({type(err).__name__}: {err}); the evaluation serves "
                      "the adapter as a LoRARequest", flush=True)
        if self.engine_plan.serves_eval:
            print("[train] evaluating the final checkpoint with the rollout engine", flush=True)
            evaluate_run(self.run, self.run_dir, final, attach=self._eval_engine)

    def _check_merge(self, final: Path) -> None:
        """Merge the final checkpoint (as the evaluator serves it) and score the run's eval prompts with the
        adapter as a LoRARequest, with the merged weights and with the base weights (merge_check.py)."""
        e = self.run.eval
        merged = merge_adapter(engine_spec(self.run, final), self.run_dir.eval_dir / MERGED_DIR)
        # cut to the rollout engine's context (the longest rollout): the check needs positions, not whole prompts
        context = self.rollout.max_model_len - 1
        prompts = [p[:context] for p in render_eval_prompts(self.tokenizer, e, load_problems(e))[:MAX_CHECK_PROMPTS]]
        self.rollout.restore_base()
        with_adapter = self.rollout.prompt_logprobs(prompts, adapter=final)
        base = self.rollout.prompt_logprobs(prompts, adapter=None)
        self.rollout.serve_model_dir(Path(merged.model_path))
        merged_lps = self.rollout.prompt_logprobs(prompts, adapter=None)
        self.rollout.restore_base()
        figures = compare_logprobs(with_adapter, merged_lps, base, e.merge_tolerance)
        write_check(self.run_dir.eval_dir, final, figures)
        print(f"[train] merge check of {final.name}: mean |Δ log p| merged vs LoRARequest {figures['mean_abs_diff']} "
              f"(max {figures['max_abs_diff']}) over {figures['positions']} positions of {figures['prompts']} eval "
              f"prompts, tolerance {e.merge_tolerance}; the adapter itself moves them {figures['adapter_mean_abs_effect']}: "
              f"{'passed' if figures['passed'] else 'FAILED, ' + failure(figures, e.merge_tolerance)}", flush=True)

    def _eval_engine(self, spec):
        """The rollout engine holding the weights `spec` is served from (one call per checkpoint evaluated)."""
        if spec.adapter_path is None:  # the evaluator merged the checkpoint into spec.model_path
            self.rollout.serve_model_dir(Path(spec.model_path))
        else:
            self.rollout.restore_base()
        return VLLMEngine(spec, llm_engine=self.rollout.llm.llm_engine)

    def cleanup(self) -> None:
        self.tracker.finish()
        if warm.active():  # a kept engine gets the base weights back; it keeps its process group
            if self.backend == "vllm":  # always: a collapsed run is not evaluated, and its engine holds its student
                self.rollout.restore_base()
                if not self.engine_plan.serves_eval:  # the eval phase's own engine gets the memory it holds
                    self.rollout.sleep()
        else:
            # end_training destroys the process group; a rank that destroys it while another still uses it (rank 0
            # hosts the store) can abort the other (a 2-process gloo cycle once ended SIGABRT after its last step)
            self.accelerator.wait_for_everyone()
            self.accelerator.end_training()


def compile_decoder_layers(peft_model) -> None:
    """torch.compile every decoder layer (LoRA included): RMSNorm, rotary, SwiGLU and the LoRA
    dropout/add fuse into few kernels. Layers, not the whole model: every layer shares one compiled
    graph, and dynamic shapes keep the varying completion lengths from forcing recompiles. A student kept
    by a phase worker is compiled already and keeps its graphs."""
    for layer in peft_model.get_base_model().get_decoder().layers:
        if layer._compiled_call_impl is None:
            layer.compile(dynamic=True)


def _truncate_metrics(path: Path, step: int) -> None:
    """Drop lines logged after the checkpoint we resume from: the rerun logs those steps again. A line a
    kill cut short is dropped too (its step is logged again)."""
    if path.exists():
        kept = [line for line in path.read_text(errors="replace").splitlines() if _logged_step(line) <= step]
        atomic_write_text(path, "".join(line + "\n" for line in kept))


def _logged_step(line: str) -> float:
    """The step of a metrics line; infinity for a torn or foreign line (never kept)."""
    try:
        return json.loads(line)["step"]
    except (json.JSONDecodeError, KeyError, TypeError):
        return math.inf


def run_phase(run_dir: str | Path) -> None:
    """The training phase, in a process of its own or in a phase worker: an unavailable model or
    dataset ends it with a one-line reason instead of a traceback."""
    try:
        main(run_dir)
    except (ModelUnavailableError, DatasetUnavailableError) as err:
        sys.exit(f"opsd_sweep.train: {err}")


def main(run_dir: str | Path) -> None:
    run_dir = RunDir(Path(run_dir))
    run = run_dir.read_config()
    run_dir.train_dir.mkdir(parents=True, exist_ok=True)
    trainer = OPSDTrainer(run, run_dir)
    trainer.setup()
    with fp32_matmul(run.train.fp32_matmul):  # the steps only: never the engine's start or the evaluation
        collapsed = trainer.train()
    if collapsed is None:  # a collapsed run is not evaluated
        trainer.after_training()
    trainer.cleanup()
