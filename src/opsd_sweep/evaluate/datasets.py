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
    benchmark: str  # the eval's name, or its suite member's


def load_problems(cfg: EvalConfig) -> list[Problem]:
    """Hub dataset(s) or local file(s) -> problems, with the configured field names and size cap.

    A suite concatenates its benchmarks in order, ids prefixed `<benchmark>/` so they stay unique."""
    if cfg.suite is None:
        return _load(cfg, cfg.name, "", cfg.max_problems)
    return [problem for name, benchmark in cfg.suite.items()
            for problem in _load(benchmark, name, f"{name}/", cfg.max_problems)]


def _load(source, benchmark: str, prefix: str, max_problems: int | None) -> list[Problem]:
    """`source`: the EvalConfig or one BenchmarkConfig of its suite (the same dataset fields)."""
    fields = {"problem": source.problem_field, "answer": source.answer_field}
    rows = load_rows(source.path, source.split, fields, max_problems, id_field=source.id_field, section="eval")
    if not rows:
        raise ValueError(f"eval dataset {source.path!r} (split {source.split!r}) has no rows")
    return [Problem(prefix + row["id"], str(row["problem"]), str(row["answer"]), benchmark) for row in rows]
