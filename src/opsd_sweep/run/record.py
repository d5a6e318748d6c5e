"""The read side of the run contract: what one run dir means, read once, for every reader.

`RunRecord.read(run_dir)` reads config.yaml, status.json, identity.json, train/metrics.jsonl and
eval/eval.json once each and answers what the summary (summarize.collect), the status table and the race
ask of a run:
  state           as status.json says (pending ... done, collapsed, failed; 'unknown' before it started)
  inputs          the identities its results depend on: recorded, or today's when provably unchanged
  eval_problem    why its eval.json does not hold today's scores (an evaluator since found wrong, a
                  checkpoint rewritten since, a round of a checkpoint race); None: it does
  grader_problem  why its samples were not graded by today's grader (run.identity.grader_problem)
  collapse        where it collapsed by the rule its config names, or why the rule could not judge it
  gpu_hours       per phase, one attempt's (a phase run again or resumed is not counted twice)
  counts / left_out  whether its score enters any statistic, and why not
A dir whose files do not parse raises UnreadableRun naming the file. The config is read as a plain dict
(RunDir.read_config_dict: the C YAML loader); the typed config, which costs a schema validation, is
built only where a decision needs it (a dir written before identities were recorded, or a key check).
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import yaml

from opsd_sweep.config import RunConfig, from_dict
from opsd_sweep.scoring.metrics import with_current_vote
from opsd_sweep.run import takeover
from opsd_sweep.run.collapse import find_collapse, rule_of
from opsd_sweep.run.identity import evaluation_problem, grader_problem
from opsd_sweep.run.keys import keying
from opsd_sweep.run.rundir import RunDir, gpu_hours


class UnreadableRun(ValueError):
    """A run dir whose files cannot be parsed; the message says which file and why."""


@dataclass(frozen=True)
class CollapseFinding:
    """Whether a run collapsed by its config's rule (opsd_sweep.run.collapse). `judged` is False for a run that
    never reached the step where the rule can fire (fewer than early_steps + patience steps logged) and did
    not collapse: it is neither collapsed nor not; `why_not` says so."""

    step: int | None = None
    reason: str | None = None
    judged: bool = False
    why_not: str | None = None
    stopped: bool = False  # the trainer stopped the run there (train.stop_on_collapse): no score


# What a run's state says about its score, when the state alone keeps it out of the statistics.
_NOT_SCORED = {"collapsed": "stopped at its collapse (train.stop_on_collapse): no score"}


_TYPED: dict[tuple, RunConfig | None] = {}  # config.yaml (path, mtime, size) -> its typed config


@dataclass
class RunRecord:
    run_dir: RunDir
    config: dict
    status: dict
    steps: list[dict]
    evaluation: dict | None
    recorded_inputs: dict | None  # identity.json's inputs (None: not recorded)
    _typed: RunConfig | None = field(default=None, repr=False)

    # --- reading ---------------------------------------------------------------------------------

    @classmethod
    def read(cls, run_dir: RunDir | Path | str) -> "RunRecord":
        """Read a run dir's files once. Raises UnreadableRun naming the file that does not parse."""
        run_dir = run_dir if isinstance(run_dir, RunDir) else RunDir(Path(run_dir))
        if not run_dir.path.is_dir() or not any(run_dir.path.iterdir()):
            raise UnreadableRun("empty run dir")
        if not run_dir.config.exists():
            raise UnreadableRun("no config.yaml (never started, or written by something else)")
        config = _parsed(run_dir.config, lambda _: run_dir.read_config_dict())
        status = run_dir.read_status()  # an unreadable status.json is recovered (and said) by RunDir
        evaluation = None
        if run_dir.eval_json.exists():
            evaluation = _parsed(run_dir.eval_json, json.loads)
            if not isinstance(evaluation, dict):
                raise UnreadableRun("eval.json is not an object")
            if not isinstance(evaluation.get("metrics"), dict):
                raise UnreadableRun("eval.json has no metrics")
            evaluation = with_current_vote(evaluation)  # the summary and the race read today's maj@n
        identity = run_dir.read_identity()
        return cls(run_dir, config, status, run_dir.training_steps(), evaluation,
                   identity["inputs"] if identity is not None else None)

    @property
    def path(self) -> Path:
        return self.run_dir.path

    @property
    def state(self) -> str:
        return str(self.status.get("state", "unknown"))

    @property
    def kind(self) -> str | None:
        """status.json's kind: None for a cycle, run.keys.EVAL_ONLY for a standalone evaluation."""
        return self.status.get("kind")

    @property
    def run_id(self) -> str:
        return str(self.status.get("key") or self.path.name)

    @property
    def simulated(self) -> bool:
        return bool(self.status.get("simulated")) or self.config.get("executor") == "simulate" or \
            bool((self.evaluation or {}).get("simulated"))

    def typed_config(self) -> RunConfig | None:
        """The config in today's schema (a schema validation, ~30 ms: only where a decision needs it, and
        once per version of the file in a process, so `status --watch` pays it once); None when the saved
        config does not fit the schema."""
        if self._typed is None:
            stat = self.run_dir.config.stat()
            version = (str(self.run_dir.config), stat.st_mtime_ns, stat.st_size)
            if version not in _TYPED:
                try:
                    _TYPED[version] = from_dict(self.config)
                except Exception:  # a damaged or foreign config.yaml: no decision can rest on it
                    _TYPED[version] = None
            self._typed = _TYPED[version]
        return self._typed

    # --- what it means ---------------------------------------------------------------------------

    @cached_property
    def inputs(self) -> dict[str, str] | None:
        """The identities its results depend on: identity.json's, or for a dir written before records
        today's when provably unchanged (run.takeover.known_inputs); None when unknown."""
        if self.recorded_inputs is not None:
            return self.recorded_inputs
        typed = self.typed_config()
        return None if typed is None else takeover.inputs_when_unchanged(self.run_dir, typed, *keying(self.kind))

    @cached_property
    def eval_problem(self) -> str | None:
        """Why its eval.json does not hold today's scores of the checkpoint it should score; None: it does
        (or there is no eval.json)."""
        if self.evaluation is None:
            return None
        settings = self.config.get("eval") or {}
        # as the cycle judges it (cycle.settled_status): a rerun evaluates again whatever this calls wrong
        return evaluation_problem(self.evaluation, self.scored_checkpoint(), bool(settings.get("merge_lora")),
                                  planned_samples(self.run_dir, settings.get("n_samples")))

    @cached_property
    def grader_problem(self) -> str | None:
        """Why its eval.json was graded by another grader than today's (naming both and the fix); None: it was
        graded by today's (or there is no eval.json). Unlike eval_problem, a rerun of the sweep does not fix it:
        the fix grades the stored completions again (evaluate/regrade.py)."""
        return None if self.evaluation is None else grader_problem(self.evaluation)

    def scored_checkpoint(self) -> Path | None:
        """The checkpoint its eval.json should score: its final one, or a standalone evaluation's."""
        standalone = (self.config.get("eval") or {}).get("checkpoint")
        return Path(standalone) if standalone else self.run_dir.latest_checkpoint()

    @cached_property
    def collapse(self) -> CollapseFinding:
        stopped = self.status.get("collapse") if self.state == "collapsed" else None
        if isinstance(stopped, dict) and stopped.get("step") is not None:
            return CollapseFinding(int(stopped["step"]), stopped.get("reason"), judged=True, stopped=True)
        if not self.steps:
            return CollapseFinding(why_not="no training steps")
        try:
            rule = _rule(json.dumps(self.config["train"]["collapse"], sort_keys=True))
        except Exception as err:  # a hand-edited config.yaml: judge nothing, say why
            return CollapseFinding(why_not=f"no usable train.collapse in config.yaml ({err!r})"[:200])
        found = find_collapse(self.steps, rule)
        if found is not None:
            return CollapseFinding(found.step, found.reason, judged=True)
        needed = rule.early_steps + rule.patience
        if len(self.steps) < needed:
            ended = self.state if self.state in ("failed", "interrupted", "training", "done") else "stopped"
            return CollapseFinding(why_not=f"{ended} before step {needed}, where the rule can first fire")
        return CollapseFinding(judged=True)

    @cached_property
    def gpu_hours(self) -> dict[str, float]:
        """`gpu_hours.<phase>` and `gpu_hours.total`, one attempt's (see attempt_gpu_hours)."""
        return attempt_gpu_hours(self.status)

    @property
    def attempts(self) -> list[dict]:
        """status.json's attempts, each {attempt, gpus, phase_seconds, resumed}; [] before they were listed."""
        listed = self.status.get("attempt_log")
        return listed if isinstance(listed, list) else []

    @cached_property
    def left_out(self) -> str | None:
        """Why its score enters no statistic, plot or table of the summary or the race; None: it counts."""
        if self.state in _NOT_SCORED:
            return _NOT_SCORED[self.state]
        if self.state != "done":
            return f"state is {self.state!r}: not finished"
        if self.evaluation is None:
            return "state is 'done' but eval/eval.json is missing"
        if self.eval_problem:
            return f"not today's scores ({self.eval_problem}): the next rerun of its sweep evaluates it again"
        if self.grader_problem:
            return f"not today's grades: {self.grader_problem}"
        return None

    @property
    def counts(self) -> bool:
        """counts_for_statistics: done, evaluated, and its eval.json holds today's scores, graded by today's grader."""
        return self.left_out is None

    def score(self, metric: str) -> float | None:
        """Its value of an eval.json metric when it counts, else None."""
        if not self.counts:
            return None
        value = self.evaluation["metrics"].get(metric)
        return float(value) if isinstance(value, (int, float)) and not math.isnan(value) else None


