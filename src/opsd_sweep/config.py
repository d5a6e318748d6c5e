"""Typed run config: the schema every part reads, and the validation that runs before any compute.

The values live in conf/ (YAML); these dataclasses carry types only. `load_run_config` turns a
composed Hydra config into a validated `RunConfig` or raises one `ConfigError` listing every problem
with the key, the bad value and the fix.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from omegaconf import MISSING, DictConfig, OmegaConf

from opsd_sweep import CONF_DIR
from opsd_sweep.backends import BACKENDS


class ConfigError(ValueError):
    """A run config that cannot run; the message lists every problem and its fix."""


@dataclass
class ModelConfig:
    name: str = MISSING  # identity in run keys and tables
    path: str = MISSING  # hub id or local directory
    dtype: str = MISSING
    attn_implementation: str = MISSING


@dataclass
class DataConfig:
    name: str = MISSING
    path: str = MISSING
    split: str = MISSING
    problem_field: str = MISSING
    solution_field: str = MISSING
    max_problems: Optional[int] = MISSING


@dataclass
class LoraConfig:
    r: int = MISSING
    alpha: int = MISSING
    dropout: float = MISSING
    target_modules: list[str] = MISSING


@dataclass
class CollapseConfig:
    """The collapse rule (opsd_sweep.run.collapse): the band of a run's first early_steps steps."""
    early_steps: int = MISSING   # steps that set the band
    patience: int = MISSING      # consecutive out-of-band steps that make a collapse
    kl_ratio: float = MISSING    # kl_true above kl_ratio x the early steps' largest
    length_band: float = MISSING  # rollout_len further than this share from the early mean
    cap_rise: float = MISSING    # rollout_cap_frac above the early mean + cap_rise


@dataclass
class TrainConfig:
    num_gpus: int = MISSING
    per_device_batch_size: int = MISSING
    grad_accum_steps: int = MISSING
    global_batch_size: int = MISSING
    max_steps: int = MISSING
    save_steps: int = MISSING
    lr_scheduler: str = MISSING
    warmup_ratio: float = MISSING
    weight_decay: float = MISSING
    max_grad_norm: float = MISSING
    gradient_checkpointing: bool = MISSING
    compile: bool = MISSING  # torch.compile each decoder layer, on GPU only (fuses the element-wise work)
    fp32_matmul: str = MISSING  # tf32 | ieee: how CUDA runs fp32 matmuls in training (the LoRA adapter's, train/precision.py)
    strategy: str = MISSING  # ddp | fsdp: how num_gpus > 1 processes hold the model (launchers/accelerate/)
    teacher: str = MISSING     # fixed | ema | student (opsd_sweep.train.teacher)
    ema_decay: float = MISSING  # teacher=ema: ema <- decay * ema + (1 - decay) * weights per optimizer step
    report_to: str = MISSING    # none | tensorboard | wandb (opsd_sweep.trackers)
    wandb_project: str = MISSING  # report_to=wandb: the W&B project
    stop_on_collapse: bool = MISSING  # stop a run at its collapse (state collapsed, no evaluation)
    profile_step: Optional[int] = MISSING  # profile this step: train/profile_step<N>.txt (opsd_sweep.train.profiling)
    collapse: CollapseConfig = field(default_factory=CollapseConfig)
    lora: LoraConfig = field(default_factory=LoraConfig)
    student_thinking: bool = MISSING
    teacher_thinking: bool = MISSING
    student_prompt: str = MISSING
    teacher_prompt: str = MISSING


@dataclass
class RolloutConfig:
    backend: str = MISSING
    temperature: float = MISSING
    top_p: float = MISSING
    top_k: int = MISSING
    max_new_tokens: int = MISSING
    gpu_memory_utilization: float = MISSING  # vllm, eval.engine=rollout: share of the GPU for the engine
    vllm_sleep: Optional[bool] = MISSING     # vllm: free the engine's memory during the training step (null = auto)
    kv_cache_dtype: str = MISSING            # vllm: auto (the model's dtype) | fp8: changes the samples, in the key


@dataclass
class LossConfig:
    beta: float = MISSING
    clip_mode: str = MISSING
    temperature: float = MISSING
    chunk_size: int = MISSING  # completion tokens per fp32 chunk of the loss (memory, not maths)


@dataclass
class BenchmarkConfig:
    """One dataset of an eval suite (eval.suite.<name>, conf/eval/benchmark/)."""
    name: str = MISSING
    path: str = MISSING
    split: str = MISSING
    problem_field: str = MISSING
    answer_field: str = MISSING
    id_field: Optional[str] = MISSING


