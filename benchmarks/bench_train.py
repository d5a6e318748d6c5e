"""Trainer benchmark: ours vs the naive OPSD step, on a randomly initialised Qwen3-1.7B-shaped model.

Naive = what the published code does: full-vocabulary bf16 loss over [B, T, V] logits, teacher
logits over the whole teacher prompt (then sliced), gradient checkpointing. Parts, in one process:
  loss     the loss alone, fwd + bwd: time and extra peak memory (logits API and hidden-state API)
  compute  the training compute of one micro-batch at the recipe's shapes (teacher fwd, student
           fwd/bwd, loss, optimizer): tokens/s and MFU
  rollout  the hf rollout backend: static KV cache (ours; transformers compiles the decode step)
           vs eager generate with a dynamic cache, same prompts and lengths
  step     full trainer steps (python -m opsd_sweep.train) broken into rollout / teacher / student /
           loss / backward / optimizer, on 1 GPU and on 2 GPUs through accelerate launch

    python -m benchmarks.bench_train --out DIR           # GPU: recipe shapes (prompts 300 / 1500, completion 1024)
    python -m benchmarks.bench_train --tiny --out DIR    # CPU smoke run of every part with tiny shapes
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from opsd_sweep.testing.loss_reference import reference
from opsd_sweep.testing.run_config import composed_run_config
from opsd_sweep.config import RolloutConfig
from opsd_sweep.train.collate import collate
from opsd_sweep.train.distill import DistillationModel
from opsd_sweep.train.loss import LossSpec, opsd_loss, opsd_loss_from_hidden
from opsd_sweep.train.precision import fp32_matmul
from opsd_sweep.train.profiling import profiled
from opsd_sweep.train.rollout import HFRollout, sample
from opsd_sweep.train.teacher import Teacher
from opsd_sweep.train.trainer import compile_decoder_layers
from opsd_sweep.train.timing import PhaseTimer

REPO = Path(__file__).resolve().parents[1]

H200_BF16_PEAK = 989e12  # dense bf16 FLOP/s, datasheet (about 790 measured on this machine's matmuls)
LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
LOSS = dict(beta=0.0, temperature=1.1, clip=0.05, clip_mode="elementwise")  # the paper recipe's loss


@dataclass(frozen=True)
class Shapes:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    batch: int            # per-device micro-batch
    student_prompt: int
    teacher_prompt: int
    completion: int
    lora_r: int
    rollout_batch: int    # prompts per generate call (per-device batch x grad-accum)
    rollout_tokens: int   # new tokens in the eager-vs-static comparison
    chunk_size: int


RECIPE = Shapes(2048, 28, 16, 8, 128, 6144, 151936, batch=4, student_prompt=300, teacher_prompt=1500,
                completion=1024, lora_r=64, rollout_batch=8, rollout_tokens=128, chunk_size=256)
TINY = Shapes(64, 2, 4, 2, 16, 128, 512, batch=2, student_prompt=20, teacher_prompt=50, completion=16,
              lora_r=8, rollout_batch=4, rollout_tokens=8, chunk_size=8)


# --- measuring -----------------------------------------------------------------------------------

def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def measure(fn, device, warmup: int = 1, repeats: int = 3) -> dict:
    """Median seconds of fn() and its peak memory above what was allocated before it (CUDA only)."""
    for _ in range(warmup):
        fn()
    sync(device)
    times, base = [], torch.cuda.memory_allocated() if device.type == "cuda" else 0
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - started)
    out = {"seconds": statistics.median(times)}
    if device.type == "cuda":
        out["extra_peak_gb"] = (torch.cuda.max_memory_allocated() - base) / 1e9
        out["peak_gb"] = torch.cuda.max_memory_allocated() / 1e9
    return out


def naive_loss(student_logits, teacher_logits, mask, temperature=1.1, clip=0.05):
    """The published code's loss: bf16 softmaxes over full [B, T, V] tensors, elementwise clip."""
    log_ps = (student_logits / temperature).log_softmax(-1)
    log_pt = (teacher_logits / temperature).log_softmax(-1)
    per_token = (log_pt.exp() * (log_pt - log_ps)).clamp(max=clip).sum(-1)
    return (per_token * mask).sum() / mask.sum()


