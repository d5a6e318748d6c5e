"""The eval benchmarks' length models (src/opsd_sweep/costs/length_model.py), the KV-read floor, and the step model's
scheduler limited by the KV cache (benchmarks/eval_step_model.py) that projects a measured part (issue 39)."""

from __future__ import annotations

import json
import statistics

import numpy as np
import pytest

from benchmarks import bench_cycle, eval_trace
from benchmarks import eval_step_model as model
from opsd_sweep.costs import length_model as lm

QWEN3_1_7B = {"num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
              "hidden_size": 2048, "torch_dtype": "bfloat16"}


def test_the_published_model_has_the_sources_mean_and_cap_share_and_names_them():
    published = lm.published()
    low, high = lm.PUBLISHED_MEAN_BAND
    assert low <= published.parameters["expected_mean"] <= high
    draws = published.draw(2_000, 12, seed=0)
    assert statistics.fmean(draws) == pytest.approx(19_000, rel=0.01)  # the mean after the cap
    assert sum(x == lm.CAP for x in draws) / len(draws) == pytest.approx(0.05, abs=0.005)
    assert max(draws) == lm.CAP and min(draws) >= lm.MIN_TOKENS
    sources = " ".join(published.parameters["sources"])
    assert "AryamaVMurthy/OPSD-thinking-research" in sources and "reproductions/05_results/" in sources
    assert "2,191 output tok/s" in sources and "84 requests" in sources
    assert published.draw(8, 12, seed=0) == draws[:96]  # a part is the first problems of the eval's draw


def test_the_short_probe_draws_the_lengths_every_record_before_issue_39_was_forced_to():
    drawn = lm.short().draw(30, 12, seed=0)
    # benchmarks/measured/aime_sized_eval_2026-12-03_auto_without_adapter.json: 1,715,343 tokens, mean 4,764.8
    assert sum(drawn) == 1_715_343 and sum(x == lm.CAP for x in drawn) == 3
    described = lm.record_fields(lm.short(), drawn)
    assert described["eval_length_mean_tokens"] == 4764.8
    assert described["length_model"]["name"] == "short" and "SHORT PROBE" in described["length_model"]["label"]


