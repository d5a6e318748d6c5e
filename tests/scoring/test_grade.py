"""Grading against a table of answers people actually write, with real math-verify."""

from __future__ import annotations

import threading

import pytest

from opsd_sweep.scoring.grade import Grade, answer_key, grade, grade_many, last_boxed

TIMEOUT = 5

# (completion, gold, expected pred, expected correct); formatted == (pred is not None)
CASES = [
    # integers, leading zeros, signs
    ("The answer is \\boxed{80}.", "80", "80", True),
    ("\\boxed{080}", "80", "080", True),
    ("\\boxed{80}", "080", "80", True),
    ("\\boxed{081}", "80", "081", False),
    ("\\boxed{-3}", "-3", "-3", True),
    ("\\boxed{-3}", "3", "-3", False),
    ("\\boxed{3}", "-3", "3", False),
    ("\\boxed{\u22124}", "-4", "\u22124", True),
    ("\\boxed{1,000}", "1000", "1,000", True),
    ("\\boxed{1{,}000}", "1000", "1{,}000", True),
    ("\\boxed{3.0}", "3", "3.0", True),
    ("\\boxed{ 42 }", "42", "42", True),
    ("$\\boxed{204}$", "204", "204", True),
    # fractions and decimals
    ("\\boxed{\\frac{1}{2}}", "\\frac12", "\\frac{1}{2}", True),
    ("\\boxed{\\dfrac{1}{2}}", "0.5", "\\dfrac{1}{2}", True),
    ("\\boxed{1/2}", "\\frac{1}{2}", "1/2", True),
    ("\\boxed{-\\frac{1}{2}}", "-0.5", "-\\frac{1}{2}", True),
    ("\\boxed{\\frac{2}{3}}", "\\frac{3}{2}", "\\frac{2}{3}", False),
    ("\\boxed{0.333}", "\\frac13", "0.333", False),
    # roots and expressions
    ("\\boxed{2\\sqrt{2}}", "\\sqrt{8}", "2\\sqrt{2}", True),
    ("\\boxed{\\frac{\\sqrt{3}}{2}}", "\\frac{1}{2}\\sqrt{3}", "\\frac{\\sqrt{3}}{2}", True),
    ("\\boxed{\\sqrt{3}}", "\\sqrt{2}", "\\sqrt{3}", False),
    ("\\boxed{x^2+2x+1}", "(x+1)^2", "x^2+2x+1", True),
    ("\\boxed{x=3}", "3", "x=3", True),
    ("\\boxed{\\pi/2}", "\\frac{\\pi}{2}", "\\pi/2", True),
    ("\\boxed{\\infty}", "\\infty", "\\infty", True),
    # text, units, percent, degrees, currency
    ("\\boxed{\\text{(B)}}", "B", "\\text{(B)}", True),
    ("\\boxed{\\text{Evelyn}}", "\\text{Evelyn}", "\\text{Evelyn}", True),
    ("\\boxed{a}", "b", "a", False),
    ("\\boxed{5 \\text{ cm}}", "5", "5 \\text{ cm}", True),
    ("\\boxed{12\\text{ dollars}}", "12", "12\\text{ dollars}", True),
    ("\\boxed{50\\%}", "50", "50\\%", True),
    ("\\boxed{50\\%}", "0.5", "50\\%", False),  # the percent sign is dropped, not divided out
    ("\\boxed{30^\\circ}", "30", "30^\\circ", True),
    ("\\boxed{\\$18.90}", "18.90", "\\$18.90", True),
    # intervals, tuples, sets
    ("\\boxed{(0,1]}", "(0, 1]", "(0,1]", True),
    ("\\boxed{[0,1)}", "(0,1)", "[0,1)", False),
    ("\\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}", "(3,\\frac{\\pi}{2})", "\\left( 3, \\frac{\\pi}{2} \\right)", True),
    ("\\boxed{\\{1,2\\}}", "\\{2,1\\}", "\\{1,2\\}", True),
    # several boxes, nesting, the \boxed 5 form
    ("First \\boxed{3}; correcting myself, \\boxed{5}", "5", "5", True),
    ("First \\boxed{5}; on reflection \\boxed{3}", "5", "3", False),
    ("\\boxed{\\boxed{7}}", "7", "7", True),
    ("so \\boxed 5.", "5", "5", True),
    ("\\boxedfoo then \\boxed{4}", "4", "4", True),
    # missing, empty, unbalanced and truncated answers: unformatted and wrong
    ("no box here, the answer is 5", "5", None, False),
    ("Let me think step by step. First we compute", "5", None, False),  # cut at max_tokens
    ("\\boxed{5} is a draft; the final answer is \\boxed{12", "5", None, False),  # cut inside the box
    ("\\boxed{}", "0", None, False),
]


def test_the_table_is_large_enough():
    assert len(CASES) >= 40


@pytest.mark.parametrize("completion, gold, pred, correct", CASES)
def test_grading_table(completion, gold, pred, correct):
    assert grade(completion, gold, TIMEOUT) == Grade(pred, correct, pred is not None)


@pytest.mark.parametrize("text, content", [
    ("\\boxed{\\frac{1}{\\sqrt{2}}}", "\\frac{1}{\\sqrt{2}}"),   # nested braces
    ("\\boxed{a\\}b}", "a\\}b"),                                 # an escaped brace does not close
    ("\\boxed {8}", "8"),
    ("$\\boxed 5$", "5"),
    ("\\boxed{12", None),
    ("", None),
])
def test_last_boxed_brace_matching(text, content):
    assert last_boxed(text) == content


def test_gold_given_as_a_number_is_graded_as_text():
    assert grade("\\boxed{7}", 7, TIMEOUT).correct


def test_answer_key_merges_equal_integers_only():
    assert answer_key("080") == answer_key("80") == answer_key("\\text{80}")
    assert answer_key("\\dfrac{1}{2}") == answer_key("\\frac{1}{2}")
    assert answer_key("1,2") != answer_key("12")


def test_grading_in_a_thread_is_refused_not_silently_wrong():
    errors = []

    def worker():
        try:
            grade("\\boxed{\\frac{1}{2}}", "0.5", TIMEOUT)
        except RuntimeError as err:
            errors.append(str(err))

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert errors and "main thread" in errors[0]


def test_process_pool_grades_like_the_main_thread():
    pairs = [(completion, gold) for completion, gold, _, _ in CASES[:12]]
    assert grade_many(pairs, TIMEOUT, workers=2, progress=False) == grade_many(pairs, TIMEOUT, 0, progress=False)