@dataclass
class CheckpointRaceConfig:
    """eval.checkpoints=race (opsd_sweep.evaluate.checkpoint_race): samples per problem in rounds."""
    first_samples: int = MISSING      # every checkpoint's first round
    samples_per_round: int = MISSING  # added to each checkpoint still plausibly best, up to eval.n_samples
    alpha: float = MISSING            # Holm level of "worse than the round's best" that stops a checkpoint


@dataclass
class AutoKConfig:
    """eval.n_samples=auto (opsd_sweep.evaluate.sampling_plan): each run's K from the sweep's own runs."""
    first: int = MISSING     # K of the sweep's first runs, before the pool can price K
    low: int = MISSING       # the cost-optimal K is held to [low, high]
    high: int = MISSING
    min_runs: int = MISSING  # finished runs with per-phase GPU-hours the pool needs before it prices K


@dataclass
class EvalConfig:
    name: str = MISSING
    path: str = MISSING
    split: str = MISSING
    problem_field: str = MISSING
    answer_field: str = MISSING
    n_samples: Any = MISSING                 # K samples per problem (an int >= 1), or "auto" (eval.auto_k)
    auto_k: AutoKConfig = field(default_factory=AutoKConfig)
    allocation: str = MISSING                # uniform | neyman (per-problem counts from a pilot: sampling_plan.py)
    allocation_floor: int = MISSING          # allocation=neyman: the fewest samples any problem gets
    temperature: float = MISSING
    top_p: float = MISSING
    top_k: int = MISSING
    max_new_tokens: int = MISSING
    thinking: bool = MISSING
    backend: str = MISSING
    batch_size: int = MISSING                # hf: sequences per generate call
    max_num_seqs: int = MISSING              # vllm: sequences one engine decodes at once
    max_problems: Optional[int] = MISSING
    prompt: str = MISSING
    id_field: Optional[str] = MISSING        # null = row position
    suite: Optional[dict[str, BenchmarkConfig]] = MISSING  # benchmarks evaluated together (null = the one above)
    checkpoints: str = MISSING               # final | all (every saved checkpoint, each its own eval) | race
    checkpoint_race: CheckpointRaceConfig = field(default_factory=CheckpointRaceConfig)
    average_last: int = MISSING              # checkpoints=all: the report's mean over each run's last k
    checkpoint: Optional[str] = MISSING      # standalone mode: adapter or model dir (null = base model)
    shard_size: int = MISSING                # samples per resumable shard file
    engines: Optional[int] = MISSING         # data-parallel engines (null = one per GPU group)
    tensor_parallel_size: int = MISSING      # vllm: GPUs per engine
    gpu_memory_utilization: float = MISSING  # vllm
    max_model_len: int = MISSING             # vllm: prompt + completion tokens per sequence
    merge_lora: bool = MISSING               # vllm: always serve merged weights, unchecked (another experiment)
    merge_check: bool = MISSING              # vllm: serve merged weights where the end-of-training check passed
    merge_tolerance: float = MISSING         # merge_check: largest mean |Δ log p| (nats) merged vs LoRARequest
    engine: str = MISSING                    # 1-GPU vllm cycle: own (sized to the GPU after training) | rollout
    kv_cache_dtype: str = MISSING            # vllm: auto (the model's dtype) | fp8: an evaluator option, in the key
    hf_cache: str = MISSING                  # hf: dynamic | static (static = compiled decode on GPU)
    grade_timeout: int = MISSING             # seconds per math-verify parse / verify call
    grade_workers: int = MISSING             # 0 = grade in the main thread, else a process pool


@dataclass
class AnchorConfig:
    """A published result of the recipe to orient by (conf/anchor/): not the in-sweep baseline, which is
    one of the sweep's own configs (summary --baseline, hydra.sweeper.baseline)."""
    label: str = MISSING
    metric: str = MISSING
    mean: float = MISSING
    sd: float = MISSING
    n: int = MISSING
    note: str = MISSING  # where it comes from and how far to trust it (printed with the anchor)


@dataclass
class WarmStartConfig:
    """The tiny world's supervised warm start (see opsd_sweep.warm_start)."""
    steps: int = MISSING
    batch_size: int = MISSING
    learning_rate: float = MISSING
    slip_rate: float = MISSING  # share of student-view examples solved left to right, (a + b) * c
    student_prompt: str = MISSING
    teacher_prompt: str = MISSING
    student_thinking: bool = MISSING
    teacher_thinking: bool = MISSING


