"""Common random numbers, what pairing=seed relies on: two configs that differ only in learning rate start,
under the same seed, from byte-identical adapters and draw the same first rollouts; another seed does not."""

from __future__ import annotations

import pytest
import torch

from opsd_sweep.train.trainer import OPSDTrainer
from tests.train.conftest import make_run_dir, train_run


def first_step(world, folder, *overrides) -> tuple[bytes, list[list[int]], dict[str, torch.Tensor]]:
    """(the adapter file saved before any optimiser step, the first step's rollout token ids, the adapter after
    that step) of a 1-step run. The rollouts are read from the real rollout backend's answer, not redrawn."""
    run = train_run(world, folder, "train.max_steps=1", "train.save_steps=1", *overrides)
    run_dir = make_run_dir(folder / "run", run)
    run_dir.train_dir.mkdir(parents=True)  # as train.main does before the trainer
    trainer = OPSDTrainer(run, run_dir)
    trainer.setup()
    trainer.peft_model.save_pretrained(folder / "initial")
    drawn = []
    generate = trainer.rollout.generate

    def recorded(prompts, seed):
        rollouts = generate(prompts, seed)
        drawn.append([list(map(int, ids)) for ids in rollouts.completions])
        return rollouts

    trainer.rollout.generate = recorded
    trainer.train()
    trainer.cleanup()
    after = {k: v.detach().clone() for k, v in trainer.peft_model.state_dict().items() if "lora_" in k}
    return (folder / "initial" / "adapter_model.safetensors").read_bytes(), drawn[0], after


@pytest.fixture(scope="module")
def runs(world, tmp_path_factory):
    made = {}
    for name, overrides in {"lr_small": ("learning_rate=1e-4", "seed=3"), "lr_large": ("learning_rate=3e-3", "seed=3"),
                            "other_seed": ("learning_rate=1e-4", "seed=4")}.items():
        made[name] = first_step(world, tmp_path_factory.mktemp(name), *overrides)
    return made


def test_same_seed_same_initial_adapter_and_first_rollouts_across_learning_rates(runs):
    small, large = runs["lr_small"], runs["lr_large"]
    assert small[0] == large[0]  # the adapter file before the first step, byte for byte
    assert small[1] == large[1] and sum(map(len, small[1])) > 0  # the first step's sampled token ids
    # the learning rate did act: the adapters part after the first optimiser step
    assert any(not torch.equal(small[2][k], large[2][k]) for k in small[2])


def test_another_seed_starts_elsewhere(runs):
    small, other = runs["lr_small"], runs["other_seed"]
    assert small[0] != other[0]  # LoRA init follows the seed
    assert small[1] != other[1]  # so do the data order and the rollout seeds