# --- 1. the loss alone ---------------------------------------------------------------------------

def bench_loss(s: Shapes, device, dtype) -> dict:
    gen = torch.Generator(device=device).manual_seed(0)
    B, T, V, H = s.batch, s.completion, s.vocab, s.hidden
    student = (torch.randn(B, T, V, device=device, generator=gen) * 3).to(dtype).requires_grad_()
    teacher = (torch.randn(B, T, V, device=device, generator=gen) * 3).to(dtype)
    mask = torch.ones(B, T, dtype=torch.bool, device=device)
    results = {}

    def run(fn):
        def step():
            student.grad = None
            fn().backward()
        return step

    results["naive_bf16"] = measure(run(lambda: naive_loss(student, teacher, mask)), device)
    results[f"ours_chunk{s.chunk_size}"] = measure(run(lambda: opsd_loss(
        student, teacher, mask, chunk_size=s.chunk_size, **LOSS)[0]), device)
    results["accuracy"] = accuracy(student, teacher, mask, s.chunk_size)
    if device.type == "cuda":
        results["profile_ours"] = kernel_profile(run(lambda: opsd_loss(
            student, teacher, mask, chunk_size=s.chunk_size, **LOSS)[0]))
        print(results["profile_ours"], flush=True)
    del student, teacher
    # the trainer's path: from final hidden states through the (frozen, tied) LM head
    hidden = torch.randn(B, T, H, device=device, generator=gen).to(dtype).requires_grad_()
    teacher_hidden = torch.randn(B, T, H, device=device, generator=gen).to(dtype)
    weight = (torch.randn(V, H, device=device, generator=gen) * 0.05).to(dtype)

    def hidden_step(fn):
        def step():
            hidden.grad = None
            fn().backward()
        return step

    results["naive_head_plus_loss"] = measure(hidden_step(
        lambda: naive_loss(hidden @ weight.T, teacher_hidden @ weight.T, mask)), device)
    spec = LossSpec(chunk_size=s.chunk_size, **LOSS)
    results["ours_from_hidden"] = measure(hidden_step(
        lambda: opsd_loss_from_hidden(hidden, teacher_hidden, weight, mask, spec)[0]), device)
    return results


def kernel_profile(fn, rows: int = 14, sort_by: str = "cuda_time_total") -> str:
    """The kernels of one call of fn, by `sort_by` (where the time goes); on CPU, the CPU ops."""
    return profiled(fn, rows, sort_by)[1]


def accuracy(student, teacher, mask, chunk_size: int) -> dict:
    """Errors against the plain fp32 formula the tests check the loss with: the loss value on the whole batch,
    and the gradient on a slice (the full fp32 autograd reference would not be cheap)."""
    options = dict(top_k=None, **LOSS)
    with torch.no_grad():
        exact = reference(student, teacher, mask, **options)[0].item()
        naive = naive_loss(student, teacher, mask).item()
    ours = opsd_loss(student, teacher, mask, chunk_size=chunk_size, **LOSS)[0].item()
    part = student[:1, :128].detach().requires_grad_()
    (want,) = torch.autograd.grad(reference(part, teacher[:1, :128], mask[:1, :128], **options)[0], part)
    (got,) = torch.autograd.grad(opsd_loss(part, teacher[:1, :128], mask[:1, :128], chunk_size=chunk_size,
                                           **LOSS)[0], part)
    return {"loss_fp32": exact, "ours_abs_error": abs(ours - exact), "naive_bf16_abs_error": abs(naive - exact),
            "ours_grad_max_rel_error": ((got.float() - want).abs().max() / want.abs().max()).item()}


# --- 2. training compute of one micro-batch ------------------------------------------------------

