"""The run key of each kind of run dir and the identities its results depend on.

A cycle (train then evaluate) is keyed by its whole semantic config (semantic_dict); a standalone
evaluation (status kind eval_only) by model, eval settings, checkpoint and seed. The inputs recorded in a
run dir's identity.json are those its key holds: a cycle's model, data and eval tables; an evaluation's
model, eval tables and checkpoint (by content).
"""

from __future__ import annotations

import hashlib
import json

from opsd_sweep.config import RunConfig, is_local_path, to_dict
from opsd_sweep.run.added import ADDED
from opsd_sweep.run.identity import content_identity, path_identity

# Fields that say where things are or how the run is launched, not what is computed: they never
# enter the run key, so moving a results folder or switching launcher never repeats a finished run.
# model.path, data.path and eval.path do enter it, as the identity of what they name (run/identity.py).
NON_SEMANTIC_FIELDS = ("results_root", "group", "cache_dir", "force", "rerun_failed", "anchor")
NON_SEMANTIC_SUBFIELDS = {"eval": ("batch_size", "max_num_seqs", "backend", "shard_size", "engines", "tensor_parallel_size",
                                   "gpu_memory_utilization", "max_model_len", "hf_cache", "engine",
                                   "merge_check", "merge_tolerance",
                                   "grade_workers", "average_last"),
                          "rollout": ("backend", "gpu_memory_utilization", "vllm_sleep"), "loss": ("chunk_size",),
                          "train": ("compile", "fp32_matmul", "strategy", "report_to", "wandb_project", "stop_on_collapse",
                                    "collapse", "profile_step"),
                          "tiny": ("dir",)}

EVAL_ONLY = "eval_only"  # status.json's kind of a standalone evaluation


def run_key(semantic: dict) -> str:
    """Hex digest of the canonical JSON of the semantic config (see semantic_dict)."""
    canonical = json.dumps(semantic, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def run_slug(learning_rate: float, clip: float | None, loss_top_k: int | None, seed: int) -> str:
    """Readable prefix of a run dir from the most-swept knobs; the key suffix keeps it unique."""
    parts = [f"lr{learning_rate:g}", f"clip{clip:g}" if clip is not None else "noclip"]
    if loss_top_k is not None:
        parts.append(f"topk{loss_top_k}")
    parts.append(f"s{seed}")
    return "-".join(parts)


def cycle_key(run: RunConfig) -> str:
    return run_key(semantic_dict(run))


def eval_inputs(run: RunConfig) -> dict[str, str]:
    """The identities an evaluation's results depend on: model, eval tables and the checkpoint."""
    inputs = {name: identity for name, identity in input_identities(run).items() if name != "data"}
    return inputs | {"checkpoint": content_identity(run.eval.checkpoint) if run.eval.checkpoint else "base model"}


def eval_key(run: RunConfig) -> str:
    """An evaluation's key: model, eval settings, the checkpoint by content (rewritten in place, it is a
    new evaluation) and seed."""
    semantic = semantic_dict(run)
    semantic["eval"]["checkpoint"] = eval_inputs(run)["checkpoint"]
    return run_key({"kind": EVAL_ONLY, "model": semantic["model"], "eval": semantic["eval"], "seed": run.seed})


def keying(kind: str | None):
    """(key_of, inputs_of) of a run dir of status kind `kind`."""
    return (eval_key, eval_inputs) if kind == EVAL_ONLY else (cycle_key, input_identities)


def semantic_dict(run: RunConfig) -> dict:
    """The part of the config that decides what a run computes: the input of the run key."""
    data = to_dict(run)
    for key in NON_SEMANTIC_FIELDS:
        data.pop(key, None)
    if data.get("executor") != "simulate":
        data.pop("simulate", None)  # the noise model only decides what simulated runs compute
    for section, keys in NON_SEMANTIC_SUBFIELDS.items():
        if data.get(section) is not None:
            for key in keys:
                data[section].pop(key, None)
    # knobs added after runs existed, at the value those runs had: out of the key, so they keep their dirs
    omitted = [dotted.split(".") for dotted, added in ADDED.items()
               if added.omitted_when is not None and data.get(dotted.split(".")[0]) is not None
               and added.omitted_when(data[dotted.split(".")[0]])]
    for section, key in omitted:
        data[section].pop(key)
    identities = input_identities(run)
    for section in ("model", "data", "eval"):
        data[section]["path"] = identities[section]
    for name, benchmark in (data["eval"].get("suite") or {}).items():
        benchmark["path"] = identities[f"eval.suite.{name}"]
    return data


def input_paths(run: RunConfig) -> dict[str, str]:
    """Every input a run reads, by name: model, data, eval, and each table of an eval suite."""
    paths = {"model": run.model.path, "data": run.data.path, "eval": run.eval.path}
    return paths | {f"eval.suite.{name}": b.path for name, b in (run.eval.suite or {}).items()}


def input_identities(run: RunConfig) -> dict[str, str]:
    """The identity of each input (identity.path_identity): what enters the run key and a run dir's record."""
    tiny_dir = run.tiny.dir if run.tiny is not None else None
    return {name: path_identity(path, is_local_path(path), tiny_dir) for name, path in input_paths(run).items()}
