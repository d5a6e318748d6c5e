"""A confirmation run that failed, on a real tiny confirmation: a rerun of the same command skips a run whose last
attempt failed (rerun_failed: false), so "rerun the same command to finish them" never finishes it. The report
names the failed run and the override that retries it, and that override does finish the confirmation."""

from __future__ import annotations

import json

import pytest
import yaml

from opsd_sweep.run.rundir import atomic_write_json
from tests.test_confirm import confirm_run_dirs, run, swept  # noqa: F401  (swept: the fixture)

pytestmark = pytest.mark.slow
CONFIRM = ["--locked", "eval=tiny_locked", "--seeds", "2"]


def test_a_failed_confirmation_run_is_named_with_the_override_that_retries_it(swept, cache_dir):  # noqa: F811
    run("opsd_sweep.confirm", str(swept), *CONFIRM, cache=cache_dir)
    config_runs = [d for d in confirm_run_dirs(swept)
                   if yaml.safe_load((d / "config.yaml").read_text())["train"]["max_steps"] > 0]
    lost = next(d for d in config_runs if yaml.safe_load((d / "config.yaml").read_text())["seed"] == 4)
    status = json.loads((lost / "status.json").read_text())
    # the run's last attempt failed, as a crash in its eval phase leaves it
    atomic_write_json(lost / "status.json", status | {"state": "failed", "error": {"message": "CUDA error"}})

    proc = run("opsd_sweep.confirm", str(swept), *CONFIRM, cache=cache_dir, code=1)
    assert json.loads((lost / "status.json").read_text())["state"] == "failed"  # the rerun skipped it
    assert "1 of 4 run(s) did not finish" in proc.stdout
    assert "1 failed (config seed 4)" in proc.stdout and "'rerun_failed=true' after '--'" in proc.stdout
    result = json.loads((swept / "confirm.json").read_text())
    assert result["failed_runs"] == ["config seed 4"] and result["unfinished_runs"] == ["config seed 4"]
    assert "rerun_failed=true" in (swept / "confirm.md").read_text()
    # 1 of the 2 planned pairs scored: an interim look, marked as such wherever the verdict word is shown
    assert result["complete"] is False and result["verdict"].startswith("INTERIM: ")
    assert result["verdict_line"].startswith("INTERIM (1 of 2 planned seed pairs): ")
    interim_line = next(line for line in proc.stdout.splitlines() if "config - baseline on tiny-arith-locked" in line)
    assert interim_line.startswith("INTERIM (1 of 2 planned seed pairs): "), interim_line
    assert "**INTERIM (1 of 2 planned seed pairs): " in (swept / "confirm.md").read_text()

    proc = run("opsd_sweep.confirm", str(swept), *CONFIRM, "--", "rerun_failed=true", cache=cache_dir)
    assert json.loads((lost / "status.json").read_text())["state"] == "done"
    result = json.loads((swept / "confirm.json").read_text())
    assert result["failed_runs"] == [] and result["unfinished_runs"] == []
    assert result["complete"] is True and not result["verdict"].startswith("INTERIM")  # every pair: the verdict
    assert result["benchmarks"][1]["difference"]["n"] == 2