@dataclass
class TinyConfig:
    dir: str = MISSING
    seed: int = MISSING
    hidden_size: int = MISSING
    num_layers: int = MISSING
    num_heads: int = MISSING
    num_kv_heads: int = MISSING
    head_dim: int = MISSING
    intermediate_size: int = MISSING
    vocab_size: int = MISSING
    n_train: int = MISSING
    n_eval: int = MISSING
    warm_start: WarmStartConfig = field(default_factory=WarmStartConfig)


@dataclass
class SimulateOffset:
    key: str = MISSING  # dotted config key, e.g. clip or loss.beta
    value: Any = MISSING  # the knob value that gets the offset
    points: float = MISSING  # added to the true score (percent points)


@dataclass
class SimulateConfig:
    """Noise model of executor=simulate (see opsd_sweep.simulate)."""
    base_score: float = MISSING
    lr_peak: float = MISSING
    lr_curvature: float = MISSING
    offsets: list[SimulateOffset] = MISSING
    train_seed_sd: float = MISSING
    n_problems: int = MISSING
    difficulty_sd: float = MISSING
    problem_seed: int = MISSING
    noise_seed: int = MISSING
    gpu_hours_per_run: float = MISSING
    train_gpu_hours: Optional[float] = MISSING  # null: gpu_hours_per_run, unsplit; else per phase (simulate.py)


@dataclass
class RunConfig:
    seed: int = MISSING
    learning_rate: float = MISSING
    clip: Optional[float] = MISSING
    loss_top_k: Optional[int] = MISSING
    results_root: str = MISSING
    group: str = MISSING
    cache_dir: str = MISSING
    force: bool = MISSING
    rerun_failed: bool = MISSING
    executor: str = MISSING
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    anchor: AnchorConfig = field(default_factory=AnchorConfig)
    tiny: Optional[TinyConfig] = None
    simulate: SimulateConfig = field(default_factory=SimulateConfig)


KV_CACHE_DTYPES = ("auto", "fp8")  # eval. / rollout.kv_cache_dtype: vLLM's kv_cache_dtype ("fp8" = e4m3)
FP32_MATMUL = ("tf32", "ieee")  # opsd_sweep.train.precision
TEACHERS = ("fixed", "ema", "student")  # opsd_sweep.train.teacher
REPORT_TO = ("none", "tensorboard", "wandb")  # opsd_sweep.trackers
STRATEGIES = ("ddp", "fsdp")  # launchers/accelerate/<strategy>.yaml, passed by the cycle to accelerate launch
EVAL_CHECKPOINTS = ("final", "all", "race")
ALLOCATIONS = ("uniform", "neyman")  # eval.allocation (opsd_sweep.evaluate.sampling_plan)
AUTO = "auto"  # eval.n_samples=auto
SEED_RANGE = (0, 2**32 - 1)  # numpy's and torch's seeds: anything else fails inside the run, after its dir exists

CHOICES = {
    "model.dtype": ("bfloat16", "float32", "float16"),
    "model.attn_implementation": ("sdpa", "eager", "flash_attention_2"),
    "train.lr_scheduler": ("constant", "linear", "cosine"),
    "train.fp32_matmul": FP32_MATMUL,
    "rollout.backend": BACKENDS,
    "loss.clip_mode": ("none", "elementwise", "per_token"),
    "eval.backend": BACKENDS,
    "eval.hf_cache": ("dynamic", "static"),
    "eval.kv_cache_dtype": KV_CACHE_DTYPES,
    "eval.engine": ("own", "rollout"),
    "rollout.kv_cache_dtype": KV_CACHE_DTYPES,
    "executor": ("real", "simulate"),
}


# --- sections renamed since runs existed (run/added.py upgrades saved configs with this table) ---

@dataclass(frozen=True)
class Renamed:
    new: str  # the section's name today
    what: str  # what it holds, for the error that names the new place


RENAMED = {
    # "baseline" now means the in-sweep baseline only (summary --baseline, hydra.sweeper.baseline)
    "baseline": Renamed("anchor", "the published anchor (config group conf/anchor/)"),
}


def renamed_key_problem(written: str) -> str | None:
    """The fix for a config key or an override (`key=value`) under a section's old name, None when the name
    is current: 'baseline.mean=40' -> write 'anchor.mean=40'."""
    head = written.lstrip("+~").split("=", 1)[0].split(".", 1)[0]
    if head not in RENAMED:
        return None
    new = RENAMED[head].new
    return (f"'{written}': {RENAMED[head].what} is now called '{new}', not '{head}'; write "
            f"'{written.replace(head, new, 1)}' ('{new}:' in your own config)")