def build_model(s: Shapes, device, dtype):
    from transformers import AutoModelForCausalLM, Qwen3Config

    config = Qwen3Config(vocab_size=s.vocab, hidden_size=s.hidden, intermediate_size=s.intermediate,
                         num_hidden_layers=s.layers, num_attention_heads=s.heads, num_key_value_heads=s.kv_heads,
                         head_dim=s.head_dim, max_position_embeddings=40960, rope_theta=1e6,
                         tie_word_embeddings=True, bos_token_id=None, eos_token_id=2, pad_token_id=0)
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation="sdpa")
    model.generation_config.eos_token_id = [2, 1]  # two stop ids, as Qwen3's generation config has
    model.generation_config.pad_token_id = 0
    return model


def add_lora(model, r: int):
    from peft import LoraConfig, get_peft_model

    return get_peft_model(model, LoraConfig(r=r, lora_alpha=2 * r, lora_dropout=0.05, target_modules=LORA_TARGETS,
                                            task_type="CAUSAL_LM"))


@dataclass(frozen=True)
class MicroBatch:
    """One micro-batch of random ids in both layouts: ours (collate: right-padded, no mask) and the
    published one (left-padded prompts, an attention mask and position ids: what naive_step feeds)."""
    ours: tuple  # (student Batch, teacher Batch)
    naive: tuple  # ((input_ids, attention_mask, position_ids), same for the teacher, completion_mask)
    student_lens: list[int]
    teacher_lens: list[int]


def random_batches(s: Shapes, device, batch: int, spread: float) -> MicroBatch:
    """Prompt lengths drawn from [(1 - spread) x, x] of the recipe's (the cycle's prompts differ in length:
    a padded batch is what the trainer computes on); completions at the cap."""
    rng = random.Random(0)
    ids = lambda n: [rng.randrange(3, s.vocab) for _ in range(n)]  # noqa: E731
    length = lambda n: rng.randint(max(1, round(n * (1 - spread))), n)  # noqa: E731
    completions = [ids(s.completion) for _ in range(batch)]
    students = [ids(length(s.student_prompt)) for _ in range(batch)]
    teachers = [ids(length(s.teacher_prompt)) for _ in range(batch)]
    ours = (collate(students, completions, 0).to(device), collate(teachers, completions, 0).to(device))
    naive = (left_padded(students, completions, device), left_padded(teachers, completions, device),
             ours[0].completion_mask)
    return MicroBatch(ours, naive, [len(p) for p in students], [len(p) for p in teachers])


def left_padded(prompts: list[list[int]], completions: list[list[int]], device) -> tuple:
    """The published layout (completions of one length here): [pad | prompt | completion], a mask, positions."""
    width = max(len(p) for p in prompts)
    rows = [[0] * (width - len(p)) + p + c for p, c in zip(prompts, completions)]
    mask = torch.tensor([[0] * (width - len(p)) + [1] * (len(p) + len(c)) for p, c in zip(prompts, completions)])
    return torch.tensor(rows).to(device), mask.to(device), (mask.cumsum(-1) - 1).clamp(min=0).to(device)


def is_compiled(peft_model) -> bool:
    return peft_model.get_base_model().get_decoder().layers[0]._compiled_call_impl is not None


def set_checkpointing(peft_model, on: bool) -> None:
    if on:
        peft_model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    else:
        peft_model.get_base_model().gradient_checkpointing_disable()


def naive_step(peft_model, student, teacher, completion_mask, optimizer, timer):
    keep = completion_mask.shape[1] + 1

    def logits(model, inputs):
        input_ids, attention_mask, position_ids = inputs
        return model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                     use_cache=False).logits[:, -keep:-1]

    with timer("teacher"), torch.no_grad(), peft_model.disable_adapter():
        teacher_logits = logits(peft_model, teacher)
    with timer("student"):
        student_logits = logits(peft_model, student)
    with timer("loss"):
        loss = naive_loss(student_logits, teacher_logits, completion_mask)
    with timer("backward"):
        loss.backward()
    optimizer_step(peft_model, optimizer, timer)


def ours_step(model: DistillationModel, student, teacher, optimizer, timer):
    loss, _ = model(student, teacher, timer)
    with timer("backward"):
        loss.backward()
    optimizer_step(model.peft_model, optimizer, timer)


def tf32_step(model: DistillationModel, student, teacher, optimizer, timer):
    with fp32_matmul("tf32"):
        ours_step(model, student, teacher, optimizer, timer)


