"""Issue 16, item 9: Ctrl-C (SIGINT to the whole sweep) and SIGTERM (to the sweep process) stop the
cycles, mark their runs interrupted with the phase time so far, print one line, exit 130 / 143; a rerun
resumes from the newest checkpoint."""

from __future__ import annotations

import os
import signal

import pytest

from tests.conftest import run_sweep
from tests.orchestration.conftest import TINY, has_checkpoint, run_dirs, start_sweep, status, steps_logged, wait_until

pytestmark = pytest.mark.slow

ARGS = ["-m", *TINY, "train.max_steps=40", "seed=1"]


@pytest.mark.parametrize("signum, whole_group, code", [(signal.SIGINT, True, 130), (signal.SIGTERM, False, 143)])
def test_an_interrupted_sweep_marks_its_run_and_exits_with_the_signal(tmp_path, tiny_cache, signum, whole_group,
                                                                      code):
    log = tmp_path / "sweep.log"
    sweep = start_sweep(ARGS, tmp_path, tiny_cache, log)
    run = lambda: run_dirs(tmp_path).get(1)  # noqa: E731
    wait_until(lambda: run() is not None and has_checkpoint(run(), 1), 600, "the first checkpoint")
    if whole_group:  # what a terminal's Ctrl-C does: every process of the sweep gets SIGINT
        os.killpg(sweep.pid, signum)
    else:  # `kill PID` of the sweep, or SLURM stopping the allocation it runs in
        os.kill(sweep.pid, signum)
    assert sweep.wait(120) == code, log.read_text()[-3000:]
    output = log.read_text()
    assert "Traceback" not in output, output[-3000:]
    assert f"interrupted by {signum.name}: stopped 1 running job(s), their runs marked interrupted" in output
    s = status(run())
    assert s["state"] == "interrupted" and s["phase_seconds"]["train"] > 0, s
    assert f"interrupted by {signum.name} while training" in s["error"]["message"]
    if signum == signal.SIGTERM:  # the rerun resumes it (one rerun is enough to show it)
        again = run_sweep(ARGS, tmp_path, tiny_cache)
        assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
        assert status(run())["state"] == "done" and status(run())["attempts"] == 2
        assert "resumed from" in (run() / "logs" / "train.log").read_text()
        assert steps_logged(run()) == list(range(1, 41))