def load_run_config(cfg: DictConfig | dict,
                    more_checks: tuple[Callable[[RunConfig], list[str]], ...] = ()) -> RunConfig:
    """Resolve, type-check and validate a composed config; raise ConfigError listing every problem (those
    of `more_checks` too: the loaders pass the tiny world's settings check, tiny.tiny_problems, and the
    pre-flight of the files it names)."""
    container = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else cfg
    container = {k: v for k, v in container.items() if k != "hydra"}
    if renamed := [problem for key in container if (problem := renamed_key_problem(key)) is not None]:
        raise ConfigError("invalid config:\n  - config key " + "\n  - config key ".join(renamed))
    try:
        typed = OmegaConf.merge(OmegaConf.structured(RunConfig), container)
        run = OmegaConf.to_object(typed)
    except Exception as err:  # omegaconf's errors name the key; keep them, add where to fix it
        raise ConfigError(f"invalid config: {err}\nFix the override or the YAML under conf/.") from err
    _make_paths_absolute(run)
    problems = (validate(run) + profile_override_problems(run)
                + [problem for check in more_checks for problem in check(run)])
    if problems:
        raise ConfigError("invalid run config:\n  - " + "\n  - ".join(problems))
    return run


def profile_override_problems(run: RunConfig) -> list[str]:
    """A config group chosen on the command line (eval=aime24) whose section the chosen profile then sets by
    value (profile=tiny writes eval: after the eval group): the user's choice would be silently replaced, under
    the key of what the profile set. Only a Hydra job knows its overrides; elsewhere there is nothing to check.
    The profile's own `override /group:` lines (loss) yield to the command line, so they are no problem."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return []
    hydra = HydraConfig.get()
    profile = hydra.runtime.choices.get("profile")
    if profile is None:
        return []
    return overridden_choices(profile, list(hydra.overrides.task), run)


def overridden_choices(profile: str, overrides: list[str], run: RunConfig) -> list[str]:
    """The problem of each group choice in `overrides` that conf/profile/<profile>.yaml sets by value."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    set_by_profile = set(OmegaConf.load(CONF_DIR / "profile" / f"{profile}.yaml")) - {"defaults"}
    groups = {folder.name for folder in CONF_DIR.iterdir() if folder.is_dir()}
    problems = []
    for override in OverridesParser.create().parse_overrides(overrides):
        group = override.key_or_group
        if group in groups & set_by_profile and not override.is_delete():
            chosen, used = override.get_value_element_as_str(), getattr(run, group).name
            problems.append(f"{group}={chosen} is replaced by profile={profile}, which sets {group} itself "
                            f"({group}.name={used}): the run would use {used}, not {chosen}. Drop {group}={chosen} "
                            f"to use the profile's {group} (change single keys as {group}.<key>=...), or drop "
                            f"profile={profile} to use {group}={chosen}")
    return problems


def _make_paths_absolute(run: RunConfig) -> None:
    """Phases run in other processes (and other directories): every local path must be absolute."""
    run.results_root = str(Path(run.results_root).expanduser().absolute())
    run.cache_dir = str(Path(run.cache_dir).expanduser().absolute())
    if run.tiny is not None:
        run.tiny.dir = str(Path(run.tiny.dir).expanduser().absolute())
    for section in (run.model, run.data, run.eval, *(run.eval.suite or {}).values()):
        if is_local_path(section.path):
            section.path = str(Path(section.path).expanduser().absolute())


def is_local_path(path: str) -> bool:
    """A hub id looks like 'org/name'; anything else that names a file or starts like a path is local."""
    return path.startswith(("/", ".", "~")) or os.path.exists(path) or Path(path).suffix in (".jsonl", ".parquet", ".json")


def validate(run: RunConfig) -> list[str]:
    """Every problem with the run config, each naming the key, the value and the fix."""
    return (_run_problems(run) + _train_problems(run) + _rollout_problems(run) + _loss_problems(run)
            + _eval_problems(run) + _anchor_and_simulate_problems(run))


def _unmet(checks: list[tuple[bool, str]]) -> list[str]:
    """The message of every check that does not hold, in order."""
    return [message for ok, message in checks if not ok]


