"""bench_cycle.py's CPU smoke check: a real 3-cycle sweep through `python -m opsd_sweep -m` (tiny
profile), read back from the runs' own records into bench_cycle_<date>.json."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow


def test_the_cycle_benchmark_measures_a_tiny_sweep_from_its_records(tmp_path, tiny_cache):
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "benchmarks.bench_cycle", "--work", str(tmp_path / "work"), "--tiny",
                           "--cache-dir", str(tiny_cache), "--steps", "2", "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    [path] = out.glob("bench_cycle_*.json")
    report = json.loads(path.read_text())
    assert path.name == f"bench_cycle_{report['date']}.json"
    assert report["cycles"] == 3 and report["cycles_in_a_used_worker"] == 2
    assert report["launcher_path"] == "warm phase workers"
    for cycle in report["per_cycle"]:  # the figures are the runs' own records
        run_dir = tmp_path / "work" / "results" / "bench-cycle" / cycle["run"]
        status = json.loads((run_dir / "status.json").read_text())
        assert cycle["phase_seconds"] == status["phase_seconds"]
        assert cycle["gpu_minutes"] == round(sum(status["phase_seconds"].values()) / 60, 3)  # CPU: no GPU-hours
        assert len(cycle["step_seconds"]) == 2
    steps = sorted(s for c in report["per_cycle"] for s in c["step_seconds"][1:])
    assert report["steady_step_s"] == round(steps[1], 3)  # the median of the steady steps, step 1 left out
    later = [c["fixed_cost_s"] for c in report["per_cycle"][1:]]
    assert report["fixed_cost_s_after_first"] == round(sum(later) / 2, 1)
    assert report["gpu_minutes_per_cycle"] > 0 and "PROJECTION" in report["note"]


def test_the_cycle_benchmark_refuses_a_sweep_too_short_to_measure(tmp_path):
    done = subprocess.run([sys.executable, "-m", "benchmarks.bench_cycle", "--work", str(tmp_path), "--tiny",
                           "--cycles", "2"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "give >= 3 cycles" in done.stderr


def test_the_cycle_benchmark_refuses_an_fp8_eval_it_cannot_run_or_a_record_of_another_evaluator(tmp_path):
    tiny = subprocess.run([sys.executable, "-m", "benchmarks.bench_cycle", "--work", str(tmp_path), "--tiny",
                           "--eval-kv-cache", "fp8"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert tiny.returncode == 2 and "--tiny --eval-kv-cache fp8" in tiny.stderr and "hf" in tiny.stderr
    bf16_record = REPO / "benchmarks/measured/aime_sized_eval_2026-12-02_max_num_seqs512.json"  # no kv_cache_dtype: auto
    mixed = subprocess.run([sys.executable, "-m", "benchmarks.bench_cycle", "--work", str(tmp_path), "--eval-kv-cache",
                            "fp8", "--eval-from", str(bf16_record)], cwd=REPO, capture_output=True, text=True,
                           timeout=120)
    assert mixed.returncode == 2 and "kv_cache_dtype auto, not --eval-kv-cache fp8" in mixed.stderr


def test_the_eval_only_benchmark_refuses_options_of_part_1(tmp_path):
    for part_1 in (["--tiny"], ["--skip-eval"]):
        done = subprocess.run([sys.executable, "-m", "benchmarks.bench_cycle", "--work", str(tmp_path), "--eval-only",
                               *part_1], cwd=REPO, capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and "--eval-only measures part 2 on a GPU" in done.stderr, part_1
    assert not list(tmp_path.iterdir())  # refused before anything is built


def test_the_engine_share_probe_is_part_2_alone_at_a_share_that_fits_and_never_a_cycles_eval(tmp_path):
    def bench(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "benchmarks.bench_cycle", "--work", str(tmp_path), *args],
                              cwd=REPO, capture_output=True, text=True, timeout=120)

    alone = bench("--eval-engine-share", "0.9")
    assert alone.returncode == 2 and "probes of part 2 alone: add --eval-only" in alone.stderr
    too_much = bench("--eval-only", "--eval-engine-share", "1.5")
    assert too_much.returncode == 2 and "--eval-engine-share 1.5: a GPU share in (0, 0.95]" in too_much.stderr
    record = json.loads((REPO / "benchmarks/measured/aime_sized_eval_2026-12-04_auto_published_part_cut.json").read_text())
    probe = tmp_path / "probe.json"
    probe.write_text(json.dumps(record | {"engine_share": 0.9}))
    refused = bench("--eval-from", str(probe), "--sweep-from",
                    str(REPO / "benchmarks/measured/gpu_check_2026-12-03_05fed59.json"))
    assert refused.returncode == 2 and "is a probe of part 2" in refused.stderr
    assert not (tmp_path / "results").exists()
