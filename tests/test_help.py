"""`--help` of the three entry points says what each does, with every config group, launcher and sweeper."""

from __future__ import annotations

import subprocess
import sys

import pytest

from opsd_sweep import CONF_DIR
from tests.conftest import REPO

GROUPS = sorted(str(p.relative_to(CONF_DIR)) for p in CONF_DIR.rglob("*")
                if p.is_dir() and p.relative_to(CONF_DIR).parts[0] != "hydra")  # sweep/lr_grid too


def help_text(module: str) -> str:
    done = subprocess.run([sys.executable, "-m", module, "--help"], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.parametrize("module", ["opsd_sweep", "opsd_sweep.evaluate"])
def test_hydra_apps_list_every_group_with_its_options(module):
    text = help_text(module)
    for group in GROUPS:
        options = ", ".join(sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml")))
        assert f"{group}: {options}" in text, group
    assert "--cfg job" in text and " -m " in text and "<results_root>/<group>/" in text
    assert "powered by Hydra" not in text  # our own text, not Hydra's default page


def test_sweep_help_says_what_a_job_is_and_names_every_launcher_and_sweeper():
    text = help_text("opsd_sweep")
    assert "One Hydra job = one cycle" in text
    for kind in ("launcher", "sweeper"):
        for option in (CONF_DIR / "hydra" / kind).glob("*.yaml"):
            assert f"\n{option.stem} " in text, f"hydra/{kind}={option.stem} is missing from --help"


def test_evaluate_help_is_about_evaluation():
    text = help_text("opsd_sweep.evaluate")
    assert text.startswith("opsd_sweep.evaluate: evaluate a base model or a checkpoint")
    assert "RUN_DIR" in text and "kind: eval_only" in text
    assert "python -m opsd_sweep.evaluate compare A B [--margin 1]" in text  # the third entry point
    assert "python -m opsd_sweep.evaluate regrade RESULTS" in text  # stored completions, today's grader


def test_summary_help_says_what_it_writes_and_shows_examples():
    text = help_text("opsd_sweep.summary")
    assert text.startswith("usage: python -m opsd_sweep.summary")
    assert "runs.csv" in text and "--baseline" in text and "examples:" in text
