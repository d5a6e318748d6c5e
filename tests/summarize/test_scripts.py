"""The researcher scripts of analysis/ run as `python analysis/NAME.py RESULTS` and write a PNG and a CSV
(the slow demo test runs them on the tiny demo's results too); the published-results CSV is read by
--external."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from opsd_sweep.summary import main as summary_main
from tests.summarize.test_summary import write_sweep

REPO = Path(__file__).resolve().parents[2]


def run_script(name: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "analysis" / f"{name}.py"), *args], cwd=REPO, text=True,
                          capture_output=True, timeout=300, check=False)


def check_all_scripts(results: Path, out: Path, a: str, b: str) -> dict[str, pd.DataFrame]:
    """Run every script on a results root; each must write its PNG and a non-empty CSV."""
    tables = {}
    for name, extra in (("training_curves", []), ("kl_vs_score", []), ("rollout_length", []),
                        ("problem_agreement", ["--a", a, "--b", b])):
        proc = run_script(name, str(results), "--out", str(out), *extra)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert (out / f"{name}.png").stat().st_size > 10_000, name
        tables[name] = pd.read_csv(out / f"{name}.csv")
        assert not tables[name].empty, name
    return tables


def test_each_script_writes_its_figure_and_table(tmp_path):
    write_sweep(tmp_path / "sweep", effects={5e-6: 0.0, 1e-5: 1.2, 2e-5: 0.3}, seeds=(1, 2, 3))
    tables = check_all_scripts(tmp_path / "sweep", tmp_path / "out", "lr=5e-06", "lr=1e-05")
    curves = tables["training_curves"]
    assert set(curves["key"]) == {"loss", "kl_true", "grad_norm"} and curves["run_id"].nunique() == 9
    assert len(tables["kl_vs_score"]) == 9 and tables["rollout_length"]["steps"].eq(20).all()
    agreement = tables["problem_agreement"]
    assert len(agreement) == 30 and agreement["b_minus_a"].mean() > 10  # 1e-5 is ~25 points better
    assert np.allclose(agreement["b_minus_a"], agreement["rate_b"] - agreement["rate_a"])


def test_a_script_names_the_fix_when_its_data_is_missing(tmp_path):
    proc = run_script("training_curves", str(tmp_path / "nothing"))
    assert proc.returncode != 0 and "run a sweep first" in proc.stderr
    write_sweep(tmp_path / "sweep", effects={5e-6: 0.0, 1e-5: 0.0}, seeds=(1, 2))
    proc = run_script("problem_agreement", str(tmp_path / "sweep"), "--a", "lr=5e-06", "--b", "lr=3e-05")
    assert proc.returncode != 0 and "--b='lr=3e-05' matches 0 configs" in proc.stderr


def test_the_published_results_csv_is_read_by_external(tmp_path):
    csv = REPO / "analysis" / "external" / "published_opsd_aime24.csv"
    published = pd.read_csv(csv)
    assert published["reference"].notna().all() and published["avg_at_n"].between(0, 100).all()
    write_sweep(tmp_path / "sweep", effects={5e-6: 0.0}, seeds=(1, 2, 3))
    summary_main([str(tmp_path / "sweep"), "--out", str(tmp_path / "out"), "--no-plots", "--external", str(csv)])
    summary = pd.read_csv(tmp_path / "out" / "summary.csv").set_index("label")
    rerun = summary.loc["OPSD recipe rerun (another rollout seed) [external]"]
    assert rerun["n"] == 2 and rerun["mean"] == pytest.approx((57.78 + 51.67) / 2)
