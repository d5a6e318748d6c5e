"""Grading: the content of the last \\boxed{...}, compared with the gold answer by math-verify.

math-verify uses signal.alarm for its timeouts, so grade in the main thread or a process pool,
never in threads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Grade:
    pred: str | None   # the extracted answer (None when no boxed answer was found)
    correct: bool
    formatted: bool    # a boxed answer was found


def last_boxed(text: str) -> str | None:
    """Content of the last \\boxed{...} (brace-matched) or \\boxed x; None if absent or unbalanced."""
    start = text.rfind("\\boxed")
    while start != -1:
        rest = text[start + len("\\boxed"):]
        if rest.startswith("{"):
            depth = 0
            for i, char in enumerate(rest):
                depth += (char == "{") - (char == "}")
                if depth == 0:
                    return rest[1:i].strip()
        else:
            match = re.match(r"\s+([^\s$]+)", rest)
            if match:
                return match.group(1).strip()
        start = text.rfind("\\boxed", 0, start)
    return None


def _normalise(answer: str) -> str:
    answer = re.sub(r"\\text\{([^}]*)\}", r"\1", answer)
    answer = answer.replace("\\!", "").replace("\\,", "").replace("$", "").replace(" ", "")
    answer = answer.rstrip(".").lower()
    return answer


def _as_int(answer: str) -> int | None:
    cleaned = _normalise(answer).replace(",", "")
    return int(cleaned) if re.fullmatch(r"[-+]?\d+", cleaned) else None


def answers_match(pred: str, gold: str, timeout_seconds: int = 5) -> bool:
    """Integers numerically ("080" == 80), else math-verify, else a normalised string comparison."""
    pred_int, gold_int = _as_int(pred), _as_int(gold)
    if pred_int is not None and gold_int is not None:
        return pred_int == gold_int
    try:
        from math_verify import parse, verify

        gold_parsed = parse(f"${gold}$", parsing_timeout=timeout_seconds)
        pred_parsed = parse(f"$\\boxed{{{pred}}}$", parsing_timeout=timeout_seconds)
        if gold_parsed and pred_parsed and verify(gold_parsed, pred_parsed, timeout_seconds=timeout_seconds):
            return True
    except Exception:  # a parser failure on odd LaTeX falls through to the string comparison
        pass
    return _normalise(pred) == _normalise(gold)


def grade(completion_text: str, gold: str) -> Grade:
    pred = last_boxed(completion_text)
    if pred is None:
        return Grade(None, False, False)
    return Grade(pred, answers_match(pred, str(gold)), True)
