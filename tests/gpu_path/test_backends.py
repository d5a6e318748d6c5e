"""The GPU path's glue, checked on the CPU: backend resolution, the phase environment vLLM needs
inside a cycle, the rollout engine plan (sleep, one engine per cycle) and how a cycle books the
evaluation its train phase ran."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from opsd_sweep.backends import resolve_backend, vllm_env, vllm_installed
from opsd_sweep.config import ConfigError, load_run_config
from opsd_sweep.cycle import _split_phase_seconds, locate_run, phase_env
from opsd_sweep.train.engine_plan import ENGINE_OVERHEAD_BYTES, plan_rollout_engine, training_step_bytes
from tests.conftest import compose

GB = 10**9


def paper_run(*overrides: str):
    return load_run_config(compose(["train.num_gpus=1", "train.per_device_batch_size=8", "train.grad_accum_steps=4",
                                    *overrides]))


def test_auto_is_hf_without_gpus_and_an_explicit_vllm_that_cannot_run_says_the_fix():
    assert resolve_backend("auto", has_gpus=False, key="eval.backend") == ("hf", "eval.backend=auto: "
                                                                          + ("no CUDA GPU is visible" if vllm_installed()
                                                                             else "vllm is not installed"))
    assert resolve_backend("hf", has_gpus=True, key="rollout.backend")[0] == "hf"
    with pytest.raises(RuntimeError, match=r"rollout.backend=vllm but .*; use rollout.backend=auto .* or rollout.backend=hf"):
        resolve_backend("vllm", has_gpus=False, key="rollout.backend")


def test_the_defaults_are_auto_and_vllm_on_a_cpu_profile_is_refused_before_any_compute():
    run = paper_run()
    assert run.rollout.backend == "auto" and run.eval.backend == "auto" and run.rollout.vllm_sleep is None
    with pytest.raises(ConfigError, match=r"rollout.backend=vllm needs GPUs but train.num_gpus=0 .* use rollout.backend=auto"):
        load_run_config(compose(["profile=tiny", "rollout.backend=vllm"]))


def test_backends_do_not_change_the_run_key():
    assert locate_run(paper_run("rollout.backend=hf", "eval.backend=hf"))[0] == locate_run(paper_run())[0]


def test_phases_spawn_vllm_engine_processes_and_share_compile_caches(tmp_path, monkeypatch):
    """Without spawn the eval phase's engine core was forked after CUDA was initialised and failed
    ('Cannot re-initialize CUDA in forked subprocess')."""
    run = replace(paper_run(), cache_dir=str(tmp_path))
    for key in vllm_env(tmp_path):  # an in-process evaluation earlier in this session may have set them
        monkeypatch.delenv(key, raising=False)
    env = phase_env(run, ["3"])
    assert env["VLLM_WORKER_MULTIPROC_METHOD"] == "spawn" and env["CUDA_VISIBLE_DEVICES"] == "3"
    for key in ("VLLM_CACHE_ROOT", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
        assert env[key].startswith(str(tmp_path / "compile"))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/mine")  # what the user set wins
    assert phase_env(run, [])["TORCHINDUCTOR_CACHE_DIR"] == "/mine"
    assert vllm_env(None) == {"VLLM_WORKER_MULTIPROC_METHOD": "spawn"}


class Qwen3_1_7B:  # the config fields the estimates read
    hidden_size, num_hidden_layers, vocab_size = 2048, 28, 151_936
    num_attention_heads, num_key_value_heads, head_dim, max_position_embeddings = 16, 8, 128, 40_960


QWEN3_1_7B_WEIGHTS = 4_063_000_000  # 2.03 B parameters in bf16, tied embeddings once


def plan_engine(*args, **kwargs):
    """The plan for a Qwen3-1.7B student."""
    return plan_rollout_engine(*args, **kwargs, model_config=Qwen3_1_7B, weight_bytes=QWEN3_1_7B_WEIGHTS)


def test_a_rollout_only_engine_holds_one_steps_rollouts_and_stays_awake_beside_the_step_on_an_80_gb_gpu():
    """eval.engine=own: the engine's KV cache is sized to the step's 32 rollouts, not to half the GPU. At half the
    GPU it slept through every step on an H100 (6.28-6.50 s steps, 2026-12-06), 0.6-0.9 s a step of sleep and
    wake-up."""
    run = paper_run()
    step = training_step_bytes(run, Qwen3_1_7B, longest_prompt=300)
    # 8 x 1,324 tokens: the trainer peaked at 49.5-51.6 GB (model included) in every H200 gpu-check
    assert 50 * GB < step < 60 * GB
    h100 = plan_engine(run, 1, free_bytes=76 * GB, total_bytes=80 * GB, step_bytes=step, longest_prompt=300)
    # 32 x (300 + 1,024) tokens x 1.25 x 114,688 bytes (28 layers x 8 KV heads x 128 x K and V x bf16)
    assert h100.kv_cache_bytes == int(1.25 * 32 * 1324 * 114_688)
    assert h100.engine_bytes == QWEN3_1_7B_WEIGHTS + h100.kv_cache_bytes + ENGINE_OVERHEAD_BYTES < 15 * GB
    assert not h100.sleep and "<= 76 GB free" in h100.sleep_why
    tight = plan_engine(run, 1, free_bytes=60 * GB, total_bytes=80 * GB, step_bytes=step, longest_prompt=300)
    assert tight.sleep and "auto" in tight.sleep_why
    forced = plan_engine(paper_run("rollout.vllm_sleep=true"), 1, 137 * GB, 141 * GB, step, 300)
    assert forced.sleep and forced.sleep_why == "rollout.vllm_sleep=true"
    short = plan_engine(paper_run("rollout.max_new_tokens=128"), 1, 76 * GB, 80 * GB, step, 100)
    # the context is the longest rollout's, not the model's own (40,960 tokens here, up to 262,144 for other Qwen3
    # models), which would set vLLM's minimum KV cache at one sequence of that length
    assert short.max_model_len == 228 and short.kv_cache_bytes == int(1.25 * 32 * 228 * 114_688)
    fp8 = plan_engine(paper_run("rollout.kv_cache_dtype=fp8"), 1, 76 * GB, 80 * GB, step, 300)
    assert 2 * fp8.kv_cache_bytes == h100.kv_cache_bytes


def test_an_engine_that_also_evaluates_takes_its_share_of_the_gpu_and_sleeps_where_that_and_the_step_do_not_fit(
        monkeypatch):
    from opsd_sweep.train import engine_plan

    monkeypatch.setattr(engine_plan, "resolve_backend", lambda *_args, **_kw: ("vllm", "vllm on this GPU"))
    run = paper_run("eval.engine=rollout", "rollout.gpu_memory_utilization=0.5")
    step = training_step_bytes(run, Qwen3_1_7B, longest_prompt=300)
    roomy = plan_engine(run, 1, free_bytes=137 * GB, total_bytes=141 * GB, step_bytes=step, longest_prompt=300)
    assert roomy.serves_eval and roomy.kv_cache_bytes is None and roomy.engine_bytes == int(0.5 * 141 * GB)
    assert not roomy.sleep
    h100 = plan_engine(run, 1, free_bytes=76 * GB, total_bytes=80 * GB, step_bytes=step, longest_prompt=300)
    assert h100.sleep and "engine 40 GB" in h100.sleep_why  # out of memory on an H100 when it stayed awake


def test_by_default_the_eval_gets_an_engine_of_its_own_on_the_memory_training_frees():
    """eval.engine=own (the default): the rollout engine is sized for the rollouts alone and never evaluates."""
    own = plan_engine(paper_run(), 1, 137 * GB, 141 * GB, 10 * GB, 300)
    assert not own.serves_eval and own.serves_eval_why.startswith("eval.engine=own")
    assert own.max_model_len == 300 + 1024 and own.max_num_seqs == 32  # the longest rollout's context


def test_one_engine_per_cycle_only_where_the_eval_would_run_one_vllm_engine_on_the_same_gpu():
    step = 10 * GB
    if vllm_installed():
        shared = plan_engine(paper_run("eval.engine=rollout"), 1, 137 * GB, 141 * GB, step, 300)
        assert shared.serves_eval and shared.max_model_len == 40960 and shared.max_num_seqs == 256
    alone = plan_engine(paper_run("eval.engine=rollout", "eval.backend=hf"), 1, 137 * GB, 141 * GB, step, 300)
    assert not alone.serves_eval and alone.max_model_len == 1324 and alone.max_num_seqs == 32
    tp = paper_run("eval.engine=rollout", "eval.tensor_parallel_size=2")
    assert not plan_engine(tp, 1, 137 * GB, 141 * GB, step, 300).serves_eval
    several = plan_engine(paper_run("eval.engine=rollout"), 2, 137 * GB, 141 * GB, step, 300)
    assert not several.serves_eval  # several ranks


def test_a_train_phase_that_evaluated_books_that_time_to_the_eval_phase(tmp_path):
    run = replace(paper_run("train.max_steps=2"), results_root=str(tmp_path))
    _, run_dir = locate_run(run)
    checkpoint = run_dir.checkpoint(2)
    checkpoint.mkdir(parents=True)
    (checkpoint / "trainer_state.json").write_text("{}")
    assert _split_phase_seconds("train", 100.0, run, run_dir) == {"train": 100.0}  # no eval.json yet
    run_dir.eval_dir.mkdir(parents=True)
    timing = {"engine": "the trainer's rollout engine", "wall_seconds": 30.0}
    run_dir.eval_json.write_text(json.dumps({"checkpoint": str(checkpoint), "timing": timing, "metrics": {},
                                             "problems": [], "n_samples": run.eval.n_samples}))
    assert _split_phase_seconds("train", 100.0, run, run_dir) == {"train": 70.0, "evaluate": 30.0}
    assert _split_phase_seconds("evaluate", 5.0, run, run_dir) == {"evaluate": 5.0}


def test_an_fp8_kv_cache_eval_gets_an_engine_of_its_own_and_never_runs_on_hf(monkeypatch):
    """eval.kv_cache_dtype=fp8 is an evaluator option: the rollout engine keeps the model's dtype in its KV cache
    (the training samples do not change), so it cannot serve that evaluation; and hf has no fp8 KV cache, so an
    evaluation that would run there is refused instead of scored in bf16."""
    from opsd_sweep.evaluate.evaluator import resolve_eval_backend
    from opsd_sweep.train import engine_plan

    monkeypatch.setattr(engine_plan, "resolve_backend", lambda *_args, **_kw: ("vllm", "vllm on this GPU"))
    assert plan_engine(paper_run("eval.engine=rollout"), 1, 137 * GB, 141 * GB, 10 * GB, 300).serves_eval
    fp8 = plan_engine(paper_run("eval.engine=rollout", "eval.kv_cache_dtype=fp8"), 1, 137 * GB, 141 * GB, 10 * GB, 300)
    assert not fp8.serves_eval and fp8.serves_eval_why.startswith("eval.kv_cache_dtype=fp8")
    with pytest.raises(ValueError, match=r"eval.kv_cache_dtype=fp8 is a vLLM option, but the evaluation runs on hf"):
        resolve_eval_backend(paper_run("eval.kv_cache_dtype=fp8"), gpus=[])
    with pytest.raises(ConfigError, match=r"eval.kv_cache_dtype=fp8 is a vLLM option: set eval.backend=vllm"):
        paper_run("eval.kv_cache_dtype=fp8", "eval.backend=hf")


def test_an_fp8_kv_cache_for_the_rollouts_too_lets_the_rollout_engine_serve_the_fp8_eval(monkeypatch):
    """rollout.kv_cache_dtype=fp8 changes the training samples (it is in the run key); with the eval's fp8 it gives
    one engine per cycle again: the KV caches agree. Either alone keeps the engines apart; hf is refused."""
    from opsd_sweep.train import engine_plan

    monkeypatch.setattr(engine_plan, "resolve_backend", lambda *_args, **_kw: ("vllm", "vllm on this GPU"))
    both = plan_engine(paper_run("eval.engine=rollout", "eval.kv_cache_dtype=fp8", "rollout.kv_cache_dtype=fp8"), 1, 137 * GB,
                               141 * GB, 10 * GB, 300)
    assert both.serves_eval and both.max_model_len == paper_run().eval.max_model_len
    rollouts_only = plan_engine(paper_run("eval.engine=rollout", "rollout.kv_cache_dtype=fp8"), 1, 137 * GB, 141 * GB, 10 * GB, 300)
    assert not rollouts_only.serves_eval
    assert rollouts_only.serves_eval_why.startswith("eval.kv_cache_dtype=auto, rollout.kv_cache_dtype=fp8")
    with pytest.raises(ConfigError, match=r"rollout.kv_cache_dtype=fp8 is a vLLM option: set rollout.backend=vllm"):
        paper_run("rollout.kv_cache_dtype=fp8", "rollout.backend=hf")


def test_a_kept_rollout_engine_is_not_reused_for_another_kv_cache_dtype_or_model():
    """A phase worker keeps its vLLM engine between cycles only under an equal key: an fp8 run must not sample
    on the engine an auto run built (nor on another model's)."""
    from opsd_sweep.train.rollout_vllm import engine_key

    def key(*overrides):
        run = paper_run(*overrides)
        return engine_key(run, plan_engine(run, 1, 137 * GB, 141 * GB, 10 * GB, 300), "cuda:0")

    assert key() == key("learning_rate=3e-5", "clip=0.1", "seed=2")  # the trainer's knobs: the same engine serves
    assert key("rollout.kv_cache_dtype=fp8") != key()
    assert key("model.path=/models/other") != key()
    assert key("rollout.max_new_tokens=2048") != key()  # longer rollouts: a larger KV cache and context


def test_a_kept_rollout_engine_serves_a_cycle_that_sleeps_in_its_steps_where_the_last_one_did_not():
    """Whether the steps sleep follows the free memory, which a kept engine asleep beside the last cycle's eval
    lowers a little: that alone must not send the next cycle to a new worker (a new student, compiles, engine)."""
    from opsd_sweep.train.rollout_vllm import engine_key

    run = paper_run()
    awake, asleep = (plan_engine(run, 1, free * GB, 80 * GB, 51 * GB, 300) for free in (76, 60))
    assert not awake.sleep and asleep.sleep
    assert engine_key(run, awake, "cuda:0") == engine_key(run, asleep, "cuda:0")


def test_a_kept_rollout_engine_is_not_reused_for_data_with_a_longer_prompt():
    from opsd_sweep.train.rollout_vllm import engine_key

    run = paper_run()
    keys = [engine_key(run, plan_engine(run, 1, 76 * GB, 80 * GB, 10 * GB, longest), "cuda:0") for longest in (300, 301)]
    assert keys[0] != keys[1]


def test_a_merged_weights_eval_runs_on_the_rollout_engine_and_the_old_base_weights_scores_stay_wrong(monkeypatch,
                                                                                                     tmp_path):
    """eval.merge_lora=true on a 1-GPU cycle: the rollout engine serves it (with the merged dir's weights loaded,
    tests/evaluate/test_merged_on_rollout_engine.py), sized for the eval like any shared engine. Scores recorded there
    before 2026-12-03, when it served its restored base weights, stay wrong; the LoRARequest there is exact."""
    from opsd_sweep.run.identity import (ON_ROLLOUT_ENGINE, ON_ROLLOUT_ENGINE_MERGED, evaluation_problem,
                                     evaluator_identity)
    from opsd_sweep.train import engine_plan

    monkeypatch.setattr(engine_plan, "resolve_backend", lambda *_args, **_kw: ("vllm", "vllm on this GPU"))
    merged = plan_engine(paper_run("eval.engine=rollout", "eval.merge_lora=true"), 1, 137 * GB, 141 * GB, 10 * GB, 300)
    assert merged.serves_eval and merged.max_model_len == paper_run().eval.max_model_len
    assert merged.max_num_seqs == paper_run().eval.max_num_seqs

    checkpoint = tmp_path / "checkpoint-2"
    checkpoint.mkdir()
    (checkpoint / "adapter_config.json").write_text("{}")
    recorded = {"backend": "vllm", "evaluator": evaluator_identity("vllm", checkpoint, True), "n_samples": 12}
    scored_base = recorded | {"timing": {"engine": ON_ROLLOUT_ENGINE}}
    assert "which served the base weights, not the merged checkpoint" in evaluation_problem(scored_base, None, True)
    assert evaluation_problem(recorded | {"timing": {"engine": ON_ROLLOUT_ENGINE_MERGED}}, None, True) is None
    assert evaluation_problem(recorded | {"timing": {"engine": "own"}}, None, True) is None
    unmerged = {"backend": "vllm", "evaluator": evaluator_identity("vllm", checkpoint, False),
                "timing": {"engine": ON_ROLLOUT_ENGINE}}
    assert evaluation_problem(unmerged, None, False) is None  # the LoRARequest on the rollout engine is exact


def test_a_shared_engine_sized_for_a_short_eval_still_holds_every_rollout(monkeypatch):
    """The rollout engine that also evaluates takes eval.max_model_len; a short eval (1,024 tokens) once capped the
    rollouts there too, and vLLM ends a request at max_model_len without an error: cut rollouts, trained on."""
    from opsd_sweep.train import engine_plan

    monkeypatch.setattr(engine_plan, "resolve_backend", lambda *_args, **_kw: ("vllm", "vllm on this GPU"))
    short = paper_run("eval.engine=rollout", "eval.max_model_len=1024", "eval.max_new_tokens=512")
    plan = plan_engine(short, 1, 137 * GB, 141 * GB, 10 * GB, longest_prompt=300)
    assert plan.serves_eval and plan.max_model_len == 300 + short.rollout.max_new_tokens  # 1,324 > 1,024
    shared = plan_engine(paper_run("eval.engine=rollout"), 1, 137 * GB, 141 * GB, 10 * GB, 300)
    assert shared.max_model_len == 40960  # the eval's