def write_eval(path, problems):
    """A hand-built eval.json: problems = {id: [(n_tokens, correct, finish_reason), ...]}."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"sampling": {"max_tokens": 38912}, "problems": [
        {"id": pid, "samples": [{"n_tokens": n, "correct": ok, "finish_reason": reason, "pred": "1"}
                                for n, ok, reason in samples]} for pid, samples in problems.items()]}))


SWEEP = {"p0": [(1_000, True, "stop"), (38_912, False, "length"), (2_000, True, "stop"), (30_000, False, "stop")],
         "p1": [(5_000, False, "stop"), (6_000, False, "stop"), (38_912, False, "length"), (7_000, False, "stop")],
         "p2": [(300, True, "stop"), (400, True, "stop"), (500, True, "stop"), (600, True, "stop")]}


def test_a_sweeps_model_gives_back_each_problems_recorded_lengths_and_keeps_correct_and_wrong_apart(tmp_path):
    write_eval(tmp_path / "results/g/run-s1/eval/eval.json", SWEEP)
    sweep = lm.parse(f"sweep:{tmp_path / 'results'}")
    assert sweep.name == "sweep" and sweep.parameters["eval_files"] == 1
    assert sweep.draw(3, 4) == [n for samples in SWEEP.values() for n, _, _ in samples]  # as recorded
    rows = {row["id"]: row for row in sweep.parameters["per_problem"]}
    assert rows["p0"] == {"id": "p0", "n_correct": 2, "n_wrong": 2, "mean_correct": 1_500.0, "mean_wrong": 34_456.0,
                          "at_cap": 1}
    assert sweep.parameters["share_at_cap"] == pytest.approx(2 / 12, abs=1e-4)
    assert sweep.parameters["mean_wrong"] > sweep.parameters["mean_correct"]
    # more samples than recorded: each problem's correct share kept, correct and wrong resampled apart
    drawn = sweep.draw(3, 8, seed=5)
    p0, p1, p2 = drawn[:8], drawn[8:16], drawn[16:]
    assert sorted(p0) == sorted([1_000, 2_000] * 2 + [38_912, 30_000] * 2)
    assert set(p1) <= {5_000, 6_000, 38_912, 7_000} and set(p2) <= {300, 400, 500, 600}
    assert drawn == sweep.draw(3, 8, seed=5) and sweep.draw(4, 4)[12:] == drawn[:0] + sweep.draw(1, 4)  # cycled
    described = sweep.describe(sweep.draw(3, 4))
    assert described["drawn_share_at_cap"] == pytest.approx(2 / 12, abs=1e-4)


def test_a_sweeps_model_pools_every_eval_json_under_the_path_and_refuses_an_empty_one(tmp_path):
    write_eval(tmp_path / "r/a/eval/eval.json", {"p0": SWEEP["p0"]})
    write_eval(tmp_path / "r/b/eval/eval.json", {"p0": SWEEP["p2"]})
    pooled = lm.sweep(tmp_path / "r")
    assert pooled.parameters["samples"] == 8 and pooled.parameters["problems"] == 1
    assert pooled.parameters["per_problem"][0]["n_correct"] == 6
    assert lm.sweep(tmp_path / "r/a/eval/eval.json").parameters["samples"] == 4  # one file alone
    with pytest.raises(ValueError, match="no eval.json"):
        lm.sweep(tmp_path / "nothing")
    with pytest.raises(ValueError, match="published, short or sweep:RESULTS_DIR"):
        lm.parse("long")


def test_kv_bytes_per_token_come_from_the_model_shape():
    assert lm.kv_bytes_per_token(QWEN3_1_7B) == 28 * 8 * 128 * 2 * 2 == 114_688  # ~115 KB, as the issue says
    assert lm.kv_bytes_per_token(QWEN3_1_7B, "fp8") == 57_344  # an FP8 KV cache halves the floor
    no_head_dim = {k: v for k, v in QWEN3_1_7B.items() if k != "head_dim"}
    assert lm.kv_bytes_per_token(no_head_dim) == 114_688  # hidden / heads


def test_the_floor_of_a_known_schedule():
    # a request of prompt 10 generating 3 reads 11 + 12 + 13 tokens; one of prompt 0 generating 2 reads 1 + 2
    assert lm.kv_read_tokens([10, 0], [3, 2]) == 39
    floor = lm.kv_read_floor([10, 0], [3, 2], bytes_per_token=1_000, seconds=39e-6, bandwidth=1e9)
    assert floor["eval_kv_read_bytes"] == 39_000 and floor["eval_floor_ratio"] == 1.0
    # the same tokens the step model's replay reads, step by step (no preemption)
    lengths, prompts = [50 + (i * 37) % 400 for i in range(40)], [20 + i for i in range(40)]
    steps = model.replay(lengths, max_num_seqs=8, prompt_tokens=prompts)
    assert steps[:, 1].sum() == lm.kv_read_tokens(prompts, lengths)
    # the issue's measured eval: 96 requests of mean 16,531 after 120-token prompts read 1.83 PB: 427 s at 4.3 TB/s
    issue = lm.lognormal_lengths(96, 18_500, 0.6, seed=1)
    floor = lm.kv_read_floor([120] * 96, issue, lm.kv_bytes_per_token(QWEN3_1_7B), seconds=570)
    assert floor["eval_kv_read_bytes"] / 1e15 == pytest.approx(1.83, abs=0.005)
    assert floor["eval_floor_s"] == pytest.approx(427, abs=1) and floor["eval_floor_ratio"] == pytest.approx(1.34, abs=0.01)


def test_the_kv_limited_schedule_preempts_the_newest_request_and_still_decodes_every_token():
    # 2 requests of prompt 1, 4 tokens each, a cache of 6 tokens in blocks of 1: both run until their
    # contexts (2, 3, 4 ...) no longer fit together, then the newer is preempted and resumes after the first
    steps, stats = model.kv_limited_schedule([1, 1], [4, 4], max_num_seqs=2, kv_capacity=6, block_size=1)
    assert steps.tolist() == [[2, 4], [2, 6], [1, 4], [1, 5], [1, 4], [1, 5]]
    assert stats["preemptions"] == 1 and stats["recomputed_tokens"] == 3 and stats["peak_kv_tokens"] == 6
    assert steps[:, 0].sum() == 8  # every token decoded once
    # a cache that holds everything: the unlimited schedule
    lengths = [30, 5, 17, 40, 2]
    unlimited = model.replay(lengths, 3, 7)
    assert model.replay(lengths, 3, 7, kv_capacity=10**6).tolist() == unlimited.tolist()
    with pytest.raises(ValueError, match="does not fit"):
        model.kv_limited_schedule([10], [10], 4, kv_capacity=16, block_size=16)


def test_the_step_model_predicts_the_issues_measured_eval_within_5_percent():
    issue = lm.lognormal_lengths(96, 18_500, 0.6, seed=1)
    predicted = model.predict_eval(2.26e-3, 32.0e-3, issue, [120] * 96, 256, kv_capacity=1_138_448)
    assert predicted["seconds"] == pytest.approx(570, rel=0.06) and predicted["preemptions"] == 0


def synthetic_part(a: float, b: float, capacity: int):
    """A traced part whose every step cost a + b x million KV tokens: what bench_cycle --eval-only records."""
    published = lm.published()
    lengths = [x // 40 for x in published.draw(2, 12, seed=1)]  # short enough for a test, shaped as published
    prompts = [30] * len(lengths)
    steps, _ = model.kv_limited_schedule(prompts, lengths, 256, capacity)
    seconds = (a + b * steps[:, 1] / 1e6).tolist()
    return {"requests": len(lengths), "generation_s": sum(seconds), "forced_lengths": lengths, "prompt_lengths": prompts,
            "kv_cache_tokens": capacity, "max_num_seqs": 256, "length_seed": 1, "status": "complete",
            "adapter": "LoRARequest", **lm.record_fields(published, lengths),
            "step_trace": {"seconds": seconds, "decoding": steps[:, 0].astype(int).tolist(),
                           "kv_tokens": steps[:, 1].astype(int).tolist()}}


def test_the_refit_recovers_a_traced_parts_step_cost_and_projects_the_eval_labelled():
    record = synthetic_part(2e-3, 30e-3, capacity=4_000)
    fit = model.fit_trace(record["step_trace"], warmup=0)
    assert fit["step_s"] == pytest.approx(2e-3, rel=1e-6) and fit["s_per_million_kv_tokens"] == pytest.approx(30e-3, rel=1e-6)
    figures = model.traced_part(record, [24], [100_000])  # at real lengths: a cache that holds one request
    part = figures["measured_part"]
    assert part["fit_error"] == pytest.approx(0, abs=1e-4) and part["holdout_error"] == pytest.approx(0, abs=1e-4)
    assert part["replayed"]["preemptions"] > 0 and part["schedule"]["kv_read_ratio"] == 1.0  # the cache ran short
    assert part["complete"] and part["whole_fit_error"] == pytest.approx(0, abs=1e-3)  # warm-up seconds rounded
    [projected] = figures["projections"]
    assert projected["label"] == "PROJECTION" and projected["requests"] == 24 and projected["kv_capacity_tokens"] == 100_000
    assert projected["length_model"]["name"] == "published" and projected["eval_floor_ratio"] > 1


def test_timed_steps_trace_each_steps_decoding_and_kv_reads_and_stop_at_the_limit():
    class Output:
        def __init__(self, prompt, tokens, finished=False):
            self.prompt_token_ids, self.finished = [0] * prompt, finished
            self.outputs = [type("Completion", (), {"token_ids": [0] * tokens})()]

    class Engine:
        def __init__(self):
            self.calls = 0

        def get_num_unfinished_requests(self):
            return 2

        def step(self):
            self.calls += 1
            return [Output(10, self.calls), Output(5, self.calls, finished=self.calls == 2)]

    timed = eval_trace.TimedSteps(Engine(), trace=True)
    timed.step()
    timed.step()
    assert timed.trace["decoding"] == [2, 2] and timed.trace["kv_tokens"] == [11 + 6, 12 + 7]
    assert [s[3:] for s in timed.steps] == [(0, 2), (1, 2)]
    stopped = eval_trace.TimedSteps(Engine(), limit_s=0.0)
    stopped.step()
    with pytest.raises(eval_trace.TimeLimit):
        stopped.step()


def test_the_cycle_record_from_a_measured_part_and_a_measured_sweep(tmp_path, monkeypatch):
    monkeypatch.setattr(bench_cycle, "EVAL_PROBLEMS", 3)  # "the eval" of 36 samples: a quick projection
    record = synthetic_part(2e-3, 30e-3, capacity=100_000) | {"eval_floor_ratio": 1.5, "eval_floor_s": 1.0}
    part = tmp_path / "aime_sized_eval_part.json"
    part.write_text(json.dumps(record))
    sweep = bench_cycle.sweep_from(bench_cycle.Path(__file__).resolve().parents[2]
                                   / "benchmarks/measured/gpu_check_2026-12-03_05fed59.json")
    assert sweep["steady_step_s"] == 5.01 and sweep["fixed_cost_s_after_first"] == 2.2
    # a part of 24 requests: the whole eval is projected with the refitted step model
    evaluated = bench_cycle.eval_projection(record)
    assert not evaluated["measured"] and evaluated["projection"]["label"] == "PROJECTION"
    report = bench_cycle.record_from_records(sweep, record, part, "cmd")
    assert report["eval_length_mean_tokens"] == record["eval_length_mean_tokens"] and report["eval_floor_ratio"] == 1.5
    assert report["gpu_minutes_per_cycle"] == pytest.approx(
        (2.2 + 100 * 5.01 + evaluated["eval_s"]) / 60, abs=0.01) and "PROJECTION" in report["note"]
    # a part cut short (--time-limit, a lost machine) is fitted on what it traced; the ratio is the traced steps'
    cut = {k: v for k, v in record.items() if k not in ("generation_s", "eval_floor_ratio")} | {"status": "running",
                                                                                             "done_so_far": 3}
    cut["step_trace"] = {k: v[:len(v) // 2] for k, v in record["step_trace"].items()}
    cut_report = bench_cycle.record_from_records(sweep, cut, part, "cmd")
    traced = cut_report["eval_part"]["traced"]
    assert traced["done"] == 3 and traced["steps"] == len(cut["step_trace"]["seconds"])
    assert cut_report["eval_floor_ratio"] == traced["floor_ratio"] and "cut short" in cut_report["eval_floor_ratio_of"]
    assert cut_report["eval_part"]["whole_part"]["label"] == "PROJECTION"
    with pytest.raises(ValueError, match="nothing to project"):
        bench_cycle.eval_projection({k: v for k, v in cut.items() if k != "step_trace"})


def test_the_cycle_benchmark_takes_a_short_eval_record_only_as_the_short_probe(tmp_path):
    import subprocess
    import sys

    from tests.conftest import REPO

    short_record = REPO / "benchmarks/measured/aime_sized_eval_2026-12-02_max_num_seqs512.json"
    done = subprocess.run([sys.executable, "-m", "benchmarks.bench_cycle", "--work", str(tmp_path / "w"), "--eval-from",
                           str(short_record)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "forced to the short length model" in done.stderr
    assert not (tmp_path / "w").exists()
    bad = subprocess.run([sys.executable, "-m", "benchmarks.bench_cycle", "--work", str(tmp_path / "w"), "--lengths",
                          "long"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "published, short or sweep:RESULTS_DIR" in bad.stderr


def test_an_old_record_without_a_step_trace_still_fits_by_bands():
    record = json.loads((bench_cycle.Path(__file__).resolve().parents[2]
                         / "benchmarks/measured/aime_sized_eval_2026-12-03_auto_without_adapter.json").read_text())
    lengths = model.draw_lengths(record["requests"], 0)
    a, b, _ = model.fit_step_cost(record, model.replay(lengths, record["max_num_seqs"], model.PROMPT_TOKENS))
    assert 1000 * a == pytest.approx(2.26, abs=0.01) and 1000 * b == pytest.approx(32.0, abs=0.1)
    assert isinstance(np.float64(a), np.floating)


def test_the_floor_is_at_the_copy_rate_of_the_gpu_the_part_ran_on():
    # the same traced part read as an H200's and as an H100's: the H100 copies at 3.05 TB/s, not 4.3
    h200 = model.traced_part(synthetic_part(2e-3, 30e-3, capacity=100_000) | {"device": "NVIDIA H200"}, [24], [])
    h100 = model.traced_part(synthetic_part(2e-3, 30e-3, capacity=100_000) | {"device": "NVIDIA H100 80GB HBM3"},
                             [24], [])
    ratio = h100["measured_part"]["traced"]["floor_ratio"] / h200["measured_part"]["traced"]["floor_ratio"]
    assert ratio == pytest.approx(3.05 / 4.3, rel=1e-3)  # a longer floor: the same seconds are nearer it
    assert h100["projections"][0]["eval_floor_s"] == pytest.approx(h200["projections"][0]["eval_floor_s"] * 4.3 / 3.05,
                                                                   rel=1e-3)
    assert lm.hbm_bytes_per_s(None) == lm.hbm_bytes_per_s("NVIDIA H200") == 4.3e12  # records before the H100's
    with pytest.raises(ValueError, match="'NVIDIA A100-SXM4-80GB'.*COPY_BYTES_PER_S"):
        lm.hbm_bytes_per_s("NVIDIA A100-SXM4-80GB")


def test_an_fp8_parts_fit_reads_its_kv_rate_at_half_the_bytes():
    record = synthetic_part(2e-3, 30e-3, capacity=100_000)
    bf16 = model.traced_part(record, [24], [])["fit"]["kv_read_tb_per_s"]
    fp8 = model.traced_part(record | {"kv_bytes_per_token": lm.kv_bytes_per_token(QWEN3_1_7B, "fp8")}, [24], [])
    assert fp8["fit"]["kv_read_tb_per_s"] == pytest.approx(bf16 / 2, abs=0.01)


def test_a_cycle_is_not_priced_from_two_kinds_of_gpu(tmp_path):
    sweep = bench_cycle.sweep_from(bench_cycle.Path(__file__).resolve().parents[2]
                                   / "benchmarks/measured/gpu_check_2026-12-05_3c88683.json")
    record = synthetic_part(2e-3, 30e-3, capacity=100_000) | {"device": "NVIDIA H100 80GB HBM3"}
    with pytest.raises(ValueError, match="NVIDIA H200.*NVIDIA H100 80GB HBM3.*same GPU"):
        bench_cycle.record_from_records(sweep, record, tmp_path / "part.json", "cmd")


def test_a_one_time_stall_is_counted_once_not_spread_over_every_step_of_the_fit():
    record = synthetic_part(2e-3, 30e-3, capacity=100_000)
    seconds = record["step_trace"]["seconds"]
    stalled = len(seconds) // 2
    seconds[stalled] += 2.0  # one 2-second stall mid-part, as the H100 parts of 2026-12-05 had
    record["generation_s"] += 2.0
    figures = model.traced_part(record, [24], [], warmup=5)
    fit = figures["fit"]
    assert fit["step_s"] == pytest.approx(2e-3, rel=1e-6) and fit["s_per_million_kv_tokens"] == pytest.approx(30e-3, rel=1e-6)
    assert fit["stall_steps"] == 1 and fit["stall_excess_s"] == pytest.approx(2.0, abs=0.01) and fit["r2"] == 1.0
    assert figures["measured_part"]["whole_fit_error"] == pytest.approx(0, abs=1e-3)  # the stall counted once
    traced = figures["measured_part"]["traced"]  # where the traced seconds went: they add up, the stall once
    assert sum(traced["split_s"].values()) == pytest.approx(traced["seconds"], abs=0.2)
    assert traced["split_s"]["once"] == pytest.approx(2.0 + sum(seconds[:5]), abs=0.1)
