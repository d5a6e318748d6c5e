"""What a model, data or eval path names, as it enters the run key.

A hub id is its own identity. A local file (a data or eval table) is identified by its size and the
sha256 of its bytes: moved or copied elsewhere it keeps its key, edited it gets a new one. A local
directory (a model) is identified by its absolute path plus a cheap fingerprint: every small file
(config.json, tokenizer, weight index) by content, every large file (weights) by size and mtime.
Weights are not hashed (GBs per job), and config + sizes alone would give two fine-tunes of the same
base one key; so a moved model directory gets a new key (its runs are repeated, never mixed up), and
weights rewritten in place get a new key too. Paths inside the tiny world's directory are identified
by their place in it: the tiny settings, already in the key, decide what they hold.

A checkpoint is identified by its content alone (`content_identity`: the same fingerprint without its
place), so a run dir renamed by a takeover keeps its checkpoints' identities and an adapter rewritten at
the same path gets a new one. The evaluator that scored a checkpoint is identified by its backend, how
it serves the trained model, and a version (`evaluator_identity`, EVALUATOR_VERSIONS); the grader that graded
its samples by the math-verify version and our grading rules' version (evaluate.grade.grader_identity), kept in
the same record under `grader` (`grader_problem`).
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

from opsd_sweep.scoring.grade import grader_identity

SMALL_FILE_BYTES = 64 << 20  # files up to this size are hashed whole (configs, tokenizers, data tables)


def content_identity(path: Path | str) -> str:
    """What a checkpoint (an adapter or model dir, or one file) holds, independent of where it is."""
    target = Path(path)
    if target.is_file():
        stat = target.stat()
        return f"file:{stat.st_size}:{_file_sha256(str(target), stat.st_size, stat.st_mtime_ns)}"
    if target.is_dir():
        return f"dir:{_dir_fingerprint(target)}"
    return f"missing:{target}"


def path_identity(path: str, local: bool, tiny_dir: str | None) -> str:
    """The identity of a configured path (see the module docstring); a missing local path is named as is
    (the pre-flight refuses it for real runs; simulated runs never read it)."""
    if not local:
        return f"hub:{path}"
    if tiny_dir is not None and Path(path).is_relative_to(tiny_dir):
        return f"tiny:{Path(path).relative_to(tiny_dir)}"
    target = Path(path)
    if target.is_dir():  # a model dir: its place too (see the module docstring)
        return f"dir:{target}:{_dir_fingerprint(target)}"
    return content_identity(target)


@functools.lru_cache(maxsize=256)
def _file_sha256(path: str, size: int, mtime_ns: int) -> str:
    """sha256 of a file's bytes; cached per (path, size, mtime) so a grid hashes each file once."""
    del size, mtime_ns  # cache key only
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _dir_fingerprint(root: Path) -> str:
    digest = hashlib.sha256()
    for current, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))  # .cache, .git: not the model
        for name in sorted(f for f in files if not f.startswith(".")):
            path = Path(current) / name
            stat = path.stat()
            if stat.st_size <= SMALL_FILE_BYTES:
                what = _file_sha256(str(path), stat.st_size, stat.st_mtime_ns)
            else:
                what = f"{stat.st_size}:{stat.st_mtime_ns}"
            digest.update(f"{path.relative_to(root)}={what}\n".encode())
    return digest.hexdigest()[:16]


# How the evaluator serves the model it scores -> its version. Bump a version when a change to that way
# of serving alters scores: every eval.json recorded with an older one is evaluated again from its
# checkpoint (training kept). A way of serving removed from this table counts as wrong too.
EVALUATOR_VERSIONS = {
    "base model": 1,                 # no adapter: the model dir or hub id as is
    "hf unmerged adapter": 1,        # a PeftModel, the trained model bit for bit (since 174b541)
    "vllm LoRARequest": 1,           # the adapter served unmerged by vLLM (eval or the trainer's engine)
    "vllm merge_lora": 1,            # merged in float32, saved in the model's dtype (since 174b541)
    "full model dir": 1,             # eval.checkpoint is a whole model
}


