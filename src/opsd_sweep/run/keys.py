"""The run key of each kind of run dir and the identities its results depend on.

A cycle (train then evaluate) is keyed by its whole semantic config (config.semantic_dict); a standalone
evaluation (status kind eval_only) by model, eval settings, checkpoint and seed. The inputs recorded in a
run dir's identity.json are those its key holds: a cycle's model, data and eval tables; an evaluation's
model, eval tables and checkpoint (by content).
"""

from __future__ import annotations

import hashlib
import json

from opsd_sweep.config import RunConfig, input_identities, semantic_dict
from opsd_sweep.identity import content_identity

EVAL_ONLY = "eval_only"  # status.json's kind of a standalone evaluation


def run_key(semantic: dict) -> str:
    """Hex digest of the canonical JSON of the semantic config (see config.semantic_dict)."""
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