def optimizer_step(peft_model, optimizer, timer):
    with timer("optimizer"):
        torch.nn.utils.clip_grad_norm_([p for p in peft_model.parameters() if p.requires_grad], 0.1)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def step_flops(s: Shapes, student_lens: list[int], teacher_lens: list[int]) -> float:
    """Useful FLOPs of one micro-batch with these prompt lengths: teacher forward + student forward + student
    backward to the activations (~ one forward; LoRA weight gradients are negligible). LM head at
    completion positions only; causal attention counted as half the square; padding not counted."""
    proj = s.hidden * (s.heads * s.head_dim) * 2 + s.hidden * (s.kv_heads * s.head_dim) * 2 + 3 * s.hidden * s.intermediate
    lora = s.lora_r * (2 * s.hidden + s.heads * s.head_dim * 2 + 2 * s.kv_heads * s.head_dim
                       + 3 * (s.hidden + s.intermediate))
    attention = lambda n: s.layers * 2 * n * n * s.heads * s.head_dim  # noqa: E731  (QK^T + AV, causal half)
    head = 2 * s.hidden * s.vocab * s.completion
    teacher = sum(2 * s.layers * proj * lt + attention(lt) + head for lt in (n + s.completion for n in teacher_lens))
    student = sum(2 * s.layers * (proj + lora) * ls + attention(ls) + head for ls in (n + s.completion for n in student_lens))
    return teacher + 2 * student


def bench_compute(s: Shapes, peft_model, device, micro_batches: list[int], compiled: bool,
                  profiled: bool = False, spread: float = 0.0) -> dict:
    """The naive step and ours at the recipe's micro-batch, plus ours (no checkpointing) at every other
    micro-batch in `micro_batches` (same prompts per optimizer step with less grad-accum); compared by tokens/s.
    With `compiled`, the same again with every decoder layer compiled (train.compile=true). With `profiled`,
    each variant's kernels by their own time in one more step (where a step falls short of the bf16 peak).
    Prompt lengths vary by `spread` (random_batches); naive gets the published left-padded layout."""
    optimizer = torch.optim.AdamW([p for p in peft_model.parameters() if p.requires_grad], lr=1e-6)
    ours = DistillationModel(peft_model, LossSpec(chunk_size=s.chunk_size, **LOSS),
                             Teacher("fixed", 0.0, peft_model, sharded=False))
    peft_model.train()
    results = {}
    batches = {b: random_batches(s, device, b, spread) for b in sorted({s.batch, *micro_batches})}

    def variant(batch: int, checkpointing: bool, step_fn, layout: str = "ours"):
        return batch, checkpointing, lambda t: step_fn(*getattr(batches[batch], layout), t)

    variants = {"naive (ckpt, full logits, bf16 loss)":
                variant(s.batch, True, lambda st, te, mask, t: naive_step(peft_model, st, te, mask, optimizer, t),
                        "naive"),
                "ours + ckpt": variant(s.batch, True, lambda st, te, t: ours_step(ours, st, te, optimizer, t))}
    sizes = sorted({s.batch, *micro_batches})
    for b in sizes:
        name = "ours (no ckpt)" if b == s.batch else f"ours (no ckpt, micro-batch {b})"
        variants[name] = variant(b, False, lambda st, te, t: ours_step(ours, st, te, optimizer, t))
    if compiled:  # last: compiling changes the model for every later variant
        for b in sizes:
            variants[f"ours (no ckpt, compiled layers, micro-batch {b})"] = variant(
                b, False, lambda st, te, t: ours_step(ours, st, te, optimizer, t))
        for b in sizes:  # train.fp32_matmul=tf32: the fp32 LoRA matmuls on the tensor cores
            variants[f"ours (no ckpt, compiled layers, tf32, micro-batch {b})"] = variant(
                b, False, lambda st, te, t: tf32_step(ours, st, te, optimizer, t))
    for name, (batch, checkpointing, step) in variants.items():
        if "compiled" in name and not is_compiled(peft_model):
            compile_decoder_layers(peft_model)
        set_checkpointing(peft_model, checkpointing)
        if device.type == "cuda":
            torch.cuda.empty_cache()
        timers = []

        def timed():
            timers.append(PhaseTimer(device))
            step(timers[-1])

        figures = measure(timed, device)
        mb = batches[batch]
        tokens = sum(mb.student_lens) + sum(mb.teacher_lens) + 2 * batch * s.completion
        flops = step_flops(s, mb.student_lens, mb.teacher_lens)
        phases = {p: statistics.median(t.seconds[p] for t in timers[1:]) for p in timers[-1].seconds}
        results[name] = figures | {"micro_batch": batch, "tokens_per_step": tokens, "phases": phases,
                                   "tokens_per_s": tokens / figures["seconds"],
                                   "mfu": flops / figures["seconds"] / H200_BF16_PEAK}
        print(f"  {name}: {figures['seconds']:.3f} s, {tokens / figures['seconds']:.0f} tok/s, "
              f"phases {({k: round(v, 3) for k, v in phases.items()})}", flush=True)
        if profiled:
            results[name]["kernels"] = kernel_profile(lambda: step(PhaseTimer(device)), rows=30,
                                                      sort_by="self_cuda_time_total")
            print(results[name]["kernels"], flush=True)
    set_checkpointing(peft_model, False)
    return results


