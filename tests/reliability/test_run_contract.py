"""Issue 21: the run contract. One table of the fields added since earlier releases (run/added.py), each
a field of today's schema; config validation checks values only, the probes of this machine (vllm, a
tracker's package) are the pre-flight's, and the config module imports no tracker code."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from opsd_sweep.config import get_dotted, load_run_config
from opsd_sweep.preflight import preflight_problems
from opsd_sweep.run.added import ADDED
from tests.conftest import REPO, compose


def _leaves(dotted: str, value) -> dict:
    """A section's old value (e.g. train.collapse) as one entry per field."""
    if not isinstance(value, dict):
        return {dotted: value}
    return {leaf: v for key, sub in value.items() for leaf, v in _leaves(f"{dotted}.{key}", sub).items()}


def test_every_added_field_is_a_field_of_todays_schema_at_a_valid_old_value():
    old = {leaf: v for dotted, added in ADDED.items() for leaf, v in _leaves(dotted, added.old).items()}
    run = load_run_config(compose([f"{dotted}={'null' if value is None else value}" for dotted, value in old.items()]))
    assert {dotted: get_dotted(run, dotted) for dotted in old} == old


VALIDATE = """
import sys
from opsd_sweep.config import load_run_config
from tests.conftest import compose
load_run_config(compose(["train.report_to=tensorboard"]))
print(sorted(sys.modules))
"""


def test_config_validation_imports_no_tracker_or_probe_code():
    loaded = subprocess.run([sys.executable, "-c", VALIDATE], capture_output=True, text=True, check=True,
                            cwd=REPO).stdout
    assert "opsd_sweep.trackers" not in loaded and "opsd_sweep.preflight" not in loaded


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed here")
def test_backend_vllm_without_vllm_is_refused_by_the_preflight_not_by_validation():
    run = load_run_config(compose(["eval.backend=vllm", "train.num_gpus=1", "train.per_device_batch_size=4",
                                   "train.grad_accum_steps=8", "train.global_batch_size=32"]))
    problems = preflight_problems(run, train=False)
    assert any(p.startswith("eval.backend=vllm but vllm is not installed here: make install-gpu") for p in problems)
