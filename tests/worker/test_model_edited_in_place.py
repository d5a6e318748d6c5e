"""Issue 38, item 4: a local model dir rewritten in place (other weights, same path) between two cycles of one
warm phase worker. The second cycle gets a new run key (the model's content identity, run/identity.py); the
worker must not hand it what it kept from the first (tokenizer, PEFT student, rollout engine), which holds the
old weights: it trains the new weights, exactly as a cycle in processes of its own does."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hydra_plugins.opsd_local_gpus._phase_workers import PhaseWorkers
from opsd_sweep.config import load_run_config
from opsd_sweep.run.keys import input_identities
from opsd_sweep.worker import warm
from tests.conftest import compose, run_sweep
from tests.orchestration.conftest import TINY, run_dirs
from tests.worker.test_phase_workers import adapter_bytes, evaluation, metrics, phase_workers

OWN_PROCESSES = "hydra.launcher.phase_workers=false"  # the sweep starts no worker of its own


def rewrite_weights(model_dir: Path) -> None:
    """Other weights saved over the model's own files, as a fine-tune written back to its base's dir would be:
    the same architecture, tokenizer and file names, every weight moved by seeded noise."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    generator = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(0.05 * param.std() * torch.randn(param.shape, generator=generator))
    before = {path.name for path in model_dir.iterdir()}
    model.save_pretrained(model_dir)
    assert {path.name for path in model_dir.iterdir()} == before  # rewritten in place, nothing added


def cycle(args: list[str], results: Path, cache: Path, env: dict[str, str] | None = None) -> Path:
    done = run_sweep(args, results, cache, env_extra=env)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    [run_dir] = run_dirs(results).values()
    return run_dir


@pytest.mark.slow
def test_a_model_rewritten_in_place_between_cycles_is_trained_anew_in_the_same_worker(tmp_path, tiny_cache):
    model = tmp_path / "model"  # a local model dir outside the tiny world (whose paths are keyed by tiny.*)
    shutil.copytree(tiny_cache / "tiny" / "model", model)
    args = ["-m", *TINY, OWN_PROCESSES, "train.max_steps=2", "seed=1", f"model.path={model}"]
    # one warm CPU worker, started as the launcher starts one, handed to both cycles through the environment
    # the launcher would set (the cycles are separate sweeps so that the model can be rewritten between them)
    workers = PhaseWorkers(tmp_path / "workers")
    worker = workers.take([], {})
    try:
        old = cycle(args, tmp_path / "old", tiny_cache, worker.env())
        rewrite_weights(model)
        new_warm = cycle(args, tmp_path / "new_warm", tiny_cache, worker.env())
        assert worker.alive()  # the next cycle could still use it: only its kept objects were replaced
    finally:
        workers.stop_all()
    new_cold = cycle(args, tmp_path / "new_cold", tiny_cache)  # the new weights in processes of their own

    assert new_warm.name != old.name  # a new run key: the model's content identity changed
    for run_dir in (old, new_warm):
        assert phase_workers(run_dir) == phase_workers(run_dir, "evaluate") == [worker.process.pid]
    assert phase_workers(new_cold) == [None]
    identities = [json.loads((run_dir / "identity.json").read_text())["inputs"]["model"]
                  for run_dir in (old, new_warm, new_cold)]
    assert identities[0] != identities[1] == identities[2]

    assert metrics(new_warm)[0]["step"] == 1
    assert metrics(new_warm) == metrics(new_cold)  # the new weights trained, from step 1 on
    assert metrics(old)[0] != metrics(new_cold)[0]  # the weights differ enough to tell: this test can fail
    assert adapter_bytes(new_warm) == adapter_bytes(new_cold)
    assert evaluation(new_warm) == evaluation(new_cold)


def test_what_a_worker_keeps_is_keyed_by_the_models_content_not_its_path(tmp_path, tiny_cache):
    """warm.model_identity: the run key's identity of a local model dir (its place and a fingerprint of its
    files), new when its weights are rewritten in place; a tiny-world model, which the run key names by its
    place (tiny.* in the key say what it holds), by its files too: a sweep over tiny.* rebuilds it in place."""
    model = tmp_path / "model"
    shutil.copytree(tiny_cache / "tiny" / "model", model)
    run = load_run_config(compose(["profile=tiny", f"cache_dir={tiny_cache}", f"model.path={model}"]))
    before = warm.model_identity(run)
    assert before == input_identities(run)["model"] and before.startswith(f"dir:{model}:")
    rewrite_weights(model)
    assert warm.model_identity(run) == input_identities(run)["model"] != before

    tiny = load_run_config(compose(["profile=tiny", f"cache_dir={tiny_cache}"]))
    assert input_identities(tiny)["model"] == "tiny:model"
    assert warm.model_identity(tiny).startswith(f"dir:{tiny.model.path}:")
