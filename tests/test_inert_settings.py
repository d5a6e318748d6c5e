"""Settings that change nothing are refused where they would mislead, before any compute: a grid over a setting
the chosen loss ignores (clip under loss.clip_mode=none), a top-k as large as the model's vocabulary (the full
distribution, as loss_top_k=null), and a config group chosen on the command line that the profile then replaces by
value (profile=tiny eval=aime24)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from opsd_sweep.config import ConfigError, load_run_config, overridden_choices
from opsd_sweep.inert import inert_settings, inert_twin_problems
from opsd_sweep.tiny import build_tokenizer, make_datasets, tokenizer_corpus
from tests.conftest import REPO, compose, run_sweep


def runs(*grid: list[str]):
    return [(" ".join(point), load_run_config(compose(point))) for point in grid]


def test_a_grid_over_clip_under_a_loss_that_never_clips_is_one_config_named_with_the_fix():
    points = runs(["profile=tiny", "clip=0.05"], ["profile=tiny", "clip=0.5"], ["profile=tiny", "clip=0.05", "seed=2"],
                  ["profile=tiny", "clip=0.5", "seed=2"])
    problems = inert_twin_problems(points)
    assert len(problems) == 1, problems  # the twins of each seed, under one message
    message, labels = next(iter(problems.items()))
    assert labels == [label for label, _ in points]
    for text in ("clip=0.05,0.5", "loss.clip_mode=none", "loss=forward_kl", "drop the sweep over clip",
                 "loss=paper_clip"):
        assert text in message, message


def test_clip_counts_where_the_loss_clips_and_other_differences_are_real():
    assert inert_twin_problems(runs(["clip=0.05"], ["clip=0.5"])) == {}  # loss=paper_clip reads clip
    assert inert_twin_problems(runs(["loss=trust_region", "clip=0.5"], ["loss=trust_region", "clip=1.0"])) == {}
    # under the tiny profile's loss, points that differ in a setting that is read are distinct configs
    assert inert_twin_problems(runs(["profile=tiny", "clip=0.05", "learning_rate=1e-3"],
                                    ["profile=tiny", "clip=0.5", "learning_rate=3e-3"])) == {}
    # identical points are the launcher's exact-duplicate check, not this one
    assert inert_twin_problems(runs(["profile=tiny", "clip=0.5"], ["profile=tiny", "clip=0.5"])) == {}


def test_a_grid_over_save_steps_is_one_config_when_only_the_last_checkpoint_is_scored():
    grid = [["profile=tiny", "train.save_steps=2"], ["profile=tiny", "train.save_steps=4"]]
    problems = inert_twin_problems(runs(*grid))
    assert len(problems) == 1 and "train.save_steps=2,4 would be 2 configs that are one" in next(iter(problems))
    assert "eval.checkpoints=all" in next(iter(problems))
    # every checkpoint evaluated: which ones exist is what is computed
    assert inert_twin_problems(runs(*[point + ["eval.checkpoints=all"] for point in grid])) == {}


def tiny_vocabulary() -> int:
    """The tiny world's vocabulary, from its tokenizer as the world's build trains it (far below tiny.vocab_size,
    the BPE trainer's upper bound)."""
    cfg = load_run_config(compose(["profile=tiny"])).tiny
    train, held_out = make_datasets(cfg.n_train, cfg.n_eval, cfg.seed)
    vocab = len(build_tokenizer(tokenizer_corpus(train + held_out, cfg.warm_start), cfg.vocab_size))
    assert vocab < cfg.vocab_size
    return vocab


def test_a_top_k_as_large_as_the_vocabulary_is_the_full_distribution_so_a_grid_with_null_is_one_config(tmp_path):
    vocab, unbuilt = tiny_vocabulary(), f"cache_dir={tmp_path}"  # no world on disk: nothing built to find it
    problems = inert_twin_problems(runs(["profile=tiny", unbuilt, "loss_top_k=null"],
                                        ["profile=tiny", unbuilt, f"loss_top_k={vocab}"]))
    assert len(problems) == 1, problems
    message = next(iter(problems))
    for text in (f"loss_top_k={vocab},null would be 2 configs that are one", f"{vocab} tokens", "full distribution",
                 "loss_top_k=null", f"below {vocab}"):
        assert text in message, message
    assert not (tmp_path / "tiny").exists()
    # one below the vocabulary keeps a top-k: a real config of its own
    assert inert_twin_problems(runs(["profile=tiny", unbuilt, "loss_top_k=null"],
                                    ["profile=tiny", unbuilt, f"loss_top_k={vocab - 1}"])) == {}


def test_a_top_k_above_the_tiny_vocabulary_is_refused_before_the_world_is_built(tmp_path):
    vocab = tiny_vocabulary()
    cfg = compose(["profile=tiny", f"cache_dir={tmp_path}", f"loss_top_k={vocab + 1}"])
    from opsd_sweep.cycle import load_cycle_config

    with pytest.raises(ConfigError) as err:
        load_cycle_config(cfg)
    assert f"loss_top_k={vocab + 1} exceeds the vocabulary" in str(err.value) and f"({vocab} tokens)" in str(err.value)
    assert not (tmp_path / "tiny").exists()


def test_the_cli_refuses_a_top_k_grid_that_is_one_config_before_any_compute(tmp_path):
    vocab, cache = tiny_vocabulary(), tmp_path / "cache"
    proc = run_sweep(["-m", "profile=tiny", f"loss_top_k=null,{vocab}", "seed=1", "group=topk1"], tmp_path / "results",
                     cache, timeout=120)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    assert "the sweep was not started" in output and f"loss_top_k={vocab},null would be 2 configs" in output
    assert "Traceback" not in output and not (cache / "tiny").exists()
    assert not list(tmp_path.rglob("status.json"))


def test_a_single_run_with_an_inert_value_runs():
    run = load_run_config(compose(["profile=tiny", "clip=0.5"]))
    assert run.clip == 0.5 and list(inert_settings(run)) == ["clip", "train.save_steps", "loss_top_k"]


def test_the_cli_refuses_a_clip_grid_under_the_tiny_loss_before_any_compute(tmp_path, cache_dir):
    proc = run_sweep(["-m", "profile=tiny", "clip=0.05,0.5", "seed=1", "train.max_steps=2", "train.save_steps=2",
                      "eval.n_samples=1", "group=clip1"], tmp_path, cache_dir, timeout=120)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    assert "the sweep was not started" in output and "clip=0.05,0.5" in output and "loss.clip_mode=none" in output
    assert "Traceback" not in output
    assert not list(tmp_path.rglob("status.json")) and not list(tmp_path.rglob("metrics.jsonl"))


def test_a_group_choice_the_profile_replaces_is_refused_naming_both_and_the_fix(tmp_path):
    results = tmp_path / "results"
    proc = subprocess.run([sys.executable, "-m", "opsd_sweep.evaluate", "profile=tiny", "train.max_steps=0",
                           "eval=aime24", "model=qwen3-4b", "seed=1", "group=b11", f"results_root={results}",
                           f"cache_dir={tmp_path / 'cache'}"], cwd=REPO, text=True, capture_output=True, timeout=120)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output
    assert "eval=aime24 is replaced by profile=tiny" in output and "eval.name=tiny-arith-heldout" in output
    assert "model=qwen3-4b is replaced by profile=tiny" in output and "model.name=tiny-qwen3" in output
    assert "Drop eval=aime24" in output and "drop profile=tiny" in output
    assert "Traceback" not in output and not results.exists()


def test_a_sweep_refuses_the_replaced_choice_in_its_grid_check(tmp_path, cache_dir):
    proc = run_sweep(["-m", "profile=tiny", "data=local", "seed=1,2"], tmp_path, cache_dir, timeout=120)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    assert "the sweep was not started: 2 of 2 jobs cannot run." in output
    assert "data=local is replaced by profile=tiny" in output and "data.name=tiny-arith" in output


def test_choices_the_profile_leaves_to_the_command_line_are_not_refused():
    run = load_run_config(compose(["profile=tiny"]))
    # loss: the profile's `override /loss:` yields to loss=...; single keys of a section win over the profile
    assert overridden_choices("tiny", ["loss=paper_clip", "eval.n_samples=2", "model.dtype=float32", "seed=3"],
                              run) == []
    assert len(overridden_choices("tiny", ["eval=tiny_locked"], run)) == 1
