"""The trainer on CPU: metrics, schedule, prompts, clear failures, and exact resume after kill -9."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from safetensors.torch import load_file

from opsd_sweep.config import ConfigError
from opsd_sweep.data import DatasetUnavailableError
from opsd_sweep.modeling import ModelUnavailableError
from opsd_sweep.train.loss import DIAGNOSTICS
from opsd_sweep.train.schedule import lr_factor
from opsd_sweep.train.trainer import PHASES, OPSDTrainer
from tests.conftest import REPO
from tests.train.conftest import make_run_dir, train_run

# LoRA dropout > 0 so the exact-resume test also covers the RNG state of training, not only rollouts.
RESUME = ("train.max_steps=4", "train.save_steps=2", "train.lora.dropout=0.1", "train.lr_scheduler=cosine",
          "train.warmup_ratio=0.25", "seed=7")


def read_metrics(run_dir) -> list[dict]:
    return [json.loads(line) for line in run_dir.metrics.read_text().splitlines()]


def trainer_env() -> dict:
    return dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO / "src"))


def train_command(run_dir) -> list[str]:
    return [sys.executable, "-m", "opsd_sweep.train", str(run_dir.path)]


def kill_at_checkpoint(run_dir, step: int) -> None:
    """Start the train phase and SIGKILL it as soon as checkpoint-<step> exists (before the next one)."""
    proc = subprocess.Popen(train_command(run_dir), env=trainer_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not run_dir.checkpoint(step).exists():
        assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
        assert time.monotonic() < deadline, f"no checkpoint-{step} within 120 s"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL


@pytest.fixture(scope="module")
def uninterrupted(world, tmp_path_factory):
    """The reference run, in a subprocess like the runs it is compared with (same threads, same kernels)."""
    root = tmp_path_factory.mktemp("uninterrupted")
    run = train_run(world, root, *RESUME)
    run_dir = make_run_dir(root / "run", run)
    done = subprocess.run(train_command(run_dir), env=trainer_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return run, run_dir


def test_metrics_line_per_step_with_every_field(uninterrupted):
    run, run_dir = uninterrupted
    lines = read_metrics(run_dir)
    assert [line["step"] for line in lines] == [1, 2, 3, 4]
    expected = {"loss", "grad_norm", "lr", "rollout_len", "rollout_cap_frac", "tokens_per_s", "step_seconds",
                "rollout_tokens_per_s", *DIAGNOSTICS, *(f"time_{p}" for p in PHASES)}
    for line in lines:
        assert expected <= set(line), expected - set(line)
        assert 0 < line["rollout_len"] <= run.rollout.max_new_tokens
        assert 0 <= line["rollout_cap_frac"] <= 1 and line["grad_norm"] > 0 and line["kl_true"] > 0


def test_learning_rate_follows_the_schedule(uninterrupted):
    run, run_dir = uninterrupted
    logged = [line["lr"] for line in read_metrics(run_dir)]
    want = [run.learning_rate * lr_factor(i, "cosine", total_steps=4, warmup_steps=1) for i in range(4)]
    assert logged == pytest.approx(want)
    assert want[0] == pytest.approx(run.learning_rate / 2) and want[1] == pytest.approx(run.learning_rate)


def test_schedules_warm_up_then_decay():
    assert [lr_factor(s, "constant", 10, 0) for s in (0, 9)] == [1.0, 1.0]
    assert [lr_factor(s, "linear", 10, 2) for s in (0, 1, 2, 6)] == pytest.approx([1 / 3, 2 / 3, 1.0, 0.5])
    assert [lr_factor(s, "cosine", 10, 0) for s in (0, 5)] == pytest.approx([1.0, 0.5])
    with pytest.raises(ValueError, match="train.lr_scheduler='step' is not one of"):
        lr_factor(0, "step", 10, 0)


def test_resume_after_kill_9_equals_an_uninterrupted_run(world, tmp_path, uninterrupted):
    run, reference_dir = uninterrupted
    run_dir = make_run_dir(tmp_path / "run", train_run(world, tmp_path, *RESUME))
    command = train_command(run_dir)
    kill_at_checkpoint(run_dir, 2)
    assert not run_dir.checkpoint(4).exists()
    (run_dir.train_dir / ".checkpoint-4.tmp").mkdir()  # what a kill during a save leaves behind
    again = subprocess.run(command, env=trainer_env(), capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resumed from" in again.stdout + again.stderr and "at step 2" in again.stdout + again.stderr
    assert not (run_dir.train_dir / ".checkpoint-4.tmp").exists()
    want = load_file(reference_dir.checkpoint(4) / "adapter_model.safetensors")
    got = load_file(run_dir.checkpoint(4) / "adapter_model.safetensors")
    assert want.keys() == got.keys()
    for key in want:
        assert torch.equal(want[key], got[key]), key
    resumed, reference = read_metrics(run_dir), read_metrics(reference_dir)
    assert [line["step"] for line in resumed] == [1, 2, 3, 4]  # killed steps are logged once, not twice
    assert [line["loss"] for line in resumed] == [line["loss"] for line in reference]


def test_student_thinking_off_and_teacher_on_by_default_and_configurable(world, tmp_path):
    for student_thinking, teacher_thinking in ((False, True), (True, False)):
        overrides = [f"train.student_thinking={student_thinking}", f"train.teacher_thinking={teacher_thinking}"]
        trainer = OPSDTrainer(train_run(world, tmp_path, *overrides), make_run_dir(tmp_path / "r", train_run(
            world, tmp_path, *overrides)))
        trainer.setup()
        student, teacher = trainer._prompts(trainer.rows[:1])
        decode = trainer.tokenizer.decode
        empty_think = "<think>\n\n</think>"
        assert (empty_think in decode(student[0])) == (not student_thinking)
        assert (empty_think in decode(teacher[0])) == (not teacher_thinking)
        assert trainer.rows[0]["solution"] in decode(teacher[0]) and trainer.rows[0]["solution"] not in decode(
            student[0])
    assert train_run(world, tmp_path).train.student_thinking is False  # the recipe's default
    assert train_run(world, tmp_path).train.teacher_thinking is True


def test_missing_model_or_dataset_fails_naming_it(world, tmp_path):
    run = train_run(world, tmp_path, f"model.path={tmp_path / 'no-model'}")
    with pytest.raises(ModelUnavailableError, match="no-model"):
        OPSDTrainer(run, make_run_dir(tmp_path / "a", run)).setup()
    run = train_run(world, tmp_path, "model.path=Qwen/NotAModel-0B")
    with pytest.raises(ModelUnavailableError, match="Qwen/NotAModel-0B"):
        OPSDTrainer(run, make_run_dir(tmp_path / "b", run)).setup()
    run = train_run(world, tmp_path, f"data.path={tmp_path / 'missing.jsonl'}")
    run_dir = make_run_dir(tmp_path / "c", run)
    with pytest.raises(DatasetUnavailableError, match="missing.jsonl"):
        OPSDTrainer(run, run_dir).setup()
    cli = subprocess.run(train_command(run_dir), env=trainer_env(),
                         capture_output=True, text=True, timeout=120)
    assert cli.returncode != 0 and "missing.jsonl" in cli.stderr.splitlines()[-1]


def test_fp8_rollouts_that_would_sample_on_hf_are_refused_before_training(world, tmp_path):
    """rollout.kv_cache_dtype=fp8 is a vLLM option: on a CPU the rollouts resolve to hf, which has no fp8 KV cache,
    so the run stops before its first step instead of training on bf16 samples under an fp8 key."""
    run = train_run(world, tmp_path, "rollout.kv_cache_dtype=fp8")
    run_dir = make_run_dir(tmp_path / "fp8", run)
    with pytest.raises(ValueError, match=r"rollout.kv_cache_dtype=fp8 is a vLLM option, but the rollouts run on hf"):
        OPSDTrainer(run, run_dir).setup()
    assert not run_dir.metrics.exists()


def test_batch_arithmetic_is_checked_in_the_recipe_and_against_the_launch(world, tmp_path):
    with pytest.raises(ConfigError, match=r"train.global_batch_size=30 != GPUs 4 x per_device_batch_size 4 x "
                                          r"grad_accum_steps 2 = 32"):
        train_run(world, tmp_path, "train.num_gpus=4", "train.global_batch_size=30")
    run = train_run(world, tmp_path, "train.num_gpus=2", "train.global_batch_size=16")
    with pytest.raises(ValueError, match="train.num_gpus=2 but 1 processes were launched"):
        OPSDTrainer(run, make_run_dir(tmp_path / "w", run)).setup()


def test_two_processes_train_with_ddp_and_checkpoint_every_rank(world, tmp_path):
    """Two CPU processes over gloo (torchrun): gradients all-reduced, one metrics line per step, and
    each checkpoint holds every rank's RNG state next to the shared adapter and optimizer."""
    run = train_run(world, tmp_path, "train.num_gpus=2", "train.per_device_batch_size=2",
                    "train.global_batch_size=8", "train.max_steps=2", "train.save_steps=1")
    run_dir = make_run_dir(tmp_path / "ddp", run)
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
               str(29400 + os.getpid() % 1000), "-m", "opsd_sweep.train", str(run_dir.path)]
    done = subprocess.run(command, env=trainer_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert [line["step"] for line in read_metrics(run_dir)] == [1, 2]
    for step in (1, 2):
        files = {p.name for p in run_dir.checkpoint(step).iterdir()}
        assert {"adapter_model.safetensors", "state.pt", "rank0.pt", "rank1.pt", "trainer_state.json"} <= files
    assert json.loads((run_dir.checkpoint(2) / "trainer_state.json").read_text()) == {"step": 2, "world_size": 2}


def test_compiled_decoder_layers_give_the_same_loss_and_gradients(world):
    """train.compile=true changes kernels, not maths: same loss and LoRA gradients as eager."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from opsd_sweep.train.collate import collate
    from opsd_sweep.train.distill import DistillationModel
    from opsd_sweep.train.loss import LossSpec
    from opsd_sweep.train.teacher import Teacher
    from opsd_sweep.train.trainer import compile_decoder_layers

    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(world / "model", dtype=torch.float32)
    peft_model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "down_proj"],
                                                 init_lora_weights=False))
    model = DistillationModel(peft_model, LossSpec(clip=0.05, chunk_size=8),
                              Teacher("fixed", 0.999, peft_model, sharded=False))
    completions = [[11, 12, 13, 14], [15, 16, 17]]
    student = collate([[5, 6, 7], [8, 9]], completions, 0)
    teacher = collate([[5, 6, 7, 20, 21], [8, 9, 22]], completions, 0)

    def loss_and_grads():
        peft_model.zero_grad()
        loss, _ = model(student, teacher)
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in peft_model.parameters() if p.requires_grad]

    from torch._dynamo.utils import counters

    eager_loss, eager_grads = loss_and_grads()
    compile_decoder_layers(peft_model)
    graphs_before = counters["stats"]["unique_graphs"]
    compiled_loss, compiled_grads = loss_and_grads()
    assert counters["stats"]["unique_graphs"] > graphs_before  # the layers really ran compiled
    torch.testing.assert_close(compiled_loss, eager_loss, rtol=1e-5, atol=1e-6)
    for got, want in zip(compiled_grads, eager_grads):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("mode", ["tf32", "ieee"])
def test_fp32_matmul_holds_for_the_training_steps_and_is_put_back(world, tmp_path, monkeypatch, mode):
    """train.fp32_matmul is process-wide in torch: it must cover every step and no later phase of a warm
    worker (an evaluation in the same process computes as in a fresh one)."""
    from opsd_sweep.train import trainer as trainer_module

    seen, step = [], OPSDTrainer.train_step

    def recording_step(self):
        seen.append(torch.backends.cuda.matmul.allow_tf32)
        return step(self)

    monkeypatch.setattr(OPSDTrainer, "train_step", recording_step)
    before = torch.backends.cuda.matmul.allow_tf32
    run = train_run(world, tmp_path, "train.max_steps=2", "train.save_steps=2", f"train.fp32_matmul={mode}")
    trainer_module.main(make_run_dir(tmp_path / "run", run).path)
    assert seen == [mode == "tf32"] * 2
    assert torch.backends.cuda.matmul.allow_tf32 == before


def test_profile_step_writes_that_steps_kernel_table_and_marks_its_line(world, tmp_path):
    from opsd_sweep.train import trainer as trainer_module

    run = train_run(world, tmp_path, "train.max_steps=3", "train.save_steps=3", "train.profile_step=2")
    run_dir = make_run_dir(tmp_path / "run", run)
    trainer_module.main(run_dir.path)
    table = (run_dir.train_dir / "profile_step2.txt").read_text()
    assert "Self CPU time total" in table and "aten::" in table
    assert [line.get("profiled", False) for line in read_metrics(run_dir)] == [False, True, False]
    assert sorted(p.name for p in run_dir.train_dir.glob("profile_step*")) == ["profile_step2.txt"]


def test_the_rollout_engine_is_sized_from_the_datas_longest_prompt_whatever_the_seeds_order(world, tmp_path):
    """The longest student prompt sizes the vLLM rollout engine and is in a kept engine's key: taken from the first
    rows of a seed's shuffled order, it changed with the seed, and a phase worker started every seed afresh."""
    rows = [json.loads(line) for line in (world / "train.jsonl").read_text().splitlines()]
    rows[37]["problem"] += " Then check the result twice." * 6  # the one longest prompt, somewhere in the data
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    orders = set()
    for seed in (1, 2, 3):
        run = train_run(world, tmp_path, f"data.path={data}", f"seed={seed}")
        trainer = OPSDTrainer(run, make_run_dir(tmp_path / f"s{seed}", run))
        trainer.setup()
        orders.add(tuple(row["id"] for row in trainer.rows))
        assert trainer._longest_student_prompt() == len(trainer._student_prompt(rows[37]))
    assert len(orders) == 3  # three orders of the data, one size