def _run_problems(run: RunConfig) -> list[str]:
    """The top-level keys: choices, learning rate, seeds, problem counts, the group folder, clip."""
    problems = [f"{key}={get_dotted(run, key)!r} is not one of {list(allowed)}"
                for key, allowed in CHOICES.items() if get_dotted(run, key) not in allowed]
    problems += _unmet([(run.learning_rate > 0,
                         f"learning_rate={run.learning_rate} must be > 0 (e.g. learning_rate=5e-6)")])
    problems += seed_problems("seed", run.seed, example=1)
    if run.tiny is not None:  # seeds the tiny world's split, model init and warm start, before the run starts
        problems += seed_problems("tiny.seed", run.tiny.seed, example=0)
    group, step = Path(run.group), run.train.profile_step
    return problems + _unmet([
        *((limit is None or limit >= 1, f"{key}={limit} must be >= 1 (the first N problems) or null (all of them); "
                                         f"e.g. {key}=8 or {key}=null")
          for key, limit in (("data.max_problems", run.data.max_problems),
                             ("eval.max_problems", run.eval.max_problems))),
        (run.group not in ("", ".") and not group.is_absolute() and ".." not in group.parts,
         f"group={run.group!r} must name a folder inside results_root ({run.results_root}): a relative path "
         "without '..' (e.g. group=lr_sweep); to write elsewhere, set results_root"),
        (step is None or 1 <= step <= run.train.max_steps,
         f"train.profile_step={step} must be a step of the run, 1..train.max_steps={run.train.max_steps}, or null"),
        (run.clip is None or run.clip >= 0, f"clip={run.clip} must be >= 0 or null (e.g. clip=0.05)"),
    ])


def _train_problems(run: RunConfig) -> list[str]:
    """train.*: the batch arithmetic, the schedule, the teacher, the strategy, the collapse rule, LoRA, prompts."""
    t = run.train
    world = max(t.num_gpus, 1)
    problems = _unmet([
        (t.num_gpus >= 0, f"train.num_gpus={t.num_gpus} must be >= 0 (0 = CPU)"),
        *((getattr(t, key) >= 1, f"train.{key}={getattr(t, key)} must be >= 1")
          for key in ("per_device_batch_size", "grad_accum_steps", "global_batch_size", "save_steps")),
        (t.max_steps >= 0, f"train.max_steps={t.max_steps} must be >= 0 (0 = the untrained base model, e.g. as "
                           "the baseline of a standalone evaluation: python -m opsd_sweep.evaluate train.max_steps=0)"),
        (world * t.per_device_batch_size * t.grad_accum_steps == t.global_batch_size,
         f"train.global_batch_size={t.global_batch_size} != GPUs {world} x per_device_batch_size "
         f"{t.per_device_batch_size} x grad_accum_steps {t.grad_accum_steps} = "
         f"{world * t.per_device_batch_size * t.grad_accum_steps}; change one of them so they agree"),
        (0 <= t.warmup_ratio < 1, f"train.warmup_ratio={t.warmup_ratio} must be in [0, 1)"),
        (t.max_grad_norm > 0, f"train.max_grad_norm={t.max_grad_norm} must be > 0"),
        (t.teacher in TEACHERS, f"train.teacher={t.teacher!r} is not one of {list(TEACHERS)}"),
        (0 <= t.ema_decay <= 1, f"train.ema_decay={t.ema_decay} must be in [0, 1] (1 = the fixed teacher, 0 = the "
                                "student teacher)"),
    ])
    problems += _check_strategy(run)
    c = t.collapse
    problems += _unmet([
        (t.report_to in REPORT_TO, f"train.report_to={t.report_to!r} is not one of {list(REPORT_TO)}"),
        (c.early_steps >= 1 and c.patience >= 1, f"train.collapse.early_steps={c.early_steps} and "
                                                  f"train.collapse.patience={c.patience} must be >= 1"),
        (c.kl_ratio > 1,
         f"train.collapse.kl_ratio={c.kl_ratio} must be > 1 (a multiple of the early steps' largest KL)"),
        (c.length_band > 0 and c.cap_rise > 0, f"train.collapse.length_band={c.length_band} and "
                                                f"train.collapse.cap_rise={c.cap_rise} must be > 0"),
        (t.lora.r >= 1, f"train.lora.r={t.lora.r} must be >= 1"),
        (0 <= t.lora.dropout < 1, f"train.lora.dropout={t.lora.dropout} must be in [0, 1)"),
    ])
    for key, template, fields in (("train.student_prompt", t.student_prompt, ("problem",)),
                                  ("train.teacher_prompt", t.teacher_prompt, ("problem", "solution")),
                                  ("eval.prompt", run.eval.prompt, ("problem",))):
        problems += template_problems(key, template, fields)
    return problems


def _rollout_problems(run: RunConfig) -> list[str]:
    r = run.rollout
    return _unmet([
        (r.temperature > 0, f"rollout.temperature={r.temperature} must be > 0"),
        (0 < r.top_p <= 1, f"rollout.top_p={r.top_p} must be in (0, 1]"),
        (r.max_new_tokens >= 1, f"rollout.max_new_tokens={r.max_new_tokens} must be >= 1"),
        (0 < r.gpu_memory_utilization < 1,
         f"rollout.gpu_memory_utilization={r.gpu_memory_utilization} must be in (0, 1) (the trainer needs the rest)"),
    ])


