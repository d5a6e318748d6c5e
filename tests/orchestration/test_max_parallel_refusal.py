"""hydra.launcher.max_parallel < 1 refuses the sweep before any job: the real `python -m opsd_sweep -m` exits
non-zero with the setting, its fix and "Nothing was run or written." (no traceback), leaving no file."""

from __future__ import annotations

import pytest

from tests.conftest import run_sweep


@pytest.mark.parametrize("value", [0, -2])
def test_max_parallel_below_one_is_refused_before_any_job(tmp_path, cache_dir, value):
    results = tmp_path / "results"
    proc = run_sweep(["-m", "executor=simulate", "learning_rate=1e-5,2e-5", f"hydra.launcher.max_parallel={value}",
                      "group=p"], results, cache_dir, timeout=120)
    assert proc.returncode != 0, proc.stdout[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert f"hydra.launcher.max_parallel={value} must be >= 1" in proc.stderr
    assert "e.g. hydra.launcher.max_parallel=4" in proc.stderr and "Nothing was run or written." in proc.stderr
    written = [p for p in results.rglob("*") if p.is_file()] if results.exists() else []
    assert not written, written