# --- 3. rollouts ---------------------------------------------------------------------------------

def bench_rollout(s: Shapes, peft_model, device) -> dict:
    """Eager generate on the PEFT student (the naive way), the static cache on the PEFT student, and
    ours: HFRollout (static cache on a merged, LoRA-free copy of the student). Same prompts and lengths."""
    rng = random.Random(1)
    prompts = [[rng.randrange(3, s.vocab) for _ in range(s.student_prompt)] for _ in range(s.rollout_batch)]
    cfg = RolloutConfig(backend="hf", temperature=1.1, top_p=0.95, top_k=20, max_new_tokens=s.rollout_tokens,
                        gpu_memory_utilization=0.5, vllm_sleep=False)
    eos = list(peft_model.generation_config.eos_token_id)
    on_gpu = device.type == "cuda"
    ours = HFRollout(cfg, peft_model, 0, eos, static_cache=on_gpu)
    ours.update(0)
    # the baselines sample from the PEFT model itself (LoRA applied on the fly)
    variants = {"eager generate on the PEFT student (dynamic cache)": lambda seed: sample(
                    peft_model, prompts, cfg, 0, eos, seed, static_cache=False),
                "static cache on the PEFT student": lambda seed: sample(
                    peft_model, prompts, cfg, 0, eos, seed, static_cache=on_gpu),
                "ours: static cache on the merged copy": lambda seed: ours.generate(prompts, seed)}
    results = {}
    peft_model.eval()
    for name, generate in variants.items():
        started = time.perf_counter()
        generate(0)  # warm-up; the static cache compiles here
        sync(device)
        first = time.perf_counter() - started
        started = time.perf_counter()
        new_tokens = generate(1).n_tokens
        sync(device)
        seconds = time.perf_counter() - started
        results[name] = {"first_call_s": first, "seconds": seconds, "new_tokens": new_tokens,
                         "tokens_per_s": new_tokens / seconds, "ms_per_decode_step": 1e3 * seconds / s.rollout_tokens}
        print(f"  {name}: {new_tokens / seconds:.0f} tok/s ({1e3 * seconds / s.rollout_tokens:.1f} ms/step), "
              f"first call {first:.1f} s", flush=True)
    peft_model.train()
    del ours
    return results


# --- 4. full trainer steps -----------------------------------------------------------------------

