"""train.strategy=ddp|fsdp: validated up front, passed by the cycle to `accelerate launch --config_file`, and a
real 2-process tiny cycle on CPU (gloo). FSDP itself cannot run here: accelerate 1.15's FSDP plugin refuses a
machine without an accelerator ("no available devices"), and FSDP needs the vllm rollout anyway; what is
tested for it is the refusal up front and that its config file reaches 2 launched processes."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import subprocess
from pathlib import Path

import pytest
import yaml

from opsd_sweep import ACCELERATE_DIR
from opsd_sweep.config import ConfigError, load_run_config
from opsd_sweep.cycle import phase_command
from opsd_sweep.preflight import preflight_problems
from opsd_sweep.run.rundir import RunDir
from tests.conftest import compose, run_sweep
from tests.orchestration.conftest import TINY, run_dirs, status

TWO_PROCESSES = ["train.num_gpus=2", "train.per_device_batch_size=4", "train.global_batch_size=8"]


@pytest.mark.parametrize("overrides, message", [
    (["train.strategy=zero3"], "train.strategy='zero3' is not one of ['ddp', 'fsdp']"),
    (["profile=tiny", "train.strategy=fsdp"], "train.strategy=fsdp shards the model over processes, but "
                                              "train.num_gpus=0 runs one"),
    (["train.strategy=fsdp", "rollout.backend=hf"], "train.strategy=fsdp needs rollout.backend=vllm (got 'hf')"),
    (["train.strategy=fsdp", "train.teacher=ema"], "train.strategy=fsdp with train.teacher=ema"),
])
def test_a_strategy_that_cannot_run_is_refused_before_any_compute(overrides, message):
    with pytest.raises(ConfigError) as err:
        load_run_config(compose(overrides))
    assert message in str(err.value)


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed here")
def test_fsdp_with_the_auto_rollout_and_no_vllm_is_refused_by_the_preflight():
    """Whether `auto` resolves to vllm is a probe of this machine: the pre-flight's, not validation's."""
    run = load_run_config(compose(["profile=tiny", "train.strategy=fsdp", *TWO_PROCESSES]))
    assert any(p.startswith("train.strategy=fsdp needs the vllm rollout, but rollout.backend=auto resolves to hf")
               for p in preflight_problems(run, train=True))


def test_the_strategy_is_not_part_of_the_run_key():
    """Same maths (the global batch, the loss, mean gradients), other numerics: like train.compile."""
    from opsd_sweep.cycle import cycle_key

    ddp = load_run_config(compose(["train.strategy=ddp"]))
    fsdp = dataclasses.replace(ddp, train=dataclasses.replace(ddp.train, strategy="fsdp"))
    assert cycle_key(ddp) == cycle_key(fsdp)


@pytest.mark.parametrize("strategy, distributed_type", [("ddp", "MULTI_GPU"), ("fsdp", "FSDP")])
def test_the_cycle_passes_the_strategy_config_file_to_accelerate(strategy, distributed_type, tmp_path):
    command = phase_command("train", RunDir(tmp_path), ["0", "1"], strategy)
    config = Path(command[command.index("--config_file") + 1])
    assert config == ACCELERATE_DIR / f"{strategy}.yaml"
    assert yaml.safe_load(config.read_text())["distributed_type"] == distributed_type
    assert command[command.index("--num_processes") + 1] == "2"
    assert phase_command("train", RunDir(tmp_path), ["0"], strategy)[1:] == ["-m", "opsd_sweep.train", str(tmp_path)]


PROBE = """
import json, os, sys
keys = ("RANK", "WORLD_SIZE", "ACCELERATE_USE_FSDP", "FSDP_SHARDING_STRATEGY", "FSDP_TRANSFORMER_CLS_TO_WRAP")
open(os.path.join(sys.argv[1], "rank" + os.environ["RANK"] + ".json"), "w").write(json.dumps({k: os.environ.get(k) for k in keys}))
"""


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_the_launched_processes_get_the_strategy(strategy, tmp_path):
    """The cycle's own command line, with a probe in place of the trainer: 2 processes, FSDP settings or none."""
    (tmp_path / "probe.py").write_text(PROBE)
    command = phase_command("train", RunDir(tmp_path), ["0", "1"], strategy)
    command = command[:command.index("-m", 3)] + [str(tmp_path / "probe.py"), str(tmp_path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [s["WORLD_SIZE"] for s in seen] == ["2", "2"]
    if strategy == "fsdp":
        assert all(s["ACCELERATE_USE_FSDP"] == "true" and s["FSDP_SHARDING_STRATEGY"] == "FULL_SHARD"
                   and s["FSDP_TRANSFORMER_CLS_TO_WRAP"] == "Qwen3DecoderLayer" for s in seen), seen
    else:
        assert all(s["ACCELERATE_USE_FSDP"] in (None, "false") for s in seen), seen


@pytest.mark.slow
def test_a_two_process_ddp_tiny_cycle_runs_on_cpu_over_gloo(tmp_path, tiny_cache):
    proc = run_sweep(["-m", *TINY, *TWO_PROCESSES, "train.max_steps=2", "train.strategy=ddp",
                      "hydra.launcher.gpus=[0,1]"], tmp_path, tiny_cache)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (run_dir,) = run_dirs(tmp_path).values()
    assert status(run_dir)["state"] == "done" and status(run_dir)["gpus"] == ["0", "1"]
    log = (run_dir / "logs/train.log").read_text()
    assert "[train] 2 process(es), MULTI_CPU, cpu" in log
    assert json.loads((run_dir / "train/checkpoint-2/trainer_state.json").read_text()) == {"step": 2, "world_size": 2}
    assert [json.loads(line)["step"] for line in (run_dir / "train/metrics.jsonl").open()] == [1, 2]


def test_a_checkpoint_resumes_only_under_the_strategy_that_wrote_it(tmp_path):
    """The strategy is not in the run key, so a rerun may ask for the other one: DDP keeps one optimizer
    state, FSDP one shard per rank; resuming across them says so instead of a KeyError."""
    import torch
    from accelerate import Accelerator

    from opsd_sweep.train import checkpoint

    acc = Accelerator(cpu=True)
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.AdamW(model.parameters())
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    path = tmp_path / "checkpoint-1"
    checkpoint.save_checkpoint(path, accelerator=acc, save_adapter=lambda p: None, optimizer=optimizer,
                               scheduler=scheduler, step=1, sharded_optimizer=False, teacher=None)
    with pytest.raises(RuntimeError, match="was written under train.strategy=ddp; resume with it"):
        checkpoint.load_trainer_state(path, accelerator=acc, optimizer=optimizer, scheduler=scheduler,
                                      sharded_optimizer=True, teacher=None)


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed here")
def test_an_fp8_kv_cache_eval_with_the_auto_backend_and_no_vllm_is_refused_by_the_preflight():
    run = load_run_config(compose(["train.num_gpus=1", "train.per_device_batch_size=8", "train.grad_accum_steps=4",
                                   "eval.kv_cache_dtype=fp8"]))
    assert any(p.startswith("eval.kv_cache_dtype=fp8 is a vLLM option, but eval.backend=auto resolves to hf here")
               for p in preflight_problems(run, train=False))
    rollouts = load_run_config(compose(["train.num_gpus=1", "train.per_device_batch_size=8",
                                        "train.grad_accum_steps=4", "rollout.kv_cache_dtype=fp8"]))
    assert any(p.startswith("rollout.kv_cache_dtype=fp8 is a vLLM option, but rollout.backend=auto resolves to hf")
               for p in preflight_problems(rollouts, train=True))
    assert preflight_problems(rollouts, train=False) == preflight_problems(load_run_config(compose(
        ["train.num_gpus=1", "train.per_device_batch_size=8", "train.grad_accum_steps=4"])), train=False)