# eval.json's timing.engine when the train phase evaluated: a LoRARequest on its base weights, or (merge_lora)
# the merged checkpoint's weights loaded into it; before 2026-12-03 a merge_lora eval there served the base weights
ON_ROLLOUT_ENGINE = "the trainer's rollout engine"
ON_ROLLOUT_ENGINE_MERGED = "the trainer's rollout engine, the merged checkpoint loaded"


def engine_label(attached: bool, evaluator: dict) -> str:
    """timing.engine of an eval.json: which engine served it, and for a merged eval on the rollout engine that
    it held the merged weights (evaluator_problem tells the two apart)."""
    if not attached:
        return "own"
    return ON_ROLLOUT_ENGINE_MERGED if evaluator["serving"] == "vllm merge_lora" else ON_ROLLOUT_ENGINE


def serving(backend: str, checkpoint: Path | None, merge_lora: bool) -> str:
    """How `backend` serves `checkpoint` (None: the base model); a key of EVALUATOR_VERSIONS."""
    if checkpoint is None:
        return "base model"
    if not (Path(checkpoint) / "adapter_config.json").exists():
        return "full model dir"
    if backend == "hf":
        return "hf unmerged adapter"
    return "vllm merge_lora" if merge_lora else "vllm LoRARequest"


def evaluator_identity(backend: str, checkpoint: Path | None, merge_lora: bool, kv_cache_dtype: str = "auto",
                       merge_check: dict | None = None) -> dict:
    """The evaluator record an eval.json carries: {backend, serving, version}, kv_cache when the KV cache is not
    kept in the model's dtype (eval.kv_cache_dtype; absent otherwise, so earlier records still match), and the
    merge check that let merged weights stand in for the adapter (evaluate/merge_check.py)."""
    how = serving(backend, checkpoint, merge_lora)
    record = {"backend": backend, "serving": how, "version": EVALUATOR_VERSIONS[how]}
    if kv_cache_dtype != "auto":
        record["kv_cache"] = kv_cache_dtype
    if merge_check is not None and how == "vllm merge_lora":
        record["merge_check"] = merge_check
    return record


def evaluator_problem(evaluation: dict, checkpoint: Path | None, merge_lora: bool) -> str | None:
    """Why the scores in `evaluation` (an eval.json of `checkpoint`) come from an evaluator recorded or
    known to be wrong, or None. An eval.json written before evaluator records existed is judged by what it
    shows: before 174b541 the hf backend scored an adapter merged into bf16 weights (small updates
    rounded away) and vLLM's merge_lora merged in bf16."""
    if evaluation.get("backend") == "simulate" or evaluation.get("simulated"):
        return None
    record = evaluation.get("evaluator")
    if isinstance(record, dict) and "serving" in record:  # else regraded before records: only its grader is named
        if record.get("serving") == "vllm merge_lora" and evaluation.get("timing", {}).get("engine") == ON_ROLLOUT_ENGINE:
            return ("it was scored with eval.merge_lora=true on the trainer's rollout engine, which served the base "
                    "weights, not the merged checkpoint (before 2026-12-03)")
        failed = record.get("merge_check")
        if isinstance(failed, dict) and not failed.get("passed"):
            return (f"its merged weights failed the merge check (mean |Δ log p| {failed.get('mean_abs_diff')} > "
                    f"{failed.get('tolerance')}); it is evaluated again with the adapter as a LoRARequest")
        current = EVALUATOR_VERSIONS.get(record.get("serving"))
        if current is None or record.get("version") != current:
            return (f"its evaluator ({record.get('backend')}, {record.get('serving')}, version "
                    f"{record.get('version')}) has since been found wrong (now version {current})")
        return None
    how = serving(str(evaluation.get("backend")), checkpoint, merge_lora)
    if how == "hf unmerged adapter":
        return ("it was scored by the hf backend before it served the unmerged adapter (a bf16 merge that "
                "rounds small updates away)")
    if how == "vllm merge_lora":
        return "it was scored by vLLM merge_lora before the merge was computed in float32"
    return None


