"""The seed experiments of conf/sweep/: each arm composes and validates, one arm is the unchanged
recipe (the in-sweep baseline), and the documented commands run as a real multirun and summary."""

from __future__ import annotations

import re
import shlex

import pandas as pd
import pytest
from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser

from opsd_sweep import CONF_DIR
from opsd_sweep.config import load_run_config
from opsd_sweep.run.keys import semantic_dict
from opsd_sweep.summary import main as summary_main
from tests.conftest import compose, run_sweep

PRESETS = sorted(p.stem for p in (CONF_DIR / "sweep").glob("*.yaml") if p.stem != "demo")  # demo: tests/demo


def arms(preset: str) -> list[list[str]]:
    """The job overrides `-m +sweep=PRESET` expands to (seeds aside), as Hydra's basic sweeper does."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = hydra_compose(config_name="config", overrides=[f"+sweep={preset}"], return_hydra_config=True)
    params = cfg.hydra.sweeper.params
    parsed = OverridesParser.create().parse_overrides([f"{key}={value}" for key, value in params.items()])
    return [job for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]


def documented(preset: str, program: str) -> list[str]:
    """The arguments of the `python -m PROGRAM ...` line in the preset's header comment."""
    text = (CONF_DIR / "sweep" / f"{preset}.yaml").read_text()
    line = re.search(rf"^#\s+python -m {re.escape(program)} (.+?)(\s+#.*)?$", text, re.M)
    assert line, f"conf/sweep/{preset}.yaml documents no `python -m {program}` command"
    return shlex.split(line.group(1))


def test_there_are_the_three_seed_experiments():
    assert PRESETS == ["lr_grid", "top_k", "trust_region"]


@pytest.mark.parametrize("preset", PRESETS)
def test_every_arm_validates_and_one_is_the_unchanged_recipe(preset):
    recipe = semantic_dict(load_run_config(compose([])))
    runs = [load_run_config(compose([f"+sweep={preset}", *job])) for job in arms(preset)]
    assert len(runs) >= 2 and {run.group for run in runs} == {preset}
    semantics = [semantic_dict(run) for run in runs]
    assert semantics.count(recipe) == 1, "exactly one arm must be the recipe unchanged (the baseline)"
    assert len({str(s) for s in semantics}) == len(runs), "two arms compute the same thing"


def test_lr_grid_arms_are_the_requested_schedule():
    by_lr = {run.learning_rate: run.train for run in
             (load_run_config(compose(["+sweep=lr_grid", *job])) for job in arms("lr_grid"))}
    assert sorted(by_lr) == [5e-6, 1.4e-5, 2e-5, 4e-5]
    for lr in (1.4e-5, 2e-5, 4e-5):
        assert (by_lr[lr].lr_scheduler, by_lr[lr].warmup_ratio) == ("linear", 0.03)
    assert (by_lr[5e-6].lr_scheduler, by_lr[5e-6].warmup_ratio) == ("constant", 0.0)


@pytest.mark.parametrize("preset", PRESETS)
def test_documented_commands_run_and_find_the_baseline(preset, tmp_path, cache_dir):
    """The header's sweep (simulated: same grid, no GPU) and summary command, as a user runs them."""
    sweep = documented(preset, "opsd_sweep")
    assert sweep[:2] == ["-m", f"+sweep={preset}"]
    done = run_sweep([*sweep[:2], "seed=1,2", "executor=simulate"], tmp_path, cache_dir, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    summary = documented(preset, "opsd_sweep.summary")
    assert summary[0] == f"results/{preset}"
    out = tmp_path / "report"
    summary_main([str(tmp_path / preset), *summary[1:], "--out", str(out), "--no-plots"])
    table = pd.read_csv(out / "summary.csv")
    assert len(table) == len(arms(preset)) and list(table["n"].unique()) == [2]
    baseline = table.loc[table["verdict"] == "baseline"]
    assert len(baseline) == 1 and "in-sweep baseline" in set(table["verdict_vs"])
    assert set(table.loc[table["verdict"] != "baseline", "vs_baseline"]) == {"run scores"}
