"""Repeated looks at one confirmation: each completed look (its seeds, verdict and level) is kept in confirm.json,
and a look at other seeds of the same hypothesis is tested at a Bonferroni-split level.

A hypothesis is (config, baseline, locked benchmark, metric): a confirmation of another config or on another
benchmark tests something else. A look is a seed list: `--seeds 3` after `--seeds 2` reuses the 2 runs per arm and
tests again, so the K-th look is judged at alpha / K (Bonferroni: simple, and valid whatever the dependence
between looks, which share runs). Look k having been judged at alpha / k, a false confirmation over K looks has
probability at most alpha x (1 + 1/2 + ... + 1/K): 1.5 alpha at 2 looks instead of 2 alpha, but not alpha, since the
first look spent alpha in full (keeping alpha would need a smaller level at the first look: alpha spending).
A rerun of a recorded seed list is the same look, not a new one.
"""

from __future__ import annotations

import json
from pathlib import Path

from opsd_sweep.confirm.verdict import CONFIRMED, INCONCLUSIVE, NOT_CONFIRMED

VERDICTS = (CONFIRMED, NOT_CONFIRMED, INCONCLUSIVE)


def hypothesis(config: str, baseline: str, locked_identity: str, metric: str) -> dict:
    """What a look tests: config - baseline on the locked benchmark (by identity) in this metric."""
    return {"config": config, "baseline": baseline, "locked": locked_identity, "metric": metric}


def earlier_looks(confirm_json: Path) -> list[dict]:
    """The looks recorded in an earlier confirm.json (of any hypothesis); [] when there is none or it is unreadable.
    A confirm.json written before looks were recorded is one look when its verdict covered every planned run."""
    try:
        earlier = json.loads(confirm_json.read_text())
        looks = earlier.get("looks")
    except (OSError, ValueError, AttributeError):
        return []
    if isinstance(looks, list):
        return [look for look in looks if isinstance(look, dict)]
    return _unrecorded_look(earlier)


def _unrecorded_look(earlier: dict) -> list[dict]:
    """[the look] a confirm.json without `looks` reports: a verdict word on every planned run; else []."""
    plan, locked = earlier.get("plan") or {}, earlier.get("locked") or {}
    if earlier.get("verdict") not in VERDICTS or earlier.get("unfinished_runs") or plan.get("failed_launches"):
        return []
    tested = hypothesis(plan.get("config"), plan.get("baseline"), locked.get("identity"), earlier.get("metric"))
    level = earlier.get("level")
    return [{**tested, "seeds": plan.get("seeds"), "verdict": earlier["verdict"], "level": level,
             "nominal_level": level}]


def _of(looks: list[dict], tested: dict) -> list[dict]:
    return [look for look in looks if all(look.get(k) == v for k, v in tested.items())]


def look_number(looks: list[dict], tested: dict, seeds: list[int]) -> int:
    """How many looks at `tested` there are with this one: the distinct seed lists recorded, plus `seeds` if new."""
    seen = {tuple(look["seeds"]) for look in _of(looks, tested)}
    return len(seen | {tuple(seeds)})


def split_level(nominal: float, looks: int) -> float:
    """The interval coverage of a look among `looks`: 1 - alpha / looks, alpha = 1 - nominal (Bonferroni)."""
    return 1 - (1 - nominal) / looks


def recorded(looks: list[dict], tested: dict, seeds: list[int], verdict: str, level: float, nominal: float
             ) -> list[dict]:
    """`looks` with this completed look in it: a look at the same seeds is replaced, a new one appended."""
    look = {**tested, "seeds": list(seeds), "verdict": verdict, "level": level, "nominal_level": nominal}
    mine = _of(looks, tested)

    def again(old: dict) -> bool:
        return old in mine and old["seeds"] == list(seeds)

    if any(map(again, looks)):
        return [look if again(old) else old for old in looks]
    return [*looks, look]


def look_line(looks: list[dict], tested: dict, seeds: list[int], number: int, nominal: float, level: float) -> str:
    """The console line of a look after earlier ones: the other looks recorded and the level this one is tested at."""
    earlier = "; ".join(f"seeds {_seeds(look['seeds'])}: {look['verdict']} at {_pct(look['level'])}"
                        for look in _of(looks, tested) if look["seeds"] != list(seeds))
    return (f"[confirm] look {number} at this confirmation (earlier: {earlier}): tested at {_pct(level)} = 1 - "
            f"{1 - nominal:.3g} / {number} looks (Bonferroni: simple, and valid whatever the dependence between "
            "looks, which share runs): over the looks the false-confirmation rate is at most alpha x (1 + 1/2 + ... "
            f"+ 1/{number}), not {number} x alpha; choosing the seeds once keeps it at alpha")


def _seeds(seeds: list[int]) -> str:
    return f"{seeds[0]}..{seeds[-1]}" if len(seeds) > 6 else str(seeds)


def _pct(level: float) -> str:
    return f"{100 * level:.4g}%"
