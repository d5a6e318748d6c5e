"""Teacher strategies on CPU: EMA decay 0 is the student teacher, decay 1 the fixed one, the EMA
follows its update rule, and a run killed with SIGKILL resumes to the same EMA and losses."""

from __future__ import annotations

import subprocess

import pytest
import torch

from opsd_sweep.config import ConfigError
from opsd_sweep.run.keys import semantic_dict
from opsd_sweep.run.keys import run_key
from opsd_sweep.train.trainer import OPSDTrainer
from tests.train.conftest import make_run_dir, train_run
from tests.train.test_trainer import kill_at_checkpoint, read_metrics, train_command, trainer_env

# LoRA dropout > 0: the student and EMA teachers run in eval mode, the student forward does not.
STEPS = ("train.max_steps=3", "train.save_steps=1", "train.lora.dropout=0.1", "seed=3")


def train_in_process(world, root, *overrides: str) -> tuple[list[float], OPSDTrainer]:
    run = train_run(world, root, *STEPS, *overrides)
    trainer = OPSDTrainer(run, make_run_dir(root / "run", run))
    trainer.run_dir.train_dir.mkdir()
    trainer.setup()
    trainer.train()
    return [line["loss"] for line in read_metrics(trainer.run_dir)], trainer


def ema_of(checkpoint) -> dict[str, torch.Tensor]:
    return torch.load(checkpoint / "state.pt", weights_only=False)["teacher"]["ema"]


@pytest.fixture(scope="module")
def losses(world, tmp_path_factory):
    def run(name: str, *overrides: str) -> list[float]:
        return train_in_process(world, tmp_path_factory.mktemp(name), *overrides)[0]
    return {"fixed": run("fixed", "train.teacher=fixed"), "student": run("student", "train.teacher=student"),
            "ema0": run("ema0", "train.teacher=ema", "train.ema_decay=0"),
            "ema1": run("ema1", "train.teacher=ema", "train.ema_decay=1")}


def test_ema_decay_0_is_the_student_teacher(losses):
    assert losses["ema0"] == pytest.approx(losses["student"], rel=1e-6, abs=1e-9)  # losses are ~1e-4 here


def test_ema_decay_1_is_the_fixed_teacher(losses):
    assert losses["ema1"] == pytest.approx(losses["fixed"], rel=1e-6, abs=1e-9)


def test_the_strategies_really_differ(losses):
    """After step 1 (where all teachers are the initial model) a moving teacher changes the loss."""
    assert losses["student"][0] == pytest.approx(losses["fixed"][0], rel=1e-6)
    assert abs(losses["student"][-1] - losses["fixed"][-1]) > 0.1 * losses["fixed"][-1]


def test_ema_follows_its_update_rule_and_is_checkpointed(world, tmp_path):
    decay = 0.6
    _, trainer = train_in_process(world, tmp_path, "train.teacher=ema", f"train.ema_decay={decay}")
    from safetensors.torch import load_file

    previous = None
    for step in (1, 2, 3):
        ema = ema_of(trainer.run_dir.checkpoint(step))
        weights = load_file(trainer.run_dir.checkpoint(step) / "adapter_model.safetensors")
        if previous is not None:
            for name, value in ema.items():
                saved = name.replace(".default", "")  # PEFT saves adapter weights without the adapter name
                torch.testing.assert_close(value, decay * previous[name] + (1 - decay) * weights[saved],
                                           rtol=1e-5, atol=1e-7)
        previous = ema
    assert any("lora_B" in name and value.abs().sum() > 0 for name, value in previous.items())


def test_resume_after_kill_9_gives_the_same_ema_and_loss(world, tmp_path):
    resume = (*STEPS[:-2], "train.save_steps=2", "train.max_steps=4", "train.lora.dropout=0.1", "seed=5",
              "train.teacher=ema", "train.ema_decay=0.5")
    dirs = {}
    for name in ("reference", "killed"):
        dirs[name] = make_run_dir(tmp_path / name, train_run(world, tmp_path, *resume))
    done = subprocess.run(train_command(dirs["reference"]), env=trainer_env(), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    killed = dirs["killed"]
    kill_at_checkpoint(killed, 2)
    assert not killed.checkpoint(4).exists()
    again = subprocess.run(train_command(killed), env=trainer_env(), capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "at step 2" in again.stdout + again.stderr
    want, got = ema_of(dirs["reference"].checkpoint(4)), ema_of(killed.checkpoint(4))
    assert want.keys() == got.keys()
    for name in want:
        assert torch.equal(want[name], got[name]), name
    assert [line["loss"] for line in read_metrics(killed)] == [line["loss"] for line in read_metrics(dirs["reference"])]


def test_teacher_knobs_are_checked_and_enter_the_run_key_only_where_they_matter(world, tmp_path):
    with pytest.raises(ConfigError) as err:
        train_run(world, tmp_path, "train.teacher=moving", "train.ema_decay=1.5")
    assert "train.teacher='moving' is not one of ['fixed', 'ema', 'student']" in str(err.value)
    assert "train.ema_decay=1.5 must be in [0, 1]" in str(err.value)

    def key(*overrides: str) -> str:
        return run_key(semantic_dict(train_run(world, tmp_path, *overrides)))
    fixed = key()
    # runs from before the knobs existed had the fixed teacher: their keys (and run dirs) stay
    assert "teacher" not in semantic_dict(train_run(world, tmp_path))["train"]
    assert key("train.ema_decay=0.5") == fixed
    assert len({fixed, key("train.teacher=student"), key("train.teacher=ema"),
                key("train.teacher=ema", "train.ema_decay=0.5")}) == 4
