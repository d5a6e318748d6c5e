"""Issue 21, item 3: the launcher's grid check and probe only read. A refused sweep next to a run dir of
an earlier release leaves every byte under results_root as it was; the takeover of that dir happens in
the cycle, under its claim."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_sweep
from tests.reliability.test_earlier_run_dirs import SWEEP, earlier_run


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under root with its bytes (None for a directory)."""
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


def test_a_refused_sweep_leaves_the_run_dir_of_an_earlier_release_untouched(tmp_path, cache_dir):
    results = tmp_path / "results"
    earlier_run(results)
    before = snapshot(results)
    proc = run_sweep([*SWEEP, "clip=0.05,-1"], results, cache_dir)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "the sweep was not started" in output, output[-3000:]
    assert snapshot(results) == before


def test_the_probe_of_an_earlier_dir_writes_nothing_and_the_cycle_takes_it_over(tmp_path, cache_dir):
    from opsd_sweep.config import load_run_config
    from opsd_sweep.cycle import probe_job, validate_job
    from tests.conftest import compose

    results = tmp_path / "results"
    old = earlier_run(results)
    cfg = compose(["executor=simulate", "group=g", "learning_rate=1e-5", "seed=1", f"results_root={results}",
                   f"cache_dir={cache_dir}"])
    before = snapshot(results)
    target = validate_job(cfg)
    action, detail, where = probe_job(cfg)
    assert snapshot(results) == before
    assert where["run_dir"] == target and Path(target).name != old.name and not Path(target).exists()
    assert action == "submit" and old.name in detail

    from opsd_sweep.cycle import run_cycle

    result = run_cycle(load_run_config(cfg))
    assert result["run_dir"] == target and result["reason"] == "done"
    assert Path(target).is_dir() and not old.exists()
