"""Inert settings: values that change nothing in a run (its loss ignores them, or they ask for what is done anyway),
and the grid points they make twins of. The launchers' grid check refuses such twins before any compute."""

from __future__ import annotations

import functools

from opsd_sweep.config import RunConfig, get_dotted, to_dict
from opsd_sweep.preflight import model_vocab_size


def inert_settings(run: RunConfig) -> dict[str, str]:
    """{dotted key: why its value changes nothing in this run}. They stay in the run key (runs that exist keep their
    keys), so a grid over one would compute the same run once per value under different keys: inert_twin_problems
    refuses that; a single run's fixed inert value harms nobody."""
    inert = {}
    if run.loss.clip_mode == "none":  # LossSpec.mode: no clip mode, no clip (train/loss.py)
        inert["clip"] = ("loss.clip_mode=none (loss=forward_kl, and profile=tiny's loss) never clips, so clip "
                         "changes nothing; drop the sweep over clip, or choose a loss that uses it (loss=paper_clip "
                         "or loss=trust_region)")
    if run.eval.checkpoints == "final":  # the last step is always saved (trainer); the others only resume exactly
        inert["train.save_steps"] = ("eval.checkpoints=final scores only the last checkpoint, which is saved whatever "
                                     "train.save_steps is (the others are resume points, and a resumed run "
                                     "computes what an unbroken one does); drop the sweep over train.save_steps, "
                                     "or evaluate every checkpoint (eval.checkpoints=all)")
    if (why := _full_distribution(run)) is not None:
        inert["loss_top_k"] = why
    return inert


def _full_distribution(run: RunConfig) -> str | None:
    """Why loss_top_k keeps every token, or None: null, or a top-k of at least the vocabulary, which the loss
    leaves whole (train/loss.py restricts only top_k < vocab). The vocabulary is the model's (tiny: its own)."""
    vocab = model_vocab_size(run)
    if run.loss_top_k is not None and (vocab is None or run.loss_top_k < vocab):
        return None
    size = f" ({vocab} tokens)" if vocab is not None else ""
    below = f"sweep values below {vocab}" if vocab is not None else "sweep top-k values below its vocabulary"
    return (f"a top-k of at least the vocabulary of model.path={run.model.path}{size} keeps every token, the full "
            f"distribution, as loss_top_k=null does; drop the sweep over loss_top_k, or {below} (e.g. "
            "loss_top_k=null,20)")


def inert_twin_problems(points: list[tuple[str, RunConfig]]) -> dict[str, list[str]]:
    """{problem: labels of its grid points} for points that differ only in settings whose value changes nothing
    (inert_settings): the same computation under several run keys, and a fake comparison in the summary.
    Points equal in every setting are not counted here (the launcher refuses those as one run)."""
    twins: dict[str, list[tuple[str, RunConfig]]] = {}
    for label, run in points:
        data = to_dict(run)
        for key in inert_settings(run):
            *sections, last = key.split(".")
            functools.reduce(dict.__getitem__, sections, data).pop(last)
        twins.setdefault(repr(data), []).append((label, run))  # asdict keeps the schema's field order
    problems: dict[str, list[str]] = {}
    for same in twins.values():
        for key, why in inert_settings(same[0][1]).items():  # alike apart from inert keys: the same inert keys
            values = sorted({get_dotted(run, key) for _, run in same}, key=repr)
            if len(values) > 1:
                shown = ",".join("null" if v is None else f"{v:g}" if isinstance(v, float) else str(v) for v in values)
                problems.setdefault(f"{key}={shown} would be {len(values)} configs that are one: {why}", []).extend(
                    label for label, _ in same)
    return problems
