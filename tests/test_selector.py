"""One selector syntax for the in-sweep baseline: the race's grid (Hydra override text) and the summary's
table (typed values, label short names) pick the same config from the same selector."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser

from hydra_plugins.opsd_race_sweeper._core import expand_grid, find_baseline
from opsd_sweep.summarize.config_stats import select_baseline
from opsd_sweep.selector import SelectorError, select_config

SAME_CONFIG = ["learning_rate=5e-6 train.max_steps=20", "learning_rate=5.0e-06 max_steps=20", "lr=5e-06,max_steps=20.0",
               "cfg.learning_rate=0.000005, cfg.train.max_steps=20"]


def race_grid() -> dict[str, tuple[str, ...]]:
    """The race's configs from real sweep overrides, as hydra/sweeper=race expands them."""
    _, grid = expand_grid(OverridesParser.create(), ["learning_rate=5e-6,1e-5", "train.max_steps=10,20"])
    return grid


def summary_table() -> pd.DataFrame:
    """The same four configs as summary.csv rows (labels from the varying columns, values typed)."""
    rows = [(lr, steps) for lr in (5e-6, 1e-5) for steps in (10, 20)]
    return pd.DataFrame({"label": [f"lr={lr:g} max_steps={steps}" for lr, steps in rows],
                         "cfg.learning_rate": [lr for lr, _ in rows], "cfg.train.max_steps": [s for _, s in rows]})


@pytest.mark.parametrize("selector", SAME_CONFIG)
def test_the_race_and_the_summary_pick_the_same_config_by_value(selector):
    assert find_baseline(selector, race_grid()) == "learning_rate=5e-06 train.max_steps=20"
    assert select_baseline(summary_table(), selector)[0] == "lr=5e-06 max_steps=20"


@pytest.mark.parametrize("selector", ["train.max_steps=0", "max_steps=0"])
def test_a_dotted_key_or_its_unambiguous_tail(selector):
    base = pd.DataFrame({"label": ["base model", "lr=5e-06"], "cfg.learning_rate": [5e-6, 5e-6],
                         "cfg.train.max_steps": [0, 20]})
    assert select_baseline(base, selector)[0] == "base model"
    assert find_baseline(f"{selector} lr=1e-5", race_grid() | {"x": ("learning_rate=1e-05", "train.max_steps=0")}) == "x"


def test_no_match_or_several_list_the_candidates_with_their_values():
    with pytest.raises(SelectorError) as none:
        find_baseline("learning_rate=3e-6", race_grid())
    text = str(none.value)
    assert "hydra.sweeper.baseline='learning_rate=3e-6' matches 0 configs" in text
    assert "learning_rate=5e-06 train.max_steps=10 (learning_rate=5e-06)" in text  # every candidate, its value
    with pytest.raises(SelectorError, match=r"--baseline='lr=5e-06' matches 2 configs \['lr=5e-06 max_steps=10', "):
        select_baseline(summary_table(), "lr=5e-06")


def test_unknown_or_ambiguous_keys_and_bad_terms_say_what_to_write():
    configs = {"a": {"train.max_steps": 0, "eval.max_steps": 1}, "b": {"train.max_steps": 5, "eval.max_steps": 1}}
    with pytest.raises(SelectorError, match=r"'max_steps' could be any of \['eval.max_steps', 'train.max_steps'\]"):
        select_config("max_steps=0", configs, "--baseline")
    with pytest.raises(SelectorError, match="'clip' is not a key that differs between the configs"):
        select_config("clip=0.05", configs, "--baseline")
    with pytest.raises(SelectorError, match="'max_steps' is not a key=value term"):
        select_config("max_steps=0 max_steps", configs, "--baseline")


def test_a_selector_meant_as_a_label_lists_the_labels():
    """'base model' where two base models make the labels 'base model model=a' and 'base model model=b'."""
    configs = {"base model model=a": {"model": "a"}, "base model model=b": {"model": "b"}, "lr=1e-05": {"model": "a"}}
    with pytest.raises(SelectorError, match=r"--baseline='base model' is no config's label .* the labels are "
                                            r"\['base model model=a', 'base model model=b', 'lr=1e-05'\]"):
        select_config("base model", configs, "--baseline")


def test_null_bool_and_text_values():
    configs = {"none": {"loss_top_k": math.nan, "loss": "paper_clip", "train.compile": False},
               "k20": {"loss_top_k": 20.0, "loss": "paper_clip", "train.compile": True},
               "tr": {"loss_top_k": math.nan, "loss": "trust_region", "train.compile": True}}
    assert select_config("loss_top_k=null loss=paper_clip", configs, "--baseline") == "none"
    assert select_config("loss_top_k=20", configs, "--baseline") == "k20"
    assert select_config("loss=trust_region", configs, "--baseline") == "tr"
    assert select_config("compile=false", configs, "--baseline") == "none"
    assert select_config("k20", configs, "--baseline") == "k20"  # a label selects itself
