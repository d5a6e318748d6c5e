"""One evaluation: problems -> prompts -> shards on data-parallel engines -> grades -> eval.json.

`evaluate` is shared by the cycle's phase (`python -m opsd_sweep.evaluate RUN_DIR`, `main` below)
and the standalone mode (standalone.py). Outputs in the eval dir:
  eval.json          metrics + every sample's pred, correctness, format flag, tokens, finish reason
  completions.jsonl  every sample's text (one JSON object per line), for audits and regrading
  shards/            finished shards while the evaluation runs (removed once eval.json holds the whole plan)

With eval.checkpoints=race an evaluation may score the first m of the plan's n samples per problem
(`samples`); its shards stay, so a later round that asks for more draws only the samples it lacks.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path


from opsd_sweep.backends import prepare_vllm_process, resolve_backend
from opsd_sweep.config import RunConfig
from opsd_sweep.evaluate.datasets import Problem, load_problems
from opsd_sweep.evaluate.engine import Engine, EngineSpec, Sample, Sampling, Shard
from opsd_sweep.evaluate.regrade import CannotRegrade, regrade_file
from opsd_sweep.scoring.grade import Grade, grade_many, grader_identity
from opsd_sweep.scoring.metrics import score_fields
from opsd_sweep.evaluate.prompts import render_eval_prompts
from opsd_sweep.evaluate.runner import engine_groups, run_plan, visible_gpus
from opsd_sweep.evaluate.checkpoint_race import discard_partial, race_checkpoints, race_stages
from opsd_sweep.evaluate.merge_check import MERGED_DIR, serve_merged
from opsd_sweep.evaluate.sampling_plan import SamplingPlan, ensure_plan
from opsd_sweep.evaluate.shards import ShardStore, fingerprint, plan_shards, shards_for
from opsd_sweep.run.identity import (content_identity, engine_label, evaluator_identity, evaluator_problem,
                                    grader_problem, without_grader)
from opsd_sweep.modeling import load_tokenizer
from opsd_sweep.run.rundir import (RunDir, atomic_write_json, atomic_write_text, read_json, read_json_or_none,
                                   utc_now)
from opsd_sweep.trackers import log_eval


def resolve_weights(run: RunConfig, checkpoint: Path | None) -> tuple[str, str, str | None]:
    """(model path, tokenizer path, adapter path) for the base model, a PEFT adapter or a full model dir."""
    base = run.model.path
    if checkpoint is None:
        return base, base, None
    if (checkpoint / "adapter_config.json").exists():
        return base, base, str(checkpoint)
    if (checkpoint / "config.json").exists():
        own_tokenizer = (checkpoint / "tokenizer_config.json").exists()
        return str(checkpoint), str(checkpoint) if own_tokenizer else base, None
    raise FileNotFoundError(f"checkpoint {checkpoint} holds neither adapter_config.json (a PEFT adapter) nor "
                            "config.json (a model dir); point eval.checkpoint at one of those")


def engine_spec(run: RunConfig, checkpoint: Path | None) -> EngineSpec:
    e = run.eval
    model_path, tokenizer_path, adapter_path = resolve_weights(run, checkpoint)
    # evaluation never forces a length: min_new_tokens is 0 (benchmarks set it)
    sampling = Sampling(temperature=e.temperature, top_p=e.top_p, top_k=e.top_k,
                        max_new_tokens=e.max_new_tokens, min_new_tokens=0)
    return EngineSpec(backend=e.backend, model_path=model_path, tokenizer_path=tokenizer_path,
                      adapter_path=adapter_path, dtype=run.model.dtype,
                      attn_implementation=run.model.attn_implementation, sampling=sampling,
                      batch_size=e.batch_size, max_num_seqs=e.max_num_seqs, max_in_flight=e.max_num_seqs,
                      hf_cache=e.hf_cache,
                      tensor_parallel_size=e.tensor_parallel_size,
                      gpu_memory_utilization=e.gpu_memory_utilization, max_model_len=e.max_model_len,
                      kv_cache_dtype=e.kv_cache_dtype, seed=run.seed)


def check_fits(run: RunConfig, prompts: list[list[int]]) -> None:
    """vLLM sequences are capped at max_model_len: fail now, not after the engines started."""
    e = run.eval
    needed = max(len(p) for p in prompts) + e.max_new_tokens
    if e.backend == "vllm" and needed > e.max_model_len:
        raise ValueError(f"eval.max_model_len={e.max_model_len} is too small: the longest prompt plus "
                         f"eval.max_new_tokens={e.max_new_tokens} needs {needed}; "
                         f"set eval.max_model_len={needed}")


def merge_adapter(spec: EngineSpec, out_dir: Path) -> EngineSpec:
    """vllm with merge_lora: write base + adapter merged into one model dir (once) and serve that.

    The merge is computed in float32 and saved in the model's dtype, the dtype vLLM serves. That is
    exact only where base + update is a value of that dtype: in bf16 an update below half an ulp of
    its base weight rounds back to the base weight (lr 5e-6 x 100 steps is about one ulp), so the
    merged model can differ from the trained one; the printed line counts those weights. The default,
    merge_lora=false, serves the adapter unmerged (a LoRARequest) and keeps every update.
    """
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    marker = out_dir / "merged_from.json"
    # by content too: an adapter (or base) rewritten at the same path is merged again, never served stale
    source = {"model": spec.model_path, "adapter": spec.adapter_path,
              "model_identity": content_identity(spec.model_path), "adapter_identity": content_identity(spec.adapter_path)}
    if not (marker.exists() and read_json(marker) == source):
        print(f"[evaluate] merging {spec.adapter_path} into {spec.model_path} -> {out_dir}", flush=True)
        shutil.rmtree(out_dir, ignore_errors=True)
        dtype = getattr(torch, spec.dtype)
        model = AutoModelForCausalLM.from_pretrained(spec.model_path, dtype=torch.float32)  # exact upcast
        base = {name: weight.to(dtype, copy=True) for name, weight in model.state_dict().items()}
        merged = PeftModel.from_pretrained(model, spec.adapter_path).merge_and_unload()
        changed = lost = 0
        for name, weight in merged.state_dict().items():
            moved = weight != base[name]
            changed += int(moved.sum())
            lost += int((moved & (weight.to(dtype) == base[name])).sum())
        keeps_all = " (eval.merge_lora=false serves them all)" if lost else ""
        print(f"[evaluate] the adapter changes {changed} weights; saved in {spec.dtype}, {lost} of them "
              f"round back to the base weight{keeps_all}", flush=True)
        merged.to(dtype).save_pretrained(out_dir)
        AutoTokenizer.from_pretrained(spec.tokenizer_path).save_pretrained(out_dir)
        atomic_write_json(marker, source)
    return replace(spec, model_path=str(out_dir), tokenizer_path=str(out_dir), adapter_path=None)


def serving_choice(run: RunConfig, checkpoint: Path | None, eval_dir: Path) -> tuple[bool, dict | None]:
    """(serve merged weights?, the merge check that allows it): eval.merge_lora=true always merges, unchecked;
    else merged weights only where a passed merge check of this checkpoint is on file (merge_check.py).
    The choice and its reason are printed."""
    e = run.eval
    if e.merge_lora:
        return True, None
    merged, why, check = serve_merged(e.merge_check, e.backend, checkpoint, eval_dir, e.merge_tolerance)
    if e.backend == "vllm" and checkpoint is not None:
        print(f"[evaluate] serving: {why}", flush=True)
    return merged, check if merged else None


def drop_wrong_evaluation(eval_dir: Path, why: str) -> None:
    """An eval.json scored by an evaluator known to be wrong is never up to date, and neither are its shards: they
    were drawn by that evaluator, maybe under today's plan (an attached engine that ignored merge_lora). The shards
    go first, so a kill in between leaves the eval.json to be found wrong again."""
    print(f"[evaluate] {eval_dir / 'eval.json'}: {why}; every sample is drawn again", flush=True)
    discard_partial(eval_dir)
    (eval_dir / "eval.json").unlink()


def problem_records(problems: list[Problem], counts: list[int], samples: dict[tuple[int, int], Sample],
                    grades: list[Grade]) -> list[dict]:
    """eval.json's per-problem records (problem p with counts[p] samples); `grades` is problem-major, like the
    pairs given to the grader."""
    records, graded_so_far = [], 0
    for p, problem in enumerate(problems):
        rows = []
        for s in range(counts[p]):
            sample, graded = samples[p, s], grades[graded_so_far + s]
            rows.append({"pred": graded.pred, "correct": graded.correct, "formatted": graded.formatted,
                         "n_tokens": sample.n_tokens, "finish_reason": sample.finish_reason})
        graded_so_far += counts[p]
        records.append({"id": problem.id, "benchmark": problem.benchmark, "answer": problem.answer, "samples": rows})
    return records


def resolve_eval_backend(run: RunConfig, gpus: list[str]) -> RunConfig:
    """The run with eval.backend resolved (auto -> vllm on GPUs where installed, else hf), said once."""
    backend, why = resolve_backend(run.eval.backend, bool(gpus), "eval.backend")
    if backend == "hf" and run.eval.kv_cache_dtype != "auto":  # never score an fp8 plan in the model's dtype
        raise ValueError(f"eval.kv_cache_dtype={run.eval.kv_cache_dtype} is a vLLM option, but the evaluation "
                         f"runs on hf ({why}); evaluate on GPUs with vllm, or set eval.kv_cache_dtype=auto")
    print(f"[evaluate] backend: {backend} ({why})", flush=True)
    return replace(run, eval=replace(run.eval, backend=backend))


@dataclass
class EvalPlan:
    """What one evaluation call draws and scores, fixed before any engine starts."""

    run: RunConfig  # eval.backend resolved
    gpus: list[str]
    problems: list[Problem]
    prompts: list[list[int]]
    spec: EngineSpec
    sampling: SamplingPlan
    samples: int  # scored per problem now (a race stage, or the plan's K)
    counts: list[int]  # the samples scored now, per problem
    shards: list[Shard]  # the shards that hold them
    allocated: bool
    merge: bool  # vllm serves the checkpoint merged into the base weights
    evaluator: dict
    fingerprint: str

    @property
    def ids(self) -> list[str]:
        return [p.id for p in self.problems]


@dataclass
class Drawn:
    """The samples of a plan, and what drawing them took."""

    samples: dict[tuple[int, int], Sample]  # (problem, sample) -> its completion
    engines: int
    resumed_shards: int
    generated: int  # samples drawn in this call (the others were on disk)
    seconds: float


def evaluate(run: RunConfig, checkpoint: Path | None, eval_dir: Path,
             attach: Callable[[EngineSpec], Engine] | None = None, samples: int | None = None,
             sampling: SamplingPlan | None = None) -> dict:
    """Evaluate `checkpoint` (None: the base model) on run.eval; write eval_dir/eval.json; return it.

    `sampling`: the run's sampling plan (sampling_plan.ensure_plan: its K and, with an allocation, each problem's
    count); None: eval.n_samples of every problem, which must then be a number.
    `samples`: score the first `samples` samples per problem of the plan (a stage of eval.checkpoints=race;
    None: all of the plan's). An eval.json of the same plan with at least as many samples is returned as
    is; finished shards of an interrupted run, or of an earlier round, are kept and never drawn again.
    `attach` wraps an engine that is already running (the trainer's vLLM rollout engine) instead of
    starting new ones: it gets the spec to serve and returns the Engine, holding spec.model_path's weights
    (with eval.merge_lora=true the model dir merged here, without an adapter; else the base model and
    spec.adapter_path as a LoRARequest).
    """
    wall_started = time.monotonic()
    plan = plan_evaluation(run, checkpoint, eval_dir, sampling, samples)
    existing = earlier_evaluation(plan, checkpoint, eval_dir)
    if existing is not None and existing.get("n_samples", 0) >= plan.samples:
        if (finished := finished_evaluation(plan, existing, eval_dir)) is not None:
            return finished
        existing = None  # its samples could not be graded again: every sample is drawn again
    drawn = draw(plan, eval_dir, attach)
    started = time.monotonic()
    records = grade_samples(plan, drawn)
    earlier = (existing or {}).get("timing", {})  # an earlier round of the race: its time counts too
    timing = {"engines": drawn.engines, "engine": engine_label(attach is not None, plan.evaluator),
              "resumed_shards": drawn.resumed_shards, "total_shards": len(plan.shards),
              "generated_samples": earlier.get("generated_samples", 0) + drawn.generated,  # this plan's, all rounds
              "generation_seconds": round(earlier.get("generation_seconds", 0) + drawn.seconds, 2),
              "grading_seconds": round(earlier.get("grading_seconds", 0) + time.monotonic() - started, 2),
              "wall_seconds": round(earlier.get("wall_seconds", 0) + time.monotonic() - wall_started, 2)}
    return record_evaluation(plan, checkpoint, eval_dir, drawn, records, timing)


def finished_evaluation(plan: EvalPlan, existing: dict, eval_dir: Path) -> dict | None:
    """An eval.json that holds every sample of the plan: as it is, or graded again when another grader scored
    it (its samples are today's plan's, so grading them is enough: evaluate/regrade.py); None when it cannot be."""
    out = eval_dir / "eval.json"
    if (why := grader_problem(existing)) is None:
        print(f"[evaluate] {out} is up to date (plan {plan.fingerprint}, {existing['n_samples']} samples per "
              "problem); nothing to do", flush=True)
        return existing
    e = plan.run.eval
    try:
        regrade_file(out, e.grade_timeout, e.grade_workers)
    except CannotRegrade as err:
        print(f"[evaluate] {err}; every sample is drawn again", flush=True)
        return None
    print(f"[evaluate] {out}: {why.split(';')[0]}: graded again from completions.jsonl, the old scores kept under "
          "regraded_from", flush=True)
    return read_json(out)


def plan_evaluation(run: RunConfig, checkpoint: Path | None, eval_dir: Path, sampling: SamplingPlan | None,
                    samples: int | None) -> EvalPlan:
    """The backend, problems, prompts, engine spec and shards of this call; raises on a `samples` that is no
    stage of the plan."""
    prepare_vllm_process(run.cache_dir)
    gpus = visible_gpus()
    run = resolve_eval_backend(run, gpus)
    e = run.eval
    problems = load_problems(e)
    spec = engine_spec(run, checkpoint)
    prompts = render_eval_prompts(load_tokenizer(replace(run.model, path=spec.tokenizer_path)), e, problems)
    check_fits(run, prompts)
    ids = [p.id for p in problems]
    sampling = sampling if sampling is not None else SamplingPlan(e.n_samples)
    k = sampling.k
    counts = sampling.samples_of(ids)
    allocated = sampling.counts is not None
    samples = k if samples is None else samples
    stages = race_stages(run)
    if samples not in (*stages, k) or (allocated and samples != k):
        raise ValueError(f"samples={samples} is no stage of this plan {stages or (k,)}")
    shards = plan_shards(ids, k, e.shard_size, run.seed, stages, counts if allocated else None)
    merge, check = serving_choice(run, checkpoint, eval_dir)
    evaluator = evaluator_identity(e.backend, checkpoint, merge, e.kv_cache_dtype, check)
    fingerprinted = fingerprint(spec, evaluator, prompts, ids, k, e.shard_size, run.seed, stages,
                                counts if allocated else None)
    return EvalPlan(run, gpus, problems, prompts, spec, sampling, samples,
                    counts=counts if allocated else [samples] * len(ids),
                    shards=shards if allocated else shards_for(shards, samples), allocated=allocated,
                    merge=merge, evaluator=evaluator, fingerprint=fingerprinted)


def earlier_evaluation(plan: EvalPlan, checkpoint: Path | None, eval_dir: Path) -> dict | None:
    """eval.json when it holds this plan's samples by this evaluator (perhaps fewer: an earlier round of the
    race), else None; one by an evaluator since found wrong is dropped, a torn one is written again."""
    existing = read_json_or_none(eval_dir / "eval.json")
    wrong = evaluator_problem(existing, checkpoint, plan.merge) if isinstance(existing, dict) else None
    if wrong is not None:
        existing = drop_wrong_evaluation(eval_dir, wrong)
    same_plan = (isinstance(existing, dict) and existing.get("fingerprint") == plan.fingerprint
                 and isinstance(existing.get("evaluator"), dict)
                 and without_grader(existing["evaluator"]) == plan.evaluator)  # graded another way: regrade
    return existing if same_plan else None


def draw(plan: EvalPlan, eval_dir: Path, attach: Callable[[EngineSpec], Engine] | None) -> Drawn:
    """Draw the plan's shards that are not on disk yet (merging the adapter first where vllm serves it merged),
    and read back every shard's samples."""
    e = plan.run.eval
    groups = [plan.gpus[:1]] if attach else engine_groups(e.backend, e.tensor_parallel_size, e.engines, plan.gpus)
    store = ShardStore(eval_dir / "shards", plan.fingerprint)
    store.prepare()
    serve_spec = plan.spec
    to_draw = sum(len(shard.jobs) for shard in plan.shards if not store.done(shard.index))
    if to_draw and e.backend == "vllm" and plan.spec.adapter_path is not None and plan.merge:
        serve_spec = merge_adapter(plan.spec, eval_dir / MERGED_DIR)
    started = time.monotonic()
    resumed = run_plan(serve_spec, plan.prompts, plan.shards, store, groups, desc=f"eval {e.name}", attach=attach)
    seconds = time.monotonic() - started
    return Drawn(store.read(plan.shards), len(groups), resumed, to_draw, seconds)


def grade_samples(plan: EvalPlan, drawn: Drawn) -> list[dict]:
    """Each problem's record with its samples graded."""
    e = plan.run.eval
    pairs = [(drawn.samples[p, s].text, problem.answer) for p, problem in enumerate(plan.problems)
             for s in range(plan.counts[p])]
    grades = grade_many(pairs, e.grade_timeout, e.grade_workers)
    return problem_records(plan.problems, plan.counts, drawn.samples, grades)


def record_evaluation(plan: EvalPlan, checkpoint: Path | None, eval_dir: Path, drawn: Drawn, records: list[dict],
                      timing: dict) -> dict:
    """Write eval.json (and completions.jsonl) from the graded records; return eval.json's content."""
    run, e = plan.run, plan.run.eval
    result = {
        "dataset": e.name, "n_problems": len(plan.problems), "n_samples": plan.samples,
        "sampling": {"temperature": e.temperature, "top_p": e.top_p, "top_k": e.top_k,
                     "max_tokens": e.max_new_tokens, "thinking": e.thinking},
        "model": run.model.name, "checkpoint": str(checkpoint) if checkpoint else None, "backend": e.backend,
        "seed": run.seed, "fingerprint": plan.fingerprint, "created_at": utc_now(),
        "evaluator": plan.evaluator | {"grader": grader_identity()},  # the grader is no part of the plan (without_grader)
        "checkpoint_identity": content_identity(checkpoint) if checkpoint else None,
        "timing": timing,
        **plan.sampling.eval_record(),
        **({"samples_per_problem": dict(zip(plan.ids, plan.counts))} if plan.allocated else {}),
        # an eval suite keeps each benchmark's metrics too; its metrics (and pooled) are over all problems
        **score_fields(records, suite=e.suite is not None), "problems": records,
    }
    texts = "".join(json.dumps({"id": plan.problems[p].id, "sample": s, "text": drawn.samples[p, s].text}) + "\n"
                    for p in range(len(plan.problems)) for s in range(plan.counts[p]))
    atomic_write_text(eval_dir / "completions.jsonl", texts)
    atomic_write_json(eval_dir / "eval.json", result)
    if plan.samples == plan.sampling.k:  # the whole plan is scored: nothing is left to draw
        discard_partial(eval_dir)
    return result


def summary_line(result: dict) -> str:
    """One line of scores; an allocated evaluation's pass@k is at its smallest per-problem count (metrics.py).
    A suite's scores are over all its benchmarks' problems: the line names them all, then each one's avg@n."""
    m, n = result["metrics"], result["n_samples"]
    k = max(map(int, m["pass_at_k"]))
    suite = result.get("benchmarks") or {}
    name = f"{' + '.join(suite)} (pooled, {result['n_problems']} problems)" if suite else result["dataset"]
    each = "".join(f"; {b} avg@{n} {v['avg_at_n']:.2f}" for b, v in suite.items())
    return (f"{name}: avg@{n} {m['avg_at_n']:.2f}  pass@{k} {m['pass_at_k'][str(k)]:.2f}  "
            f"maj@{n} {m['maj_at_n']:.2f}  format {m['format_rate']:.1f}%  "
            f"truncated {m['truncation_rate']:.1f}%  mean tokens {m['mean_tokens']:.0f}{each}")


def evaluate_run(run: RunConfig, run_dir: RunDir, checkpoint: Path | None,
                 attach: Callable[[EngineSpec], Engine] | None = None) -> dict:
    """A run's evaluation: with eval.checkpoints=all each checkpoint before the final one first, into
    eval/checkpoint-<step>/ (oldest first, each resumable on its own); with eval.checkpoints=race the race
    over every checkpoint (checkpoint_race.py); then `checkpoint` with all eval.n_samples into eval/, whose
    eval.json marks the phase done. Each result goes to the trackers and the console. Every evaluation follows
    the run's sampling plan (sampling_plan.ensure_plan), fixed before its first sample."""
    plan = ensure_plan(run, run_dir)
    if run.eval.checkpoints == "race":  # a fixed uniform K: config.py refuses the race with a plan
        earlier = race_checkpoints(run, run_dir, lambda path, eval_dir, samples: evaluate(run, path, eval_dir,
                                                                                          attach, samples))
    elif run.eval.checkpoints == "all":
        earlier = {step: evaluate(run, path, run_dir.checkpoint_eval_dir(step), attach, sampling=plan)
                   for step, path in run_dir.checkpoints()[:-1]}
    else:
        earlier = {}
    for step, result in earlier.items():
        log_eval(run, run_dir, result["metrics"], step)
        print(f"checkpoint-{step} {summary_line(result)}", flush=True)
    result = evaluate(run, checkpoint, run_dir.eval_dir, attach, sampling=plan)
    log_eval(run, run_dir, result["metrics"], run.train.max_steps)
    print(summary_line(result), flush=True)
    return result


def main(run_dir: str | Path) -> dict:
    """The cycle's eval phase: evaluate the run's final checkpoint into RUN_DIR/eval/eval.json (and, with
    eval.checkpoints=all, every earlier one first)."""
    run_dir = RunDir(Path(run_dir))
    if not run_dir.config.exists():
        raise SystemExit(f"{run_dir.path}: no config.yaml. Pass a run directory written by "
                         "`python -m opsd_sweep`, or evaluate without training: "
                         "python -m opsd_sweep.evaluate model=... eval=...")
    run = run_dir.read_config()
    checkpoint = run_dir.latest_checkpoint()
    if checkpoint is None:
        if run_dir.read_status().get("kind") != "eval_only":
            raise SystemExit(f"{run_dir.path}: no complete checkpoint under {run_dir.train_dir}; train first")
        checkpoint = Path(run.eval.checkpoint) if run.eval.checkpoint else None  # a standalone eval's dir
    return evaluate_run(run, run_dir, checkpoint)
