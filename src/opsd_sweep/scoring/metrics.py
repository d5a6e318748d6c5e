"""Metrics from raw per-sample records only: the one audited place where they are computed.

Shapes: `correct`, `formatted`, `truncated` are bool arrays [n_problems, n_samples]; `tokens` is a
number array of the same shape; `preds` is a list (problems) of lists (samples) of str | None.
Percentages are in [0, 100].

An allocated evaluation (eval.allocation=neyman) draws n_i samples of problem i: every rate is then the mean
over problems of per-problem means (inference.design.stratified_score: each problem weighs the same whatever
its n_i, so the estimand is a uniform evaluation's), and pass@k exists only for k <= the smallest n_i.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from opsd_sweep.scoring.grade import answer_key


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one problem with n samples of which c are correct: 1 - C(n-c, k) / C(n, k).

    Computed as the product 1 - prod_{i=n-c+1..n} (1 - k / i), which never forms the huge binomials.
    """
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"pass_at_k needs 0 <= c <= n and 1 <= k <= n; got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0  # every k-subset holds a correct sample
    return 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def avg_at_n(correct: np.ndarray) -> float:
    """Mean correctness over problems x samples, in percent (the headline; equals pass@1)."""
    return 100.0 * float(np.mean(correct))


def pass_at_k_curve(correct: np.ndarray) -> dict[str, float]:
    """{"1": pass@1, ..., "n": pass@n} in percent, averaged over problems."""
    n = correct.shape[1]
    counts = correct.sum(axis=1)
    return {str(k): 100.0 * float(np.mean([pass_at_k(n, int(c), k) for c in counts]))
            for k in range(1, n + 1)}


def majority_at_n(preds: list[list[str | None]], correct: np.ndarray) -> float:
    """Percent of problems whose most frequent answer is correct.

    Answers vote by value: every correct answer equals the gold by the grader (math-verify too: 0.5, 1/2 and
    \\frac{1}{2} of a gold 1/2), so the correct ones are one answer; a wrong one votes by `answer_key`
    (equal integers and normal forms). Unformatted samples do not vote; a problem with no vote scores 0. A tie
    between several top answers scores the fraction of them that are correct (the expected score of a random
    tie-break), so the metric does not depend on sample order.
    """
    total = 0.0
    for row_preds, row_correct in zip(preds, correct):
        votes: Counter[tuple[bool, str]] = Counter(
            (True, "") if ok else (False, answer_key(pred))
            for pred, ok in zip(row_preds, row_correct) if pred is not None)
        if votes:
            top = max(votes.values())
            winners = [key for key, count in votes.items() if count == top]
            total += sum(ok for ok, _ in winners) / len(winners)
    return 100.0 * total / len(preds)


def per_problem_mean(rows: list[np.ndarray]) -> float:
    """The mean over problems of each problem's mean over its samples (rows: one array per problem); with equal
    counts the plain mean over problems x samples, computed as before (the same float)."""
    if len({row.size for row in rows}) == 1:
        return float(np.mean(np.stack(rows)))
    return float(np.mean([row.mean() for row in rows]))


def pass_at_k_stratified(correct: list[np.ndarray]) -> dict[str, float]:
    """pass_at_k_curve for per-problem counts n_i: k = 1 .. min n_i (no unbiased pass@k beyond a problem's n_i)."""
    smallest = min(row.size for row in correct)
    return {str(k): 100.0 * float(np.mean([pass_at_k(row.size, int(row.sum()), k) for row in correct]))
            for k in range(1, smallest + 1)}


def _sample_rows(problems: list[dict], value) -> list[np.ndarray]:
    return [np.array([value(s) for s in p["samples"]], dtype=float) for p in problems]


def compute_metrics(problems: list[dict]) -> dict:
    """Every metric of eval.json from its `problems` records (each with a `samples` list, of one length or,
    for an allocated evaluation, each problem's own)."""
    if not problems:
        raise ValueError("compute_metrics needs at least one problem record")
    sizes = {len(p["samples"]) for p in problems}
    if 0 in sizes:
        raise ValueError("every problem needs at least one sample; a problem record has none")
    correct = _sample_rows(problems, lambda s: s["correct"])
    uniform = len(sizes) == 1
    preds = [[s["pred"] for s in p["samples"]] for p in problems]
    return {
        "avg_at_n": 100.0 * per_problem_mean(correct),
        "pass_at_k": pass_at_k_curve(np.stack(correct).astype(bool)) if uniform else pass_at_k_stratified(correct),
        "maj_at_n": majority_at_n(preds, [row.astype(bool) for row in correct]),
        "format_rate": 100.0 * per_problem_mean(_sample_rows(problems, lambda s: s["formatted"])),
        "mean_tokens": per_problem_mean(_sample_rows(problems, lambda s: s["n_tokens"])),
        "truncation_rate": 100.0 * per_problem_mean(_sample_rows(problems, lambda s: s["finish_reason"] == "length")),
    }


def suite_metrics(problems: list[dict]) -> tuple[dict, dict[str, dict]]:
    """An eval suite's metrics over all its problems (plus `pooled`: their avg@n, the score one test
    pairs over the union of problems) and each benchmark's own, from records with a `benchmark` field."""
    pooled = compute_metrics(problems)
    pooled["pooled"] = pooled["avg_at_n"]
    names = list(dict.fromkeys(p["benchmark"] for p in problems))
    return pooled, {name: compute_metrics([p for p in problems if p["benchmark"] == name]) for name in names}


def score_fields(problems: list[dict], suite: bool) -> dict:
    """eval.json's scores from its problem records: {'metrics'}, and for an eval suite (records with a
    `benchmark` field) the metrics over all its problems plus each benchmark's own under 'benchmarks'."""
    if not suite:
        return {"metrics": compute_metrics(problems)}
    metrics, benchmarks = suite_metrics(problems)
    return {"metrics": metrics, "benchmarks": benchmarks}


def with_current_vote(evaluation: dict) -> dict:
    """eval.json with maj_at_n voted again from its samples' answers (the pooled metrics and each benchmark's), so
    an eval written before a change of the vote reads as one written after. Unchanged when a sample lacks its
    answer or grade (such a file is left to the reader's own checks)."""
    problems = evaluation.get("problems") or []
    samples = [p.get("samples") or [] for p in problems]
    if not problems or not all(rows and all({"pred", "correct"} <= s.keys() for s in rows) for rows in samples):
        return evaluation

    def vote(members: list[dict]) -> float:
        return majority_at_n([[s["pred"] for s in p["samples"]] for p in members],
                             [np.array([bool(s["correct"]) for s in p["samples"]]) for p in members])

    revoted = dict(evaluation, metrics=dict(evaluation["metrics"], maj_at_n=vote(problems)))
    if isinstance(evaluation.get("benchmarks"), dict):
        revoted["benchmarks"] = {name: dict(own, maj_at_n=vote([p for p in problems if p.get("benchmark") == name]))
                                 if isinstance(own, dict) else own for name, own in evaluation["benchmarks"].items()}
    return revoted