# The grader of an eval.json written before graders were recorded: a grader of its own, never today's.
UNRECORDED_GRADER = "unrecorded"
REGRADE = "python -m opsd_sweep.evaluate regrade RESULTS"  # grades stored completions again, on CPU


def without_grader(record: dict) -> dict:
    """An evaluator record as generation depends on it (the plan's fingerprint): its grader left out, so a new
    grader re-grades the samples drawn and never draws them again."""
    return {key: value for key, value in record.items() if key != "grader"}


def recorded_grader(evaluation: dict) -> dict | str:
    """The grader named in an eval.json's evaluator record, or UNRECORDED_GRADER."""
    record = evaluation.get("evaluator")
    grader = record.get("grader") if isinstance(record, dict) else None
    return grader if isinstance(grader, dict) else UNRECORDED_GRADER


def grader_label(grader: dict | str) -> str:
    """A grader in words: 'math-verify 0.8.0 + grading rules 1', or 'unrecorded (graded before ...)'."""
    if not isinstance(grader, dict):
        return f"{grader} (graded before graders were recorded)"
    return f"math-verify {grader.get('math_verify')} + grading rules {grader.get('rules')}"


def _simulated(evaluation: dict) -> bool:
    """The simulator's eval.json: its grades are drawn, no grader ever read a completion."""
    return evaluation.get("backend") == "simulate" or bool(evaluation.get("simulated"))


def grader_of(evaluation: dict) -> str:
    """The grader of an eval.json in words (runs.csv's `grader`)."""
    return "none (simulated)" if _simulated(evaluation) else grader_label(recorded_grader(evaluation))


def grader_problem(evaluation: dict) -> str | None:
    """Why the grades in `evaluation` (an eval.json) are not today's grader's, naming both graders and the fix;
    None when they are, or when nothing graded it (a simulated run). The one rule for it: a run graded another
    way enters no statistic (run.record.RunRecord.left_out), so no metric pools two graders. The fix needs no
    GPU: the stored completions are graded again (evaluate/regrade.py); a rerun of the sweep draws nothing."""
    if _simulated(evaluation):
        return None
    recorded, today = recorded_grader(evaluation), grader_identity()
    if recorded == today:
        return None
    return (f"graded by {grader_label(recorded)}, not by today's grader ({grader_label(today)}); "
            f"grade its stored completions again without a GPU: {REGRADE}")


def evaluation_problem(evaluation: dict, checkpoint: Path | None, merge_lora: bool,
                       n_samples: int | None = None) -> str | None:
    """Why an eval.json does not hold today's scores of `checkpoint`: its evaluator is wrong
    (evaluator_problem), it scored fewer samples per problem than `n_samples` (a round of
    eval.checkpoints=race, not the whole evaluation), or it scored other weights than the checkpoint holds
    now. None: it does."""
    wrong = evaluator_problem(evaluation, checkpoint, merge_lora)
    if wrong is None and n_samples is not None and evaluation.get("n_samples") != n_samples:
        wrong = (f"it holds {evaluation.get('n_samples')} samples per problem, not eval.n_samples={n_samples} "
                 "(a round of eval.checkpoints=race)")
    if wrong is not None or checkpoint is None:
        return wrong
    recorded = evaluation.get("checkpoint_identity")
    if recorded is not None:
        return None if recorded == content_identity(checkpoint) else f"{checkpoint.name} was rewritten since"
    scored = evaluation.get("checkpoint")  # written before identities: the same checkpoint by name
    return None if scored and Path(scored).name == checkpoint.name else f"it scored {scored}, not {checkpoint.name}"
