"""Issue 48, part 3: every entry point that takes Hydra overrides refuses a typo'd key as `python -m opsd_sweep` does,
naming the key it meant (one shared check, opsd_sweep.cli), before Hydra composes anything: the standalone evaluation,
and confirm's overrides after `--` (and its --locked ones). Hydra's own advice ('+eval.n_sample=4') would fail
on the schema. The summary and status take flags, not overrides (argparse)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO


def run(module: str, *args: str, cwd=REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("module", ["opsd_sweep", "opsd_sweep.evaluate"])
@pytest.mark.parametrize("multirun", [[], ["-m"]], ids=["single", "multirun"])
def test_a_hydra_app_names_the_key_a_typo_meant(module, multirun):
    proc = run(module, *multirun, "eval.n_sample=4")
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert ("unknown config key 'eval.n_sample' in override 'eval.n_sample=4': did you mean 'eval.n_samples'?"
            in proc.stderr), proc.stderr
    assert f"`python -m {module} --cfg job` prints the composed config" in proc.stderr
    assert "+eval.n_sample" not in proc.stderr and "Traceback" not in proc.stderr


def test_the_evaluations_compare_and_run_dir_forms_are_not_read_as_overrides(tmp_path):
    proc = run("opsd_sweep.evaluate", "compare", "--help")
    assert proc.returncode == 0 and "--margin" in proc.stdout, proc.stderr
    proc = run("opsd_sweep.evaluate", str(tmp_path))  # a run dir without config.yaml: the eval phase's own refusal
    assert proc.returncode != 0 and "unknown config key" not in proc.stderr


@pytest.mark.parametrize("args", [["--", "eval.n_sample=4"], ["--locked", "eval=aime25 eval.n_sample=4"]],
                         ids=["after-dashes", "locked"])
def test_confirm_names_the_key_a_typo_meant_before_reading_the_sweep(tmp_path, args):
    proc = run("opsd_sweep.confirm", str(tmp_path / "no-such-sweep"), *args)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.stderr.startswith("confirm: unknown config key 'eval.n_sample' in override 'eval.n_sample=4': "
                                  "did you mean 'eval.n_samples'?"), proc.stderr
    assert "no readable run directories" not in proc.stderr  # refused first: nothing was read
    assert proc.stdout == ""


def test_hydras_own_settings_and_group_choices_pass_the_check():
    from opsd_sweep.cli import unknown_key_problems

    assert unknown_key_problems(["hydra/launcher=slurm_4gpu", "rerun_failed=true", "+sweep=demo", "-m",
                                 "eval=aime25", "hydra.launcher.gpus=[0]", "train.lora.r=4"]) == []
