"""The benchmark's problems (id, statement, gold answer) as the eval config describes them."""

from __future__ import annotations

from dataclasses import dataclass

from opsd_sweep.config import EvalConfig
from opsd_sweep.data import load_rows


@dataclass(frozen=True)
class Problem:
    id: str
    problem: str
    answer: str


def load_problems(cfg: EvalConfig) -> list[Problem]:
    """Hub dataset or local file -> problems, with the configured field names and size cap."""
    rows = load_rows(cfg.path, cfg.split, {"problem": cfg.problem_field, "answer": cfg.answer_field},
                     cfg.max_problems, id_field=cfg.id_field, section="eval")
    if not rows:
        raise ValueError(f"eval dataset {cfg.path!r} (split {cfg.split!r}) has no rows")
    return [Problem(row["id"], str(row["problem"]), str(row["answer"])) for row in rows]