def _loss_problems(run: RunConfig) -> list[str]:
    lo = run.loss
    return _unmet([
        (0.0 <= lo.beta <= 1.0, f"loss.beta={lo.beta} must be in [0, 1] (0 = forward KL, 1 = reverse KL)"),
        (lo.temperature > 0, f"loss.temperature={lo.temperature} must be > 0"),
        (lo.chunk_size >= 1, f"loss.chunk_size={lo.chunk_size} must be >= 1 (e.g. loss.chunk_size=256)"),
        (lo.clip_mode == "none" or (run.clip is not None and run.clip > 0),
         f"clip={run.clip} must be > 0 with loss.clip_mode={lo.clip_mode} (or set loss.clip_mode=none)"),
        (run.loss_top_k is None or run.loss_top_k >= 1, f"loss_top_k={run.loss_top_k} must be >= 1 or null"),
    ])


def _eval_problems(run: RunConfig) -> list[str]:
    """eval.*: the sampling plan, checkpoints and their race, sampling, engines, merging, grading; and the
    vLLM-only options of both engines."""
    e = run.eval
    problems = _check_sampling_plan(e)
    problems += _unmet([
        (e.checkpoints in EVAL_CHECKPOINTS,
         f"eval.checkpoints={e.checkpoints!r} is not one of {list(EVAL_CHECKPOINTS)}"),
        (e.average_last >= 1, f"eval.average_last={e.average_last} must be >= 1"),
    ])
    problems += _check_checkpoint_race(e)
    return problems + _unmet([
        (e.temperature >= 0, f"eval.temperature={e.temperature} must be >= 0"),
        (0 < e.top_p <= 1, f"eval.top_p={e.top_p} must be in (0, 1]"),
        (e.max_new_tokens >= 1, f"eval.max_new_tokens={e.max_new_tokens} must be >= 1"),
        (e.batch_size >= 1, f"eval.batch_size={e.batch_size} must be >= 1"),
        (e.max_num_seqs >= 1, f"eval.max_num_seqs={e.max_num_seqs} must be >= 1"),
        *((backend != "vllm" or run.train.num_gpus > 0,
           f"{key}=vllm needs GPUs but train.num_gpus=0 (CPU); use {key}=auto or {key}=hf")
          for key, backend in (("rollout.backend", run.rollout.backend), ("eval.backend", e.backend))),
        (e.shard_size >= 1, f"eval.shard_size={e.shard_size} must be >= 1"),
        (e.engines is None or e.engines >= 1, f"eval.engines={e.engines} must be >= 1 or null (one per GPU group)"),
        (e.tensor_parallel_size >= 1, f"eval.tensor_parallel_size={e.tensor_parallel_size} must be >= 1"),
        (0 < e.gpu_memory_utilization <= 1,
         f"eval.gpu_memory_utilization={e.gpu_memory_utilization} must be in (0, 1]"),
        (e.merge_tolerance > 0, f"eval.merge_tolerance={e.merge_tolerance} must be > 0 nats (0.02 is the default)"),
        (e.backend != "vllm" or e.max_model_len > e.max_new_tokens,
         f"eval.max_model_len={e.max_model_len} must exceed eval.max_new_tokens={e.max_new_tokens} by the prompt "
         "length (e.g. eval.max_model_len=40960 for 38912 new tokens)"),
        (run.rollout.kv_cache_dtype == "auto" or run.rollout.backend != "hf",
         f"rollout.kv_cache_dtype={run.rollout.kv_cache_dtype} is a vLLM option: set rollout.backend=vllm or "
         "rollout.kv_cache_dtype=auto"),
        (e.kv_cache_dtype == "auto" or e.backend != "hf",
         f"eval.kv_cache_dtype={e.kv_cache_dtype} is a vLLM option: set eval.backend=vllm or eval.kv_cache_dtype=auto"),
        (e.grade_timeout >= 1, f"eval.grade_timeout={e.grade_timeout} must be >= 1 second"),
        (e.grade_workers >= 0, f"eval.grade_workers={e.grade_workers} must be >= 0 (0 = main thread)"),
    ])