def write_world(s: Shapes, model, root: Path) -> Path:
    """Model dir + tokenizer + a dataset whose rendered prompts have the recipe's lengths."""
    from opsd_sweep.random_world import text_of_length
    from opsd_sweep.tiny import build_tokenizer

    rng = random.Random(2)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 8))) for _ in range(400)]
    tokenizer = build_tokenizer([" ".join(rng.choices(words, k=50)) for _ in range(200)] + ["reference"],
                                vocab_size=min(1000, s.vocab))
    model.config.eos_token_id, model.config.pad_token_id = tokenizer.eos_token_id, tokenizer.pad_token_id
    model.generation_config.eos_token_id = [tokenizer.eos_token_id, tokenizer.pad_token_id]
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(root / "model")
    tokenizer.save_pretrained(root / "model")
    rows = []  # the chat template and the instructions add ~40 tokens to each prompt
    for i in range(32):
        problem = text_of_length(tokenizer, words, rng, s.student_prompt - 40)
        solution = text_of_length(tokenizer, words, rng, s.teacher_prompt - s.student_prompt - 40)
        rows.append({"id": str(i), "problem": problem, "solution": solution})
    (root / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


def run_trainer(s: Shapes, world: Path, work: Path, out: Path, gpus: int, tiny: bool,
                extra: list[str]) -> dict:
    from omegaconf import OmegaConf

    from opsd_sweep.config import to_dict
    from opsd_sweep.run.rundir import RunDir

    accum = 2
    overrides = [f"model.path={world / 'model'}", "model.name=random-qwen3-shape", "data=local",
                 f"data.path={world / 'train.jsonl'}", f"results_root={work}", f"train.num_gpus={gpus}",
                 f"train.per_device_batch_size={s.batch}", f"train.grad_accum_steps={accum}",
                 f"train.global_batch_size={gpus * s.batch * accum}", "train.max_steps=2", "train.save_steps=2",
                 f"train.lora.r={s.lora_r}", f"train.lora.alpha={2 * s.lora_r}", "train.gradient_checkpointing=false",
                 f"rollout.max_new_tokens={s.completion}", f"loss.chunk_size={s.chunk_size}"]
    if tiny:
        overrides += ["model.dtype=float32", "rollout.top_k=0"]
    overrides += extra
    # the basic launcher: the sweep launchers' plugins (submitit) are not needed to make one run config
    run = composed_run_config(["hydra/launcher=basic", *overrides])
    run_dir = RunDir(work / f"trainer_{gpus}gpu")
    run_dir.path.mkdir(parents=True, exist_ok=True)
    run_dir.config.write_text(OmegaConf.to_yaml(OmegaConf.create(to_dict(run))))
    module = ["-m", "opsd_sweep.train", str(run_dir.path)]
    if gpus == 1:
        command = [sys.executable, *module]
    elif tiny:  # CPU processes over gloo (accelerate launch needs MPI for that)
        command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(gpus), *module]
    else:
        command = [sys.executable, "-m", "accelerate.commands.launch", "--config_file",
                   str(REPO / "launchers/accelerate/ddp.yaml"), "--num_processes", str(gpus), *module]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]))
    if not tiny:  # the first `gpus` of the GPUs this benchmark may use
        visible = os.environ.get("CUDA_VISIBLE_DEVICES") or ",".join(map(str, range(torch.cuda.device_count())))
        env["CUDA_VISIBLE_DEVICES"] = ",".join(visible.split(",")[:gpus])
    started = time.perf_counter()
    log = out / f"trainer_{gpus}gpu.log"
    with open(log, "w") as handle:  # streamed, so a timeout still leaves the log behind
        done = subprocess.run(command, env=env, stdout=handle, stderr=subprocess.STDOUT, timeout=240)
    if done.returncode != 0:
        raise RuntimeError(f"trainer on {gpus} GPU(s) exited {done.returncode}: {log.read_text()[-2000:]}")
    lines = [json.loads(line) for line in run_dir.metrics.read_text().splitlines()]
    return {"wall_s": time.perf_counter() - started, "steps": lines}


# --- main ----------------------------------------------------------------------------------------

