"""Whether a run's final checkpoint may be evaluated with merged weights (eval.merge_check).

Merged weights decode at the base model's speed (no LoRA kernels), but a merge into bf16 weights is not the
adapter bit for bit. So it is checked on the run itself: at the end of training, the rollout engine scores the
run's own eval prompts twice, once as the base weights plus the adapter as a LoRARequest (what the evaluator
served before) and once with the merged model dir loaded, the very bytes the eval engine will load. The check
passes when the next-token log-probs along those prompts agree to within eval.merge_tolerance (the mean absolute
difference in nats) and the merge kept the adapter: their difference is at most MAX_SHARE_OF_EFFECT of what the
adapter itself moves them (LoRARequest against the base weights). A small adapter's delta rounds away in bf16: on an
H100 gpu-check, 97% of a 3-step adapter's changed weights rounded back to the base, and merged against LoRARequest
differed by 0.0198 nats, as much as the adapter's own effect (0.0184), within the 0.02 tolerance. The result is written to eval/merge_check.json; the evaluator serves merged weights only
where a passed check of this very checkpoint and merged dir is on file, and records the check in eval.json's
evaluator record; otherwise it serves the LoRARequest and says why.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from opsd_sweep.run.identity import content_identity
from opsd_sweep.run.rundir import atomic_write_json, read_json_or_none

CHECK_FILE = "merge_check.json"
MERGED_DIR = "merged"  # under the eval dir: merge_adapter's output, loaded by the eval engine
MAX_SHARE_OF_EFFECT = 0.25  # a merge whose error is a quarter of the adapter's effect or more has lost the adapter


def compare_logprobs(lora: list[list[float]], merged: list[list[float]], base: list[list[float]],
                     tolerance: float) -> dict:
    """The check's figures from per-prompt lists of next-token log-probs (one value per prompt position after
    the first) under the LoRARequest, the merged weights and the base weights. The base gives the scale: how
    far the adapter itself moved the same log-probs."""
    if not lora or [len(p) for p in lora] != [len(p) for p in merged] or [len(p) for p in lora] != [len(p) for p in base]:
        raise ValueError("the merge check needs the same prompts and positions under each way of serving")
    gaps = [abs(a - b) for p, q in zip(lora, merged) for a, b in zip(p, q)]
    moved = [abs(a - b) for p, q in zip(lora, base) for a, b in zip(p, q)]
    figures = {"prompts": len(lora), "positions": len(gaps), "mean_abs_diff": round(statistics.fmean(gaps), 6),
               "max_abs_diff": round(max(gaps), 6), "adapter_mean_abs_effect": round(statistics.fmean(moved), 6),
               "tolerance": tolerance, "max_share_of_effect": MAX_SHARE_OF_EFFECT}
    return figures | {"passed": failure(figures, tolerance) is None}


def failure(figures: dict, tolerance: float) -> str | None:
    """Why a check's figures do not let merged weights stand in for the adapter at `tolerance`, or None."""
    gap, effect = figures.get("mean_abs_diff"), figures.get("adapter_mean_abs_effect")
    if gap is None or effect is None:
        return "the check's record lacks its figures"
    if gap > tolerance:
        return f"mean |Δ log p| {gap} > eval.merge_tolerance={tolerance}"
    if gap >= MAX_SHARE_OF_EFFECT * effect:
        return (f"mean |Δ log p| {gap} is {gap / effect if effect else float('inf'):.2f} of what the adapter itself "
                f"moves them ({effect}): the merge lost the adapter (its delta rounds away in "
                f"bf16), >= {MAX_SHARE_OF_EFFECT}")
    return None


def write_check(eval_dir: Path, checkpoint: Path, figures: dict) -> dict:
    """Record a check of `checkpoint` against the merged dir as it is now (by content)."""
    record = {**figures, "checkpoint_identity": content_identity(checkpoint),
              "merged_identity": content_identity(eval_dir / MERGED_DIR)}
    atomic_write_json(eval_dir / CHECK_FILE, record)
    return record


def serve_merged(checking: bool, backend: str, checkpoint: Path | None, eval_dir: Path,
                 tolerance: float) -> tuple[bool, str, dict | None]:
    """(merged?, why, the check record) for an evaluation with eval.merge_check=`checking`: merged weights only
    on vLLM, for an adapter checkpoint with a passed check on file that names this checkpoint and merged dir
    as they are now, at a tolerance no looser than today's."""
    if not checking:
        return False, "eval.merge_check=false: the adapter as a LoRARequest", None
    if backend != "vllm" or checkpoint is None or not (checkpoint / "adapter_config.json").exists():
        return False, "no adapter to merge on vllm", None
    record = read_json_or_none(eval_dir / CHECK_FILE)
    if not isinstance(record, dict):
        return False, ("no merge check on file for this checkpoint (it runs on the rollout engine of a vLLM "
                       "rollout at the end of training): the adapter as a LoRARequest"), None
    if record.get("checkpoint_identity") != content_identity(checkpoint) or \
            record.get("merged_identity") != content_identity(eval_dir / MERGED_DIR):
        return False, f"{eval_dir / CHECK_FILE} checked another checkpoint or merged dir: the adapter as a LoRARequest", None
    summary = check_summary(record)
    if record.get("tolerance", float("inf")) > tolerance:
        return False, (f"the merge check ran at a looser tolerance ({record.get('tolerance')}) than "
                       f"eval.merge_tolerance={tolerance}: the adapter as a LoRARequest"), summary
    if (why := failure(record, tolerance)) is not None:
        return False, f"the merge check failed ({why}): the adapter as a LoRARequest", summary | {"passed": False}
    return True, (f"merged weights: the merge check passed (mean |Δ log p| {record['mean_abs_diff']} <= "
                  f"{tolerance} nats over {record['positions']} positions of {record['prompts']} eval prompts; "
                  f"the adapter itself moves them {record['adapter_mean_abs_effect']})"), summary


def check_summary(record: dict) -> dict:
    """What eval.json's evaluator record keeps of a check: enough to refuse a failed one."""
    return {key: record.get(key) for key in ("passed", "mean_abs_diff", "max_abs_diff", "adapter_mean_abs_effect",
                                             "tolerance", "positions")}

