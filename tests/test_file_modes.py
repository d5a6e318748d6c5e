"""Run files a colleague can read (issue 48): every file of a run dir is written with the mode open() gives a
new file, 0o666 less the umask (0644 under umask 022), though each is written through a temp file and renamed
into place: status.json and its copy, config.yaml, identity.json, eval.json and completions (atomic_write_*),
claim files, and a checkpoint's files (the adapter, which safetensors writes 0600 itself, and the trainer
state)."""

from __future__ import annotations

import os
import stat

import pytest

from opsd_sweep.run.claims import claim_run, release_run
from opsd_sweep.run.rundir import RunDir, atomic_write_json, atomic_write_text, umask_mode


@pytest.fixture(params=[0o022, 0o027], ids=["umask022", "umask027"])
def umask(request):
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_atomic_writes_get_the_mode_open_gives(tmp_path, umask):
    expected = 0o666 & ~umask
    with open(tmp_path / "plain.txt", "w") as handle:  # what a colleague's tools would write
        handle.write("x")
    assert mode(tmp_path / "plain.txt") == expected == umask_mode()
    atomic_write_text(tmp_path / "eval" / "completions.jsonl", "{}\n")
    atomic_write_json(tmp_path / "eval" / "eval.json", {"metrics": {}})
    run_dir = RunDir(tmp_path / "run")
    atomic_write_text(run_dir.config, "seed: 1\n")
    run_dir.write_identity("k" * 16, {"model": "m"})
    run_dir.update_status(state="training")
    for path in (tmp_path / "eval" / "completions.jsonl", tmp_path / "eval" / "eval.json", run_dir.config,
                 run_dir.identity, run_dir.status, run_dir.status_copy):
        assert mode(path) == expected, path
    assert not [p for p in (tmp_path / "eval").iterdir() if p.name.endswith(".tmp")]  # no temp file left


def test_a_claim_file_gets_the_mode_open_gives(tmp_path, umask):
    run_dir = RunDir(tmp_path / "run")
    claim = claim_run(run_dir)
    try:
        assert mode(claim.path) == 0o666 & ~umask
        assert [p.name for p in run_dir.claims.iterdir()] == [claim.path.name]  # its temp file is gone
    finally:
        release_run(claim)


def test_a_checkpoint_and_its_adapter_get_the_mode_open_gives(tmp_path, umask):
    import torch
    from accelerate import Accelerator
    from safetensors.torch import save_file

    from opsd_sweep.train import checkpoint

    def save_adapter(path):  # as PEFT's save_pretrained writes the weights: through safetensors
        save_file({"lora_A": torch.zeros(2, 2)}, path / "adapter_model.safetensors")
        (path / "adapter_config.json").write_text("{}")

    save_file({"x": torch.zeros(1)}, tmp_path / "alone.safetensors")
    assert mode(tmp_path / "alone.safetensors") == 0o600  # the premise: the library alone writes 0600
    acc = Accelerator(cpu=True)
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.AdamW(model.parameters())
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    path = tmp_path / "train" / "checkpoint-1"
    path.parent.mkdir()
    checkpoint.save_checkpoint(path, accelerator=acc, save_adapter=save_adapter, optimizer=optimizer,
                               scheduler=scheduler, step=1, sharded_optimizer=False, teacher=None)
    files = sorted(p.name for p in path.iterdir())
    assert files == ["adapter_config.json", "adapter_model.safetensors", "rank0.pt", "state.pt", "trainer_state.json"]
    assert {name: mode(path / name) for name in files} == {name: 0o666 & ~umask for name in files}