def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiny", action="store_true", help="tiny shapes (CPU smoke run)")
    parser.add_argument("--parts", default="loss,compute,rollout,step")
    parser.add_argument("--step-gpus", default="1,2", help="GPU counts for the full-step runs")
    parser.add_argument("--micro-batches", default="",
                        help="compute part: also time ours (no checkpointing) at these micro-batches, e.g. 8")
    parser.add_argument("--compile", action="store_true", help="compute part: also time ours with compiled layers")
    parser.add_argument("--profile", action="store_true", help="compute part: each variant's kernel table (one more step)")
    parser.add_argument("--length-spread", type=float, default=0.1,
                        help="compute part: prompt lengths drawn from [(1 - x) L, L] (0: one length, no padding)")
    parser.add_argument("--step-overrides", default="", help="extra trainer overrides for the step part, e.g. train.compile=true")
    parser.add_argument("--out", type=Path, required=True, help="results: bench_train.json and trainer logs")
    parser.add_argument("--work", type=Path, help="model, data and run dirs (default: a new temp dir)")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="bench_train_"))
    shapes = TINY if args.tiny else RECIPE
    device = torch.device("cuda" if torch.cuda.is_available() and not args.tiny else "cpu")
    dtype = torch.float32 if args.tiny else torch.bfloat16
    parts = args.parts.split(",")
    args.out.mkdir(parents=True, exist_ok=True)
    report = {"shapes": asdict(shapes), "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
              "torch": torch.__version__, "date": time.strftime("%Y-%m-%d %H:%M:%S %Z")}

    def save():
        (args.out / "bench_train.json").write_text(json.dumps(report, indent=2))

    def part(name, fn):
        if name not in parts:
            return
        print(f"== {name}", flush=True)
        started = time.perf_counter()
        try:
            report[name] = fn()
        except Exception:  # a broken part must not cost the other parts' figures
            report[name] = {"error": traceback.format_exc(limit=6)}
            print(report[name]["error"], flush=True)
        print(f"   ({time.perf_counter() - started:.1f} s)", flush=True)
        save()

    part("loss", lambda: bench_loss(shapes, device, dtype))
    if device.type == "cuda":
        torch.cuda.empty_cache()
    model = build_model(shapes, device, dtype) if {"compute", "rollout", "step"} & set(parts) else None
    world = work / "world"
    if "step" in parts:
        write_world(shapes, model, world)
    if {"compute", "rollout"} & set(parts):
        peft_model = add_lora(model, shapes.lora_r)
        micro_batches = [int(b) for b in args.micro_batches.split(",") if b]
        part("rollout", lambda: bench_rollout(shapes, peft_model, device))  # before compute compiles the layers
        part("compute", lambda: bench_compute(shapes, peft_model, device, micro_batches,
                                                             args.compile, args.profile, args.length_spread))
        del peft_model
    del model
    if device.type == "cuda":
        torch.cuda.empty_cache()
    part("step", lambda: {f"{g}gpu": run_trainer(shapes, world, work, args.out, int(g), args.tiny,
                                                      [o for o in args.step_overrides.split(",") if o])
                          for g in args.step_gpus.split(",")})
    print(json.dumps(summary(report), indent=2))


def summary(report: dict) -> dict:
    """The ratios the issue's targets are stated in."""
    out = {}
    loss = report.get("loss", {})
    if "naive_bf16" in loss:
        ours = min((v for k, v in loss.items() if k.startswith("ours_chunk")), key=lambda v: v["seconds"])
        out["loss_time_ratio"] = ours["seconds"] / loss["naive_bf16"]["seconds"]
        if "extra_peak_gb" in ours:
            out["loss_memory_ratio"] = ours["extra_peak_gb"] / loss["naive_bf16"]["extra_peak_gb"]
            out["loss_from_hidden_memory_ratio"] = (loss["ours_from_hidden"]["extra_peak_gb"]
                                                    / loss["naive_head_plus_loss"]["extra_peak_gb"])
    compute = report.get("compute", {})
    naive = compute.get("naive (ckpt, full logits, bf16 loss)")
    if naive and "tokens_per_s" in naive:
        for name, figures in compute.items():
            if name.startswith("ours") and "tokens_per_s" in figures:
                out[f"compute_speedup[{name}]"] = figures["tokens_per_s"] / naive["tokens_per_s"]
    rollout = report.get("rollout", {})
    rates = {name: v["tokens_per_s"] for name, v in rollout.items() if "tokens_per_s" in v}
    if len(rates) == 3:
        eager, peft_static, ours = rates.values()
        out["rollout_speedup"] = ours / eager
        out["rollout_speedup[static cache on the PEFT student]"] = peft_static / eager
    return out


if __name__ == "__main__":
    main()
