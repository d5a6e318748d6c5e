"""Grading: the content of the last \\boxed{...}, compared with the gold answer.

Order of comparison: both integers -> numeric ("080" equals 80); else math-verify parse + verify
with timeouts; else a normalised string comparison. A completion without a (balanced, non-empty)
last box is unformatted and wrong, which covers outputs cut at max_tokens before the answer.

math-verify enforces its timeouts with signal.alarm, which works only in a process's main thread:
grade in the main thread or in a process pool (`grade_many`), never in threads.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from importlib.metadata import version

BOX_COMMAND = "\\boxed"

# The version of the grading rules in this module. Bump it in the commit that changes any sample's pred, correct
# or formatted: every eval.json graded before then names another grader, enters no statistic, and is graded
# again from its stored completions by `python -m opsd_sweep.evaluate regrade RESULTS` (docs/grader.md).
GRADING_RULES_VERSION = 1


def grader_identity() -> dict:
    """The grader that grades today, as eval.json's evaluator record names it: the installed math-verify (whose
    parse and verify decide every non-integer answer) and the version of our own rules."""
    return {"math_verify": _math_verify_version(), "rules": GRADING_RULES_VERSION}


@functools.lru_cache(maxsize=1)  # a summary asks once per run: read the installed package's metadata once
def _math_verify_version() -> str:
    return version("math-verify")


@dataclass(frozen=True)
class Grade:
    pred: str | None   # the extracted answer (None when no usable boxed answer was found)
    correct: bool
    formatted: bool    # a usable boxed answer was found


# --- extraction ----------------------------------------------------------------------------------

def last_boxed(text: str) -> str | None:
    """Content of the last `\\boxed{...}` (brace-matched, escaped braces skipped) or `\\boxed x`.

    None when there is no box, the last box is empty, or its braces never close (the model's final
    answer is broken: an earlier draft box is not taken in its place).
    """
    start = text.rfind(BOX_COMMAND)
    while start != -1:
        rest = text[start + len(BOX_COMMAND):]
        stripped = rest.lstrip(" ")
        if stripped.startswith("{"):
            content = _braced(stripped)
            return (content.strip() or None) if content is not None else None
        if rest[:1].isspace():  # `\boxed 5`: the next token
            match = re.match(r"\s+([^\s$]+)", rest)
            return (match.group(1).rstrip(".,;") or None) if match else None
        start = text.rfind(BOX_COMMAND, 0, start)  # `\boxedfoo` is another command: look further back
    return None


def _braced(text: str) -> str | None:
    """The content of the brace group that `text` opens, or None when it never closes."""
    depth, i = 0, 0
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2  # an escaped character (\{ \} \\) never opens or closes a group
            continue
        depth += (char == "{") - (char == "}")
        if depth == 0:
            return text[1:i]
        i += 1
    return None


# --- comparison ----------------------------------------------------------------------------------

_INTEGER = re.compile(r"[-+]?(\d+|\d{1,3}(,\d{3})+)")
_DECIMAL = re.compile(r"[-+]?(\d+\.\d*|\.\d+)")
_WRAPPERS = (r"\\text\{([^{}]*)\}", r"\\textbf\{([^{}]*)\}", r"\\mathrm\{([^{}]*)\}", r"\\mbox\{([^{}]*)\}")
_DROPPED = ("\\!", "\\,", "\\;", "\\:", "\\left", "\\right", "\\$", "$", "\\%", "%",
            "^{\\circ}", "^\\circ", "°")


def _drop_marks(answer: str) -> str:
    """Remove spacing commands, dollar signs, percent and degree marks; plain minus and commas."""
    for token in _DROPPED:
        answer = answer.replace(token, "")
    return answer.replace("{,}", ",").replace("\u2212", "-").strip()


def _strip_markup(answer: str) -> str:
    """_drop_marks, and text wrappers replaced by their text (math-verify needs them for units)."""
    for pattern in _WRAPPERS:
        answer = re.sub(pattern, r"\1", answer)
    return _drop_marks(answer)


_GROUP = r"\{(?:[^{}]|\{[^{}]*\})*\}"  # a brace group, one level of nesting inside
_ARGUMENT = rf"({_GROUP}|[0-9A-Za-z])"  # LaTeX takes a lone character as an argument: \frac12, \sqrt2


def _braced_arguments(answer: str) -> str:
    """\\sqrt2 -> \\sqrt{2}, \\frac12 -> \\frac{1}{2}: the shorthand and the braced form are one answer."""
    def brace(argument: str) -> str:
        return argument if argument.startswith("{") else f"{{{argument}}}"

    answer = re.sub(rf"\\sqrt{_ARGUMENT}", lambda m: "\\sqrt" + brace(m[1]), answer)
    return re.sub(rf"\\frac{_ARGUMENT}{_ARGUMENT}", lambda m: "\\frac" + brace(m[1]) + brace(m[2]), answer)


def normalise(answer: str) -> str:
    """The string form two answers are compared by when nothing smarter applies."""
    answer = _strip_markup(answer).replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    return _braced_arguments(re.sub(r"\s+", "", answer)).rstrip(".").lower()


def _bare(answer: str) -> str:
    """The answer without markup, spaces and a closing full stop: the form a number is read from."""
    return re.sub(r"\s+", "", _strip_markup(answer)).rstrip(".")


def as_integer(answer: str) -> int | None:
    """The integer an answer states ('080', '-3', '1,000', '\\text{80}'), else None."""
    cleaned = _bare(answer)
    return int(cleaned.replace(",", "")) if _INTEGER.fullmatch(cleaned) else None


@functools.lru_cache(maxsize=1 << 16)  # every read of a run votes again (metrics.with_current_vote); answers repeat
def answer_key(pred: str) -> str:
    """A canonical key for majority voting: equal integers, equal decimals ('12.0' is 12, '0.50' is 0.5, as
    math-verify grades them) and equal normal forms share a key."""
    value = as_integer(pred)
    if value is not None:
        return str(value)
    if _DECIMAL.fullmatch(cleaned := _bare(pred)):
        number = Decimal(cleaned).normalize()
        return str(int(number)) if number == number.to_integral_value() else format(number, "f")
    return normalise(pred)


def _math_verify_equal(pred: str, gold: str, timeout: int) -> bool:
    from math_verify import parse, verify

    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("math-verify timeouts use signal.alarm and fail outside the main thread: call "
                           "grade() from the main thread or use grade_many(..., workers=N) (a process pool)")
    try:
        gold_parsed = parse(f"$\\boxed{{{_drop_marks(gold)}}}$", parsing_timeout=timeout)
        pred_parsed = parse(f"$\\boxed{{{_drop_marks(pred)}}}$", parsing_timeout=timeout)
        return bool(gold_parsed and pred_parsed and verify(gold_parsed, pred_parsed, timeout_seconds=timeout))
    except Exception:  # sympy can fail on odd LaTeX in ways math-verify does not catch: no match then
        return False


def answers_match(pred: str, gold: str, timeout: int) -> bool:
    """Integers numerically, else math-verify (with timeouts), else normalised strings."""
    pred_int, gold_int = as_integer(pred), as_integer(gold)
    if pred_int is not None and gold_int is not None:
        return pred_int == gold_int
    return _math_verify_equal(pred, gold, timeout) or normalise(pred) == normalise(gold)


def grade(completion_text: str, gold: str, timeout: int) -> Grade:
    """Grade one completion against the gold answer (main thread only; see the module docstring)."""
    pred = last_boxed(completion_text)
    if pred is None:
        return Grade(None, False, False)
    return Grade(pred, answers_match(pred, str(gold), timeout), True)


def _grade_pair(pair: tuple[str, str], timeout: int) -> Grade:
    return grade(pair[0], pair[1], timeout)


def grade_many(pairs: Sequence[tuple[str, str]], timeout: int, workers: int,
               progress: bool = True) -> list[Grade]:
    """Grade (completion, gold) pairs in order: in this (main) thread, or in `workers` processes."""
    from tqdm import tqdm

    bar = tqdm(total=len(pairs), desc="grading", unit="sample", disable=not progress)
    if workers == 0:
        grades = []
        for pair in pairs:
            grades.append(_grade_pair(pair, timeout))
            bar.update(1)
        bar.close()
        return grades
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from functools import partial

    # spawn, not fork: the parent may hold CUDA or engine threads that a forked child must not inherit
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        grades = []
        for result in pool.map(partial(_grade_pair, timeout=timeout), pairs,
                               chunksize=max(1, len(pairs) // (8 * workers))):
            grades.append(result)
            bar.update(1)
    bar.close()
    return grades
