"""Checkpoints: a PEFT adapter dir plus the trainer state, written atomically.

A checkpoint is assembled in `.checkpoint-<step>.tmp` and renamed to `checkpoint-<step>` only when
every file is on disk, so a run killed at any moment leaves either a complete checkpoint or none
(run.rundir.RunDir.checkpoints lists complete ones). Contents:
  adapter_config.json, adapter_model.safetensors   the student's LoRA adapter (PEFT format)
  state.pt         step, scheduler, (unless sharded) optimizer state and the teacher's (the EMA, if any)
  rank<r>.pt       this rank's RNG states (and its optimizer shard under FSDP)
  trainer_state.json   {step, world_size}, written last
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from opsd_sweep.run.rundir import atomic_write_json, give_umask_mode, read_json


def rng_state() -> dict:
    state = {"torch": torch.get_rng_state(), "python": random.getstate(), "numpy": np.random.get_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])


def save_checkpoint(path: Path, *, accelerator, save_adapter: Callable[[Path], None], optimizer, scheduler,
                    step: int, sharded_optimizer: bool, teacher: dict | None) -> None:
    """Every rank calls this; rank 0 writes the shared files and renames the directory into place."""
    acc = accelerator
    tmp = path.with_name(f".{path.name}.tmp")
    if acc.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    acc.wait_for_everyone()
    save_adapter(tmp)
    rank_state = {"rng": rng_state()} | ({"optimizer": optimizer.state_dict()} if sharded_optimizer else {})
    torch.save(rank_state, tmp / f"rank{acc.process_index}.pt")
    if acc.is_main_process:
        shared = {"step": step, "scheduler": scheduler.state_dict(), "teacher": teacher}
        if not sharded_optimizer:
            shared["optimizer"] = optimizer.state_dict()
        torch.save(shared, tmp / "state.pt")
    acc.wait_for_everyone()
    if acc.is_main_process:
        atomic_write_json(tmp / "trainer_state.json", {"step": step, "world_size": acc.num_processes})
        give_umask_mode(tmp)  # safetensors writes the adapter 0600 through a temp file of its own
        shutil.rmtree(path, ignore_errors=True)  # same step from an earlier attempt
        os.replace(tmp, path)
    acc.wait_for_everyone()


def load_adapter(path: Path, peft_model) -> None:
    """Put a checkpoint's adapter weights into the (not yet wrapped) PEFT model."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    result = set_peft_model_state_dict(peft_model, load_file(path / "adapter_model.safetensors"))
    missing = [k for k in result.missing_keys if "lora_" in k]
    if missing:
        raise RuntimeError(f"checkpoint {path} lacks adapter weights {missing[:3]}...: it was written for "
                           "another LoRA setup (train.lora.*); start a new run instead of resuming this one")


def load_trainer_state(path: Path, *, accelerator, optimizer, scheduler, sharded_optimizer: bool, teacher) -> int:
    """Restore optimizer, scheduler, teacher and this rank's RNG; return the step the checkpoint was taken at."""
    saved_world = read_json(path / "trainer_state.json")["world_size"]
    if saved_world != accelerator.num_processes:
        raise RuntimeError(f"checkpoint {path} was written by {saved_world} processes, this run has "
                           f"{accelerator.num_processes}; resume with train.num_gpus={saved_world}")
    shared = torch.load(path / "state.pt", weights_only=False)
    mine = torch.load(path / f"rank{accelerator.process_index}.pt", weights_only=False)
    if "optimizer" not in (mine if sharded_optimizer else shared):  # each rank's shard (FSDP) or one state (DDP)
        written = "ddp" if sharded_optimizer else "fsdp"
        raise RuntimeError(f"checkpoint {path} was written under train.strategy={written}; resume with it")
    optimizer.load_state_dict(mine["optimizer"] if sharded_optimizer else shared["optimizer"])
    scheduler.load_state_dict(shared["scheduler"])
    set_rng_state(mine["rng"])
    teacher.load_state_dict(shared.get("teacher"), shared["step"])
    return shared["step"]


def remove_partial_checkpoints(train_dir: Path) -> None:
    for tmp in train_dir.glob(".checkpoint-*.tmp"):
        shutil.rmtree(tmp, ignore_errors=True)