def _anchor_and_simulate_problems(run: RunConfig) -> list[str]:
    problems = _unmet([(run.anchor.n >= 1 and run.anchor.sd >= 0,
                        f"anchor.n={run.anchor.n} must be >= 1 and anchor.sd={run.anchor.sd} >= 0 (conf/anchor/)")])
    if run.executor != "simulate":
        return problems
    sm = run.simulate
    return problems + _unmet([
        (0 < sm.base_score < 100, f"simulate.base_score={sm.base_score} must be in (0, 100) (percent)"),
        (sm.lr_peak > 0, f"simulate.lr_peak={sm.lr_peak} must be > 0"),
        (sm.train_seed_sd >= 0 and sm.difficulty_sd >= 0,
         "simulate.train_seed_sd and simulate.difficulty_sd must be >= 0"),
        (sm.n_problems >= 1, f"simulate.n_problems={sm.n_problems} must be >= 1"),
        (sm.train_gpu_hours is None or sm.train_gpu_hours > 0,
         f"simulate.train_gpu_hours={sm.train_gpu_hours} must be > 0 (e.g. 0.15: 9 GPU-minutes) or null"),
    ])


def seed_problems(key: str, seed: int, example: int) -> list[str]:
    """A seed numpy and torch take: in SEED_RANGE (outside it they fail inside the run, after its dir exists)."""
    if SEED_RANGE[0] <= seed <= SEED_RANGE[1]:
        return []
    return [f"{key}={seed} must be in [{SEED_RANGE[0]}, {SEED_RANGE[1]}] (numpy's and torch's seed range), "
            f"e.g. {key}={example}"]


def _check_strategy(run: RunConfig) -> list[str]:
    """FSDP shards the weights over the training processes: it needs several, a rollout engine that does not
    need every rank's full weights (vllm), and a teacher that is no extra unsharded copy."""
    t = run.train
    if t.strategy not in STRATEGIES:
        return [f"train.strategy={t.strategy!r} is not one of {list(STRATEGIES)}"]
    if t.strategy != "fsdp":
        return []
    problems = []
    if t.num_gpus < 2:
        problems.append(f"train.strategy=fsdp shards the model over processes, but train.num_gpus={t.num_gpus} runs "
                        "one; use train.num_gpus >= 2 or train.strategy=ddp")
    if run.rollout.backend == "hf":  # `auto` without vllm installed: the pre-flight says so (preflight.py)
        problems.append("train.strategy=fsdp needs rollout.backend=vllm (got 'hf'): HF generate needs every rank's "
                        "full weights; use train.strategy=ddp or rollout.backend=vllm")
    if t.teacher == "ema":
        problems.append("train.strategy=fsdp with train.teacher=ema: the EMA copy of the LoRA weights is not "
                        "sharded; use train.teacher=fixed or train.strategy=ddp")
    return problems