SAMPLING_PLAN = "sampling_plan.json"  # in the run dir: the K (and per-problem counts) its eval was planned with


def planned_samples(run_dir: RunDir, declared) -> int | None:
    """The K an eval of this run must hold: eval.n_samples when it is a number; with eval.n_samples=auto the K
    its sampling plan resolved (evaluate/sampling_plan.py), None before it was planned."""
    if isinstance(declared, int) and not isinstance(declared, bool):
        return declared
    try:
        k = json.loads((run_dir.path / SAMPLING_PLAN).read_text()).get("k")
    except (OSError, ValueError, AttributeError):
        return None
    return k if isinstance(k, int) else None


def attempt_gpu_hours(status: dict) -> dict[str, float]:
    """A status.json's GPU-hours per phase of one pass: for each phase, the attempts from the last one that
    started it from scratch (not resumed from a checkpoint) to the last that ran it. A phase run again
    (an evaluation since found wrong, a forced rerun) counts once; a training resumed after a kill counts
    its parts. A status written before attempts were listed gives its totals (every attempt added up)."""
    attempts = status.get("attempt_log")
    if not isinstance(attempts, list) or not attempts:
        return gpu_hours(status)
    per_phase: dict[str, float] = {}
    for phase in dict.fromkeys(p for a in attempts for p in (a.get("phase_seconds") or {})):
        ran = [a for a in attempts if phase in (a.get("phase_seconds") or {})]
        starts = [i for i, a in enumerate(ran) if phase not in (a.get("resumed") or ())]
        chosen = ran[starts[-1]:] if starts else ran
        per_phase[phase] = sum(a["phase_seconds"][phase] * len(a.get("gpus") or []) / 3600 for a in chosen)
    return {f"gpu_hours.{p}": h for p, h in per_phase.items()} | {"gpu_hours.total": sum(per_phase.values())}


@functools.lru_cache(maxsize=64)
def _rule(collapse_json: str):
    """The collapse rule of a config section (a schema merge, done once per distinct rule, not per run)."""
    return rule_of({"train": {"collapse": json.loads(collapse_json)}})


def _parsed(path: Path, parse):
    try:
        return parse(path.read_text())
    except (OSError, ValueError, yaml.YAMLError) as err:
        raise UnreadableRun(f"{path.name} unreadable ({type(err).__name__}: "
                            f"{(str(err).splitlines() or [''])[0][:120]})") from err
