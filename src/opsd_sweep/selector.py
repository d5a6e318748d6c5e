"""One config of a sweep picked by its values: the selector syntax of the in-sweep baseline, shared by the
race (hydra.sweeper.baseline) and the summary (--baseline).

A selector is `key=value` terms separated by spaces or commas, e.g. `learning_rate=5e-6 clip=0.05`.
- key: a config key (`train.max_steps`; `cfg.train.max_steps` as in runs.csv), an unambiguous dotted
  tail of one (`max_steps`), or the short name a summary label uses (`lr` for learning_rate);
- value: compared by value, not as text: `5e-6`, `5.0e-06` and `0.000005` are one number; `null` (or
  `none`) is an unset knob; `true` / `false` are booleans; anything else compares as text.
A config matches when every term does; a selector that is exactly a config's label selects that config.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping
from typing import Any

# config key -> the name summary labels give it; the caps and thinking switches name their phase, since the
# shortest unique tail of a lone one ("max_new_tokens", "thinking") would not say whether it is training's or eval's
SHORT_NAMES = {"learning_rate": "lr",
               "rollout.max_new_tokens": "rollout_max_tokens", "eval.max_new_tokens": "eval_max_tokens",
               "train.student_thinking": "student_thinking", "train.teacher_thinking": "teacher_thinking",
               "eval.thinking": "eval_thinking"}
_LONG_NAMES = {short: key for key, short in SHORT_NAMES.items()}


class SelectorError(ValueError):
    """A selector that selects no config, or more than one; the message lists the configs."""


def parse_selector(selector: str, flag: str) -> list[tuple[str, str]]:
    """The (key, value) terms of a selector; raises naming `flag` on a term that is not key=value."""
    terms = [t for t in re.split(r"[,\s]+", selector.strip()) if t]
    bad = [t for t in terms if "=" not in t or t.startswith("=")] or ([] if terms else [selector])
    if bad:
        raise SelectorError(f"{flag}={selector!r}: {bad[0]!r} is not a key=value term (e.g. "
                            f"{flag}='lr=5e-06' or 'learning_rate=5e-6 clip=0.05')")
    return [(key, value) for key, _, value in (t.partition("=") for t in terms)]


def resolve_key(name: str, keys: set[str], selector: str, flag: str) -> str:
    """The config key a selector's key names: itself, the long name of a label's short name, or the one key
    it is the dotted tail of."""
    name = name.removeprefix("cfg.")
    names = {name, _LONG_NAMES.get(name, name)}
    exact = sorted(names & keys)
    found = exact or sorted(k for k in keys if any(k.endswith("." + n) for n in names))
    if len(found) == 1:
        return found[0]
    if found:
        raise SelectorError(f"{flag}={selector!r}: {name!r} could be any of {found}; write the full key")
    raise SelectorError(f"{flag}={selector!r}: {name!r} is not a key that differs between the configs; those "
                        f"are {sorted(keys)}")


def as_value(text: Any) -> Any:
    """A selector value (or a value written as text, as Hydra's overrides are) as a number, bool, None or
    text."""
    if not isinstance(text, str):
        return text
    stripped = text.strip().strip("'\"")
    if stripped.lower() in ("null", "none"):
        return None
    if stripped.lower() in ("true", "false"):
        return stripped.lower() == "true"
    try:
        return float(stripped)
    except ValueError:
        return stripped


def same_value(value: Any, wanted: str) -> bool:
    """Whether a config's value is the selector's: numbers within rounding, an unset knob (None or NaN, as
    a table holds it) for null, booleans for true/false, else equal text."""
    want, have = as_value(wanted), as_value(value)
    if want is None:
        return have is None or (isinstance(have, float) and math.isnan(have))
    if isinstance(want, bool) or _is_bool(have):
        return _is_bool(have) and bool(have) == want
    if isinstance(want, float) and isinstance(have, numbers.Real):
        return math.isclose(float(have), want, rel_tol=1e-9)
    return str(have) == str(want)


def _is_bool(value: Any) -> bool:
    return type(value).__name__ in ("bool", "bool_")  # numpy's bool is no subclass of bool


def select_config(selector: str, configs: Mapping[str, Mapping[str, Any]], flag: str) -> str:
    """The label of the one config that `selector` picks out of `configs` ({label: {config key: value}}).

    `flag` names the setting in errors (e.g. '--baseline', 'hydra.sweeper.baseline'). Raises SelectorError
    listing the configs when the selector matches none or several, or names a key no config has.
    """
    if selector in configs:
        return selector
    if "=" not in selector:  # meant as a label (e.g. 'base model' where several configs are base models)
        raise SelectorError(f"{flag}={selector!r} is no config's label and holds no key=value term; the labels are "
                            f"{sorted(configs)}: pass one of them whole, or key=value terms (e.g. {flag}='lr=5e-06')")
    keys = set().union(*(values.keys() for values in configs.values()))
    terms = [(resolve_key(key, keys, selector, flag), value) for key, value in parse_selector(selector, flag)]
    matched = [label for label, values in configs.items()
               if all(key in values and same_value(values[key], value) for key, value in terms)]
    if len(matched) == 1:
        return matched[0]
    shown = "; ".join(f"{label} ({', '.join(f'{k}={values.get(k)}' for k, _ in terms)})"
                      for label, values in configs.items())
    which = f" {matched}" if matched else ""
    raise SelectorError(f"{flag}={selector!r} matches {len(matched)} configs{which}; it must match exactly "
                        f"one of: {shown}")