def is_sample_count(value: Any) -> bool:
    """A declared K: a whole number >= 1 (not a bool, not a float)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def collapsed_score_problems(key: str, score: Optional[float], metric: str,
                             bounds: Optional[tuple[float, float]]) -> list[str]:
    """A run stopped at its collapse enters the statistics at `score` (summary --collapsed-score,
    hydra.sweeper.collapsed_score), so it must be a score a run could get: finite, and within `bounds` (a percent
    metric's [0, 100]; None: unbounded). 150 on a percent score would rank a collapsing config above every other."""
    if score is None:
        return []
    fix = f"e.g. {key}=0 (a collapsed run solves nothing), or null (such runs have no score)"
    if not math.isfinite(score):
        return [f"{key}={score} must be a finite score; use {fix}"]
    if bounds is not None and not bounds[0] <= score <= bounds[1]:
        low, high = bounds
        return [f"{key}={score:g} is outside [{low:g}, {high:g}], the possible scores of {metric}; use {fix}"]
    return []


def _check_sampling_plan(e: EvalConfig) -> list[str]:
    """eval.n_samples is a K or auto (with sane auto_k bounds); eval.allocation is known, its floor >= 1; the
    checkpoint race draws its rounds from a fixed uniform K, so it takes neither option."""
    problems = []
    if not (is_sample_count(e.n_samples) or e.n_samples == AUTO):
        problems.append(f"eval.n_samples={e.n_samples!r} must be a whole number >= 1 (e.g. eval.n_samples=12) or "
                        f"{AUTO} (each run's K from the sweep's own runs, bounded by eval.auto_k)")
    a = e.auto_k
    if e.n_samples == AUTO:
        if not 1 <= a.low <= a.high:
            problems.append(f"eval.auto_k.low={a.low} and eval.auto_k.high={a.high} must satisfy 1 <= low <= high "
                            "(e.g. eval.auto_k.low=2 eval.auto_k.high=16)")
        if a.first < 1:
            problems.append(f"eval.auto_k.first={a.first} must be >= 1 (the K of the sweep's first runs, e.g. 4)")
        if a.min_runs < 2:
            problems.append(f"eval.auto_k.min_runs={a.min_runs} must be >= 2: the run-to-run variance needs two runs "
                            "(e.g. eval.auto_k.min_runs=4)")
    if e.allocation not in ALLOCATIONS:
        problems.append(f"eval.allocation={e.allocation!r} is not one of {list(ALLOCATIONS)} (uniform: K samples of "
                        "every problem; neyman: per-problem counts from a pilot)")
    if e.allocation_floor < 1:
        problems.append(f"eval.allocation_floor={e.allocation_floor} must be >= 1 (2 keeps every problem's own "
                        "variance estimable: eval.allocation_floor=2)")
    if e.checkpoints == "race" and (e.n_samples == AUTO or e.allocation != "uniform"):
        problems.append(f"eval.checkpoints=race with eval.n_samples={e.n_samples} eval.allocation={e.allocation}: "
                        "the race's rounds need one fixed K for every problem; set eval.n_samples to a number and "
                        "eval.allocation=uniform, or use eval.checkpoints=final")
    return problems


def _check_checkpoint_race(e: EvalConfig) -> list[str]:
    """The race's rounds must end below eval.n_samples, and its paired test needs two problems."""
    if e.checkpoints != "race" or not is_sample_count(e.n_samples):  # other K: _check_sampling_plan says so
        return []
    r, key = e.checkpoint_race, "eval.checkpoint_race"
    problems = []
    if not 1 <= r.first_samples < e.n_samples:
        problems.append(f"{key}.first_samples={r.first_samples} must be in [1, eval.n_samples={e.n_samples}): with "
                        "every sample in the first round, use eval.checkpoints=all")
    if r.samples_per_round < 1:
        problems.append(f"{key}.samples_per_round={r.samples_per_round} must be >= 1")
    if not 0 < r.alpha < 1:
        problems.append(f"{key}.alpha={r.alpha} must be in (0, 1), e.g. 0.05")
    if e.max_problems is not None and e.max_problems < 2:
        problems.append(f"eval.max_problems={e.max_problems} with eval.checkpoints=race: the race compares "
                        "checkpoints paired over problems and needs >= 2; raise it or use eval.checkpoints=all")
    return problems


def template_problems(key: str, template: str, fields: tuple[str, ...]) -> list[str]:
    """The problem of a prompt template that `str.format` cannot fill with exactly these fields (none: it can)."""
    try:
        template.format(**{name: "x" for name in fields})
    except (KeyError, IndexError, ValueError) as err:
        return [f"{key} cannot be filled with {{{', '.join(fields)}}}: {err!r}; "
                "use only these fields and write literal braces as {{ }}"]
    return []


def get_dotted(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def to_dict(run: RunConfig) -> dict:
    return dataclasses.asdict(run)


def from_dict(data: dict) -> RunConfig:
    """Rebuild a RunConfig from a saved config.yaml (already validated when it was written). A dict that
    fits the schema exactly (every field, each value of its type) is built straight into the dataclasses,
    ~100x faster than OmegaConf's merge (a status table over thousands of runs); any other goes through
    OmegaConf, which converts what it can and names the key it cannot."""
    try:
        return _built(RunConfig, data)
    except _DoesNotFit:
        return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(RunConfig), data))


class _DoesNotFit(Exception):
    """A saved value that is not exactly of its field's type (OmegaConf decides what to make of it)."""


def _built(kind: Any, value: Any) -> Any:
    """`value` as the typed `kind` (a dataclass, Optional, list, dict or a scalar), or _DoesNotFit."""
    if dataclasses.is_dataclass(kind):
        if not isinstance(value, dict):
            raise _DoesNotFit(kind)
        hints = _hints(kind)
        fields = {f.name: f for f in dataclasses.fields(kind)}
        if set(value) - set(fields):
            raise _DoesNotFit(set(value) - set(fields))
        kwargs = {}
        for name, spec in fields.items():
            if name in value:
                kwargs[name] = _built(hints[name], value[name])
            elif spec.default is MISSING or (spec.default is dataclasses.MISSING
                                             and spec.default_factory is dataclasses.MISSING):
                raise _DoesNotFit(name)
        return kind(**kwargs)
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin is typing.Union:  # Optional[X]
        if value is None:
            return None
        return _built(next(a for a in args if a is not type(None)), value)
    if origin is list and isinstance(value, list):
        return [_built(args[0], item) for item in value]
    if origin is dict and isinstance(value, dict):
        return {key: _built(args[1], item) for key, item in value.items()}
    if kind is Any:
        return value
    if kind is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if kind in (int, str, bool) and type(value) is kind:
        return value
    raise _DoesNotFit(kind)


@functools.lru_cache(maxsize=None)
def _hints(kind: type) -> dict:
    return typing.get_type_hints(kind)
