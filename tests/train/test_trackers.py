"""train.report_to on CPU: the TensorBoard event file read back holds every training metric at its
step, the config and the final eval metrics; a resumed train phase logs each step once; W&B without
its package is a config error naming the fix."""

from __future__ import annotations

import importlib.util
import json
import shutil

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from opsd_sweep.config import ConfigError
from opsd_sweep.run.keys import semantic_dict
from opsd_sweep.evaluate.evaluator import main as evaluate_run_dir
from opsd_sweep.preflight import preflight_problems
from opsd_sweep.run.keys import run_key
from opsd_sweep.run.rundir import atomic_write_text
from opsd_sweep.train.trainer import OPSDTrainer
from tests.train.conftest import make_run_dir, train_run
from tests.train.test_trainer import read_metrics


def run_trainer(run, run_dir) -> None:
    trainer = OPSDTrainer(run, run_dir)
    trainer.setup()
    trainer.train()
    trainer.cleanup()


def events(run_dir) -> EventAccumulator:
    accumulator = EventAccumulator(str(run_dir.tensorboard))
    accumulator.Reload()
    return accumulator


@pytest.fixture(scope="module")
def logged(world, tmp_path_factory):
    """A 2-step run with report_to=tensorboard, trained, then evaluated by the eval phase's entry point."""
    root = tmp_path_factory.mktemp("tracked")
    problems = [{"id": f"q{i}", "problem": f"Compute {i} + 2 * 3.", "answer": str(i + 6)} for i in range(4)]
    atomic_write_text(root / "eval.jsonl", "".join(json.dumps(p) + "\n" for p in problems))
    run = train_run(world, root, "train.report_to=tensorboard", "train.max_steps=2", "train.save_steps=1",
                    "eval=local", f"eval.path={root / 'eval.jsonl'}", "eval.n_samples=2", "eval.max_new_tokens=8",
                    "eval.prompt='{problem}'")
    run_dir = make_run_dir(root / "run", run)
    run_dir.train_dir.mkdir()
    run_trainer(run, run_dir)
    evaluate_run_dir(run_dir.path)
    return run, run_dir


def test_every_training_metric_is_logged_at_its_step(logged):
    _, run_dir = logged
    tb = events(run_dir)
    lines = read_metrics(run_dir)
    for key in ("loss", "kl_true", "grad_norm", "lr", "rollout_len", "time_teacher"):
        logged_values = [(e.step, e.value) for e in tb.Scalars(f"train/{key}")]
        assert logged_values == [(line["step"], pytest.approx(line[key], rel=1e-6)) for line in lines], key


def test_the_final_eval_metrics_and_the_config_are_logged(logged):
    run, run_dir = logged
    tb = events(run_dir)
    metrics = json.loads(run_dir.eval_json.read_text())["metrics"]
    for key, value in (("avg_at_n", metrics["avg_at_n"]), ("pass_at_k/2", metrics["pass_at_k"]["2"]),
                       ("format_rate", metrics["format_rate"])):
        assert [(e.step, e.value) for e in tb.Scalars(f"eval/{key}")] == [(2, pytest.approx(value, rel=1e-6))]
    config_text = tb.Tensors("config/text_summary")[0].tensor_proto.string_val[0].decode()
    assert f"learning_rate: {run.learning_rate}" in config_text and "report_to: tensorboard" in config_text


def test_a_resumed_train_phase_logs_each_step_once(logged, tmp_path):
    run, reference = logged
    run_dir = make_run_dir(tmp_path / "run", run)
    shutil.copytree(reference.train_dir, run_dir.train_dir)
    shutil.copytree(reference.tensorboard, run_dir.tensorboard)
    shutil.rmtree(run_dir.checkpoint(2))  # as if killed after step 2 was logged but before its checkpoint
    run_trainer(run, run_dir)  # resumes at step 1: step 2 again
    assert [e.step for e in events(run_dir).Scalars("train/loss")] == [1, 2]


def test_report_to_is_checked_and_never_enters_the_run_key(world, tmp_path):
    base = run_key(semantic_dict(train_run(world, tmp_path)))
    assert run_key(semantic_dict(train_run(world, tmp_path, "train.report_to=tensorboard"))) == base
    with pytest.raises(ConfigError, match=r"train.report_to='mlflow' is not one of \['none', 'tensorboard', 'wandb'\]"):
        train_run(world, tmp_path, "train.report_to=mlflow")
    if importlib.util.find_spec("wandb") is None:  # a probe of this machine: the pre-flight's
        problems = preflight_problems(train_run(world, tmp_path, "train.report_to=wandb"), train=True)
        assert ("train.report_to=wandb needs the wandb package, which is not installed: pip install -e "
                "'.[wandb]' (or train.report_to=none)") in problems
