"""eval.checkpoints=all on real tiny cycles: one eval per saved checkpoint, resumable, reported per step."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from opsd_sweep.config import ConfigError, load_run_config
from opsd_sweep.run.keys import semantic_dict
from opsd_sweep.run.keys import run_key
from opsd_sweep.summary import main as summary_main
from tests.conftest import compose, swept_group

GRID = ["-m", "profile=tiny", "eval.checkpoints=all", "eval.average_last=2", "learning_rate=1e-2", "seed=1,2",
        "train.max_steps=4", "train.save_steps=2", "eval.n_samples=2", "eval.max_problems=8", "group=every_ckpt"]


@pytest.fixture(scope="module")
def swept(tmp_path_factory, cache_dir):
    return swept_group(tmp_path_factory, cache_dir, GRID, "every_ckpt")


def test_every_checkpoint_has_its_own_eval_and_the_final_one_is_eval_json(swept):
    run_dirs = sorted(p.parent for p in swept.glob("*/status.json"))
    assert len(run_dirs) == 2
    for run_dir in run_dirs:
        earlier = json.loads((run_dir / "eval/checkpoint-2/eval.json").read_text())
        final = json.loads((run_dir / "eval/eval.json").read_text())
        assert earlier["checkpoint"].endswith("train/checkpoint-2") and final["checkpoint"].endswith("checkpoint-4")
        assert earlier["n_problems"] == final["n_problems"] == 8
        assert sorted(p.name for p in (run_dir / "eval").glob("checkpoint-*")) == ["checkpoint-2"]


def test_a_rerun_of_the_eval_phase_evaluates_nothing_again(swept):
    import subprocess
    import sys

    from tests.conftest import REPO

    run_dir = sorted(p.parent for p in swept.glob("*/status.json"))[0]
    again = subprocess.run([sys.executable, "-m", "opsd_sweep.evaluate", str(run_dir)], cwd=REPO, text=True,
                           capture_output=True, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stdout.count("is up to date") == 2  # checkpoint-2 and the final one


def test_summary_reports_final_last_k_and_held_out_best_with_a_plot(swept, tmp_path, capsys):
    summary_main([str(swept), "--out", str(tmp_path)])
    checkpoints = pd.read_csv(tmp_path / "checkpoints.csv")
    assert sorted(checkpoints["checkpoint_step"]) == [2, 2, 4, 4] and checkpoints["run_id"].nunique() == 2
    runs = pd.read_csv(tmp_path / "runs.csv")
    final = checkpoints.loc[checkpoints["checkpoint_step"] == 4].set_index("run_id")["score"]
    assert runs.set_index("run_id")["avg_at_n"].loc[final.index].tolist() == pytest.approx(final.tolist())
    assert list(runs["checkpoint_step"]) == [4, 4]
    report = (tmp_path / "summary.md").read_text()
    assert "## Checkpoints (eval.checkpoints=all)" in report and "(k=2)" in report
    assert (tmp_path / "plots" / "checkpoints.png").stat().st_size > 0
    assert "![checkpoints](plots/checkpoints.png)" in report.split("## Checkpoints")[1]  # the plot under its section
    written = len(list((tmp_path / "plots").glob("*.png")))
    assert f"{written} plots" in capsys.readouterr().out  # the count includes it


def test_checkpoint_knobs_are_checked_and_keyed_only_when_they_change_the_evaluation():
    with pytest.raises(ConfigError) as err:
        load_run_config(compose(["eval.checkpoints=some", "eval.average_last=0"]))
    assert "eval.checkpoints='some' is not one of ['final', 'all', 'race']" in str(err.value)
    assert "eval.average_last=0 must be >= 1" in str(err.value)
    load_run_config(compose(["eval.checkpoints=all", "eval.n_samples=1"]))  # the best step is chosen across runs
    base = run_key(semantic_dict(load_run_config(compose([]))))
    assert run_key(semantic_dict(load_run_config(compose(["eval.average_last=5"])))) == base
    assert run_key(semantic_dict(load_run_config(compose(["eval.checkpoints=all"])))) != base
