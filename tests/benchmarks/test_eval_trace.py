"""The eval's step trace (benchmarks/eval_trace.py): what a record says about where the eval's minutes
went, its plot, and bench_cycle's refusals of its probes where they do not belong."""

from __future__ import annotations

import json
import subprocess
import sys
from argparse import Namespace

from benchmarks import bench_cycle, eval_trace
from tests.conftest import REPO


def crowded_then_tail():
    """An eval of 300 samples on 256 slots: 100 crowded steps of 20 ms (2 samples done each from step 51),
    then 800 tail steps of 5 ms with 200 -> 1 samples left (one done every 4 steps)."""
    steps, end, left = [], 0.0, 300
    for i in range(100):
        done = 2 if i >= 50 else 0
        end += 0.020
        steps.append((end, 0.020, left, done))
        left -= done
    for i in range(800):
        done = 1 if i % 4 == 3 else 0
        end += 0.005
        steps.append((end, 0.005, left, done))
        left -= done
    return steps


def test_the_summary_splits_the_steps_by_sequences_decoding_and_says_when_the_samples_were_done():
    steps = crowded_then_tail()
    summary = eval_trace.summarize_steps(steps, max_num_seqs=256)
    assert summary["steps"] == 900 and summary["step_seconds"] == 6.0
    bands = {b["sequences"]: b for b in summary["by_sequences"]}
    assert bands["65-256"]["steps"] == 100 + 4 * (200 - 64)  # crowded, then the tail while > 64 were left
    assert bands["1-4"] == {"sequences": "1-4", "steps": 16, "seconds": 0.1, "median_step_ms": 5.0}
    assert bands["5-16"]["median_step_ms"] == bands["17-64"]["median_step_ms"] == 5.0
    assert sum(b["steps"] for b in summary["by_sequences"]) == 900
    assert summary["done_by_s"]["100%"] == round(steps[-1][0], 1)  # the last sample ends the eval
    assert summary["done_by_s"]["50%"] == round(steps[99 + 4 * 50][0], 1)  # sample 150: the 50th of the tail
    assert len(summary["timeline"]) == 450 and summary["timeline"][0] == [0.04, 20.0, 256]  # windows of 2 steps


def test_the_timeline_is_cut_to_at_most_600_windows_that_cover_every_step():
    steps = [(0.01 * (i + 1), 0.01, 1000 - i // 2, i % 2) for i in range(1999)]
    timeline = eval_trace.summarize_steps(steps, max_num_seqs=256)["timeline"]
    assert len(timeline) <= eval_trace.TIMELINE_POINTS
    assert timeline[-1][0] == round(steps[-1][0], 2)  # the last window ends at the last step
    assert all(point[1] == 10.0 for point in timeline)


def test_a_record_with_a_trace_is_plotted_and_one_without_is_refused_by_name(tmp_path):
    record = {"requests": 300, "generation_s": 4.0, "kv_cache_dtype": "auto", "attention_backend": "vLLM's choice",
              "adapter": "LoRARequest", "engine_steps": eval_trace.summarize_steps(crowded_then_tail(), 256)}
    path = tmp_path / "aime_sized_eval_2026-12-03_auto.json"
    path.write_text(json.dumps(record))
    done = subprocess.run([sys.executable, "-m", "benchmarks.eval_trace", str(path)], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    png = path.with_suffix(".png")
    assert done.stdout.strip() == str(png) and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    old = REPO / "benchmarks/measured/aime_sized_eval_2026-12-03_fp8.json"  # recorded before the trace existed
    refused = subprocess.run([sys.executable, "-m", "benchmarks.eval_trace", str(old), "--out", str(tmp_path / "x.png")],
                             cwd=REPO, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 1 and "has no engine_steps" in refused.stderr and old.name in refused.stderr


def test_the_cycle_benchmark_keeps_its_probes_to_part_2_alone(tmp_path):
    probe = subprocess.run([sys.executable, "-m", "benchmarks.bench_cycle", "--work", str(tmp_path),
                            "--eval-without-adapter"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert probe.returncode == 2 and "probes of part 2 alone: add --eval-only" in probe.stderr
    record = tmp_path / "aime_sized_eval_probe.json"
    record.write_text(json.dumps({"generation_s": 400.0, "kv_cache_dtype": "auto", "attention_backend": "FLASHINFER",
                                  "adapter": "LoRARequest"}))
    projected = subprocess.run([sys.executable, "-m", "benchmarks.bench_cycle", "--work", str(tmp_path / "w"),
                                "--eval-from", str(record)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert projected.returncode == 2 and "is a probe of part 2" in projected.stderr and "FLASHINFER" in projected.stderr
    assert not (tmp_path / "w").exists()  # refused before anything is built
    lost = tmp_path / "bench_cycle_lost.json"  # part 1's record, written before a part 2 that never finished
    lost.write_text(json.dumps({"steady_step_s": 5.3, "aime_eval": "not finished"}))
    unfinished = subprocess.run([sys.executable, "-m", "benchmarks.bench_cycle", "--work", str(tmp_path / "w"),
                                 "--eval-from", str(lost)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert unfinished.returncode == 2 and "its part 2 is 'not finished'" in unfinished.stderr


def test_eval_only_reuses_the_adapter_cycle_only_of_the_same_settings(tmp_path):
    """--eval-only reuses a finished 1-step cycle of its --work; a cycle run with other overrides (another rollout
    KV cache: another engine share for part 2) or one that did not finish is never taken for it."""
    results = tmp_path / "results"
    default = bench_cycle.adapter_settings(Namespace(eval_kv_cache="auto", override=[]))
    fp8_rollouts = bench_cycle.adapter_settings(Namespace(eval_kv_cache="auto", override=["rollout.kv_cache_dtype=fp8"]))
    done = results / bench_cycle.adapter_group(fp8_rollouts) / "lr5e-06-clip0.05-s1-0af1e0c0"
    done.mkdir(parents=True)
    (done / "status.json").write_text(json.dumps({"state": "done"}))
    assert bench_cycle.finished_adapter_run(results, fp8_rollouts) == done
    assert bench_cycle.finished_adapter_run(results, default) is None  # another engine: not reused
    failed = results / bench_cycle.adapter_group(default) / "lr5e-06-clip0.05-s1-1d488975"
    failed.mkdir(parents=True)
    (failed / "status.json").write_text(json.dumps({"state": "failed"}))
    assert bench_cycle.finished_adapter_run(results, default) is None  # not finished: run again


def test_a_probe_setting_wins_over_the_evaluators_own(monkeypatch):
    """engine_args_with changes one setting the evaluator itself passes (max_loras=1 for one checkpoint)."""
    import types

    stand_in = types.ModuleType("vllm")
    stand_in.EngineArgs = lambda **kwargs: kwargs  # records what an engine would be started with
    monkeypatch.setitem(sys.modules, "vllm", stand_in)
    with eval_trace.engine_args_with(max_loras=3):
        import vllm

        assert vllm.EngineArgs(model="m", max_loras=1) == {"model": "m", "max_loras": 3}
    assert stand_in.EngineArgs(max_loras=1) == {"max_loras": 1}  # restored on the way out


def test_the_shared_tail_probe_needs_two_checkpoints_or_more(tmp_path):
    one = subprocess.run([sys.executable, "-m", "benchmarks.bench_shared_tail", "--work", str(tmp_path / "w"),
                          "--checkpoints", "1"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert one.returncode == 2 and "one checkpoint alone is bench_cycle.py --eval-only" in one.stderr
    assert not (tmp_path / "w").exists()  # refused before anything is built
