"""Experiment trackers (train.report_to): none | tensorboard | wandb, through accelerate's trackers.

One tracker run per cycle, opened by both phases: the train phase logs every metrics line at its
step, the eval phase the eval metrics at the step of each checkpoint it evaluates. TensorBoard writes to
<run dir>/tensorboard/, so `tensorboard --logdir <results_root>/<group>` shows a Hydra group's runs
side by side; W&B puts each run (id = the run key, so a resumed phase continues it) in the W&B group
named after the Hydra group, its local files under <run dir>/wandb/.
"""

from __future__ import annotations

import importlib.util

from omegaconf import OmegaConf

from opsd_sweep.config import RunConfig, to_dict
from opsd_sweep.run.rundir import RunDir

# The package each tracker needs, and where it comes from.
PACKAGES = {"tensorboard": ("tensorboard", "pip install -e '.[tensorboard]'"),
            "wandb": ("wandb", "pip install -e '.[wandb]'")}


def missing_tracker_package(report_to: str) -> str | None:
    """The problem with train.report_to on this machine (its package is not installed), or None."""
    if report_to not in PACKAGES:
        return None
    package, install = PACKAGES[report_to]
    if importlib.util.find_spec(package) is not None:
        return None
    return (f"train.report_to={report_to} needs the {package} package, which is not installed: {install} "
            "(or train.report_to=none)")


class NoTracker:
    """train.report_to=none: a tracker that records nothing, so callers never branch on the setting."""

    def log(self, values: dict, step: int) -> None:
        """Nothing to record."""

    def finish(self) -> None:
        """Nothing to close."""


class Tracker:
    """One accelerate tracker, started; numbers only (nested dicts become slash-separated names)."""

    def __init__(self, tracker):
        self.tracker = tracker

    def log(self, values: dict, step: int) -> None:
        self.tracker.log(dict(_scalars(values)), step=step)

    def finish(self) -> None:
        self.tracker.finish()


def open_tracker(run: RunConfig, run_dir: RunDir, *, phase: str, step: int) -> NoTracker | Tracker:
    """The cycle's tracker run for one phase; `step` is where the phase starts (a resumed train phase
    drops the TensorBoard events after it, as metrics.jsonl drops its lines). The config is stored once,
    by a train phase that starts at step 0: W&B's run config, TensorBoard's Text tab (its hparams view
    would add a run to the list per call)."""
    kind = run.train.report_to
    if kind == "none":
        return NoTracker()
    problem = missing_tracker_package(kind)
    if problem:
        raise RuntimeError(problem)
    from accelerate.tracking import TensorBoardTracker, WandBTracker

    if kind == "tensorboard":
        purge = {"purge_step": step + 1} if phase == "train" and step > 0 else {}
        tracker = TensorBoardTracker(run_dir.tensorboard.name, run_dir.tensorboard.parent, **purge)
    else:
        tracker = WandBTracker(run.train.wandb_project, group=run.group, name=run_dir.path.name,
                               id=_wandb_id(run_dir), resume="allow", dir=str(run_dir.path), job_type="cycle")
    tracker.start()
    if phase == "train" and step == 0:
        if kind == "wandb":
            tracker.store_init_configuration(to_dict(run))
        else:
            tracker.log({"config": OmegaConf.to_yaml(to_dict(run))}, step=0)
    return Tracker(tracker)


def log_eval(run: RunConfig, run_dir: RunDir, metrics: dict, step: int) -> None:
    """Eval metrics of the checkpoint of `step` (the final one, or each with eval.checkpoints=all)."""
    tracker = open_tracker(run, run_dir, phase="eval", step=step)
    tracker.log({"eval": metrics}, step)
    tracker.finish()


def _wandb_id(run_dir: RunDir) -> str:
    return run_dir.read_status().get("key") or run_dir.path.name


def _scalars(values: dict, prefix: str = ""):
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            yield from _scalars(value, name + "/")
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            yield name, value

