"""Metrics computed from raw per-sample correctness only: the one audited place.

Convention: `correct` is a bool array [n_problems, n_samples].
"""

from __future__ import annotations

from collections import Counter

import numpy as np


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one problem with n samples, c correct: 1 - C(n-c, k) / C(n, k)."""
    if n - c < k:
        return 1.0
    return 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def avg_at_n(correct: np.ndarray) -> float:
    """Mean correctness over problems x samples, in percent (avg@n = pass@1)."""
    return 100.0 * float(np.mean(correct))


def majority_at_n(preds: list[list[str | None]], correct: np.ndarray) -> float:
    """Percent of problems whose most frequent formatted answer is correct (ties: first seen)."""
    hits = 0
    for row_preds, row_correct in zip(preds, correct):
        votes = Counter(p for p in row_preds if p is not None)
        if votes:
            top = votes.most_common(1)[0][0]
            hits += bool(row_correct[row_preds.index(top)])
    return 100.0 * hits / len(preds)


def compute_metrics(problems: list[dict]) -> dict:
    """All metrics from eval.json-style problem records (each with a `samples` list)."""
    correct = np.array([[s["correct"] for s in p["samples"]] for p in problems], dtype=bool)
    formatted = np.array([[s["formatted"] for s in p["samples"]] for p in problems], dtype=bool)
    tokens = np.array([[s["n_tokens"] for s in p["samples"]] for p in problems], dtype=float)
    truncated = np.array([[s["finish_reason"] == "length" for s in p["samples"]] for p in problems])
    n = correct.shape[1]
    return {
        "avg_at_n": avg_at_n(correct),
        "pass_at_k": {str(k): 100.0 * float(np.mean([pass_at_k(n, int(c), k) for c in correct.sum(1)]))
                      for k in range(1, n + 1)},
        "maj_at_n": majority_at_n([[s["pred"] for s in p["samples"]] for p in problems], correct),
        "format_rate": 100.0 * float(formatted.mean()),
        "mean_tokens": float(tokens.mean()),
        "truncation_rate": 100.0 * float(truncated.mean()),
    }
