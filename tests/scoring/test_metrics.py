"""Metrics from raw records: pass@k against brute-force enumeration, majority vote, the full set."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from opsd_sweep.scoring.grade import answers_match, grade
from opsd_sweep.scoring.metrics import avg_at_n, compute_metrics, majority_at_n, pass_at_k, pass_at_k_curve


def brute_force_pass_at_k(n: int, c: int, k: int) -> float:
    """The fraction of all k-subsets of n samples (c of them correct) holding a correct one."""
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(samples, k))
    return sum(any(subset) for subset in subsets) / len(subsets)


@pytest.mark.parametrize("n", range(1, 11))
def test_pass_at_k_equals_enumeration(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(brute_force_pass_at_k(n, c, k), abs=1e-12), (n, c, k)


def test_pass_at_k_is_stable_where_binomials_overflow_floats():
    n, c, k = 2000, 3, 600
    exact = 1 - math.comb(n - c, k) / math.comb(n, k)  # Python integers: exact
    assert pass_at_k(n, c, k) == pytest.approx(exact, rel=1e-12)


@pytest.mark.parametrize("n, c, k", [(4, 5, 1), (4, -1, 1), (4, 2, 0), (4, 2, 5)])
def test_pass_at_k_rejects_impossible_counts(n, c, k):
    with pytest.raises(ValueError, match=f"n={n}, c={c}, k={k}"):
        pass_at_k(n, c, k)


def test_pass_at_1_curve_starts_at_avg_and_ends_at_any_correct():
    correct = np.array([[1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]], dtype=bool)
    curve = pass_at_k_curve(correct)
    assert curve["1"] == pytest.approx(avg_at_n(correct))
    assert curve["4"] == pytest.approx(100 * 2 / 3)
    assert list(curve) == ["1", "2", "3", "4"]


def test_majority_vote_groups_equal_answers_and_splits_ties():
    preds = [["80", "080", "7", None],      # 80 wins 2:1 -> correct
             ["3", "4", None, None],        # tie 3 vs 4, one correct -> 0.5
             [None, None, None, None],      # no vote -> 0
             ["1", "2", "2", "1"]]          # tie, neither correct -> 0
    correct = np.array([[1, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]], dtype=bool)
    assert majority_at_n(preds, correct) == pytest.approx(100 * 1.5 / 4)


def record(pred, correct, tokens, reason):
    return {"pred": pred, "correct": correct, "formatted": pred is not None, "n_tokens": tokens,
            "finish_reason": reason}


def test_compute_metrics_from_raw_records():
    problems = [
        {"id": "a", "answer": "5", "samples": [record("5", True, 10, "stop"), record(None, False, 40, "length")]},
        {"id": "b", "answer": "6", "samples": [record("7", False, 20, "stop"), record("7", False, 30, "stop")]},
    ]
    m = compute_metrics(problems)
    assert m == {"avg_at_n": 25.0, "pass_at_k": {"1": 25.0, "2": 50.0}, "maj_at_n": 50.0,
                 "format_rate": 75.0, "mean_tokens": 25.0, "truncation_rate": 25.0}


def test_compute_metrics_refuses_a_problem_without_samples_or_no_problems():
    # ragged records are an allocated evaluation's (tests/evaluate/test_allocation.py); an empty one is not
    with pytest.raises(ValueError, match="at least one sample"):
        compute_metrics([{"samples": [record("1", True, 1, "stop")]}, {"samples": []}])
    with pytest.raises(ValueError, match="at least one problem"):
        compute_metrics([])


def test_majority_vote_counts_answers_the_grader_finds_equal_to_the_gold_as_one_answer():
    """Four samples state the gold 1/2 in four forms (math-verify grades each correct), two say 3: the majority
    answer is 1/2 (4 votes to 2), so maj@n is 100, not 0 (four 1-vote strings losing to "3")."""
    texts = ["\\boxed{0.5}", "\\boxed{\\frac{1}{2}}", "\\boxed{1/2}", "\\boxed{\\dfrac{1}{2}}", "\\boxed{3}",
             "\\boxed{3}"]
    grades = [grade(text, "\\frac{1}{2}", timeout=5) for text in texts]
    assert [g.correct for g in grades] == [True, True, True, True, False, False]
    problems = [{"id": "half", "answer": "\\frac{1}{2}",
                 "samples": [record(g.pred, g.correct, 10, "stop") for g in grades]}]
    assert compute_metrics(problems)["maj_at_n"] == 100.0


def test_majority_vote_counts_one_wrong_number_written_two_ways_as_one_answer():
    """Gold 7; two samples say 12 (as "12" and "12.0", which the grader holds equal: math-verify), one says 7: the
    majority answer is 12, wrong, so maj@n is 0, not the 1/3 of a three-way tie."""
    grades = [grade(f"\\boxed{{{answer}}}", "7", timeout=5) for answer in ("12", "12.0", "7")]
    assert answers_match("12.0", "12", timeout=5) and [g.correct for g in grades] == [False, False, True]
    problems = [{"id": "seven", "answer": "7", "samples": [record(g.pred, g.correct, 10, "stop") for g in grades]}]
    assert compute_metrics(problems)["maj_at_n"] == 0.0


def test_majority_vote_reads_latex_shorthand_as_the_braced_form():
    """Gold 5; two samples say 1/2 (as \\frac12 and \\frac{1}{2}, equal by math-verify), one says 5: the majority
    answer is 1/2, wrong (maj@n 0, not a three-way tie's 1/3); likewise \\sqrt2 and \\sqrt{2}."""
    for wrong in (("\\frac12", "\\frac{1}{2}"), ("\\sqrt2", "\\sqrt{2}"), ("\\frac{\\sqrt3}2", "\\dfrac{\\sqrt{3}}{2}")):
        assert answers_match(*wrong, timeout=5)
        grades = [grade(f"\\boxed{{{answer}}}", "5", timeout=5) for answer in (*wrong, "5")]
        problems = [{"id": "five", "answer": "5", "samples": [record(g.pred, g.correct, 10, "stop") for g in grades]}]
        assert compute_metrics(problems)["maj_at_n"] == 0.0, wrong
