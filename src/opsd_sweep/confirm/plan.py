"""What a confirmation runs: the sweep's chosen config and baseline (as the summary ranks them), their saved
configs, fresh seeds, the locked benchmark and whether the sweep already saw it, and the sweeps that run them.

Each arm runs as a Hydra multirun of the same entry points a sweep uses (`python -m opsd_sweep -m`, or
`python -m opsd_sweep.evaluate -m` for an untrained base model), from an overlay config written beside its
runs: the arm's saved config.yaml with its eval turned into a suite of the tuning benchmark(s) and the locked
one (one training run per seed, scored on both), its results under `<group>-confirm/<arm>`. The run key makes
a rerun of the same confirmation skip what finished.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import yaml
from omegaconf import OmegaConf

from opsd_sweep import CONF_DIR
from opsd_sweep.config import TinyConfig
from opsd_sweep.run.rundir import find_run_dirs
from opsd_sweep.summarize.collect import Collection, is_base_model
from opsd_sweep.summarize.config_stats import Analysis, configs_of
from opsd_sweep.summarize.races import Race, labels_of_dirs
from opsd_sweep.selector import select_config
from opsd_sweep.tiny import ensure_tiny_assets

CONFIRM_SUFFIX = "-confirm"  # <sweep group>-confirm: where a confirmation's runs go, never read as the sweep's
DATASET_KEYS = ("name", "path", "split", "problem_field", "answer_field", "id_field")  # a benchmark's identity
OVERLAY_GROUP = "sweep"  # the config group the overlay joins (+sweep=<name> from --config-dir)


class ConfirmError(ValueError):
    """A confirmation that cannot be planned; the message names the value and the fix."""


# --- the sweep -----------------------------------------------------------------------------------

def sweep_roots(results_dir: Path) -> list[str]:
    """The roots the sweep is read from: RESULTS_DIR without its `*-confirm` folders (their runs are a
    confirmation's, not the sweep's: they must neither rank configs, take seeds nor unlock a benchmark)."""
    if not results_dir.is_dir():
        raise ConfirmError(f"RESULTS_DIR {results_dir} is not a folder; point at a sweep's results "
                           "(e.g. results/tiny-demo)")
    children = [p for p in sorted(results_dir.iterdir()) if p.is_dir() and not p.name.startswith(".")]
    if (results_dir / "config.yaml").exists() or not children:
        return [str(results_dir)]
    return [str(p) for p in children if not p.name.endswith(CONFIRM_SUFFIX)]


@dataclass
class Arm:
    """One side of the confirmation: a config of the sweep and how to run more seeds of it."""

    role: str  # "config" | "baseline"
    label: str  # its summary label
    config: dict  # its saved config.yaml (one run's; the seed is replaced)
    run_dirs: list[str]  # its sweep runs that count
    evaluate_only: bool  # an untrained base model (train.max_steps=0): python -m opsd_sweep.evaluate
    sweep_estimate: dict = field(default_factory=dict)  # the sweep's own numbers for it (summary.csv row)

    @property
    def group(self) -> str:
        return str(self.config["group"])


def race_winner(races: list[Race], analysis: Analysis) -> tuple[str | None, str]:
    """(the summary label of the winner the folder's races declared, or None; what the races say). None when there
    is no race, none has stopped, or no run of the declared winner counts: the best mean is then confirmed and the
    console says why. Refused (ConfirmError, before any run) when the races declare different winners (a silent
    pick would confirm one race's choice as the sweep's) or when the winner is the baseline (nothing beat it:
    nothing to confirm); --config is the way past both, and with it this is not read."""
    if not races:
        return None, ""
    declared = [race for race in races if race.winner is not None]
    if not declared:
        return None, f"the race in {races[0].path} declares no winner (not finished)"
    winners = {race.path: labels_of_dirs((str(Path(d).resolve()) for d in race.run_dirs.get(race.winner, [])),
                                         analysis.usable) for race in declared}
    labels = {label for found in winners.values() for label in found}
    if len(labels) > 1:
        named = "; ".join(f"{path} ({', '.join(map(repr, found)) or 'no run of ' + repr(race.winner) + ' counts'})"
                          for race in declared for path, found in [(race.path, winners[race.path])])
        raise ConfirmError(f"the races in this folder declare different winners: {named}; name the config to "
                           "confirm with --config (e.g. --config 'lr=2e-05')")
    where = declared[-1].path
    if not labels:
        return None, f"no run of the winner the race in {where} declared ({declared[-1].winner}) counts"
    label = labels.pop()
    if label == analysis.baseline:
        raise ConfirmError(f"the race in {where} declared its baseline {label!r} the winner: no config beat it: "
                           "nothing to confirm (the best mean of the others is a config the race judged no better); "
                           "to confirm one anyway, name it with --config (e.g. --config 'lr=2e-05')")
    return label, f"the winner the race in {where} declared"


def choose_arms(analysis: Analysis, selector: str | None, races: list[Race] = ()) -> tuple[str, str, str]:
    """(chosen label, baseline label, how the config was chosen): the one `selector` names (opsd_sweep.selector
    syntax), else the winner the folder's races declared (race_winner: a race's choice is the sweep's choice; it
    refuses races that disagree or a race its baseline won), else the best mean among the configs that are not
    the baseline, as the summary ranks them."""
    if analysis.baseline is None:
        raise ConfirmError(f"no in-sweep baseline ({analysis.baseline_how}); name one with --baseline "
                           "(e.g. --baseline max_steps=0 or --baseline 'lr=5e-06')")
    table = analysis.table
    contenders = table[table["label"] != analysis.baseline]
    if contenders.empty:
        raise ConfirmError(f"the sweep has no config besides its baseline {analysis.baseline!r}: nothing to confirm")
    if selector:  # a named config: the races' winners are not read (--config is the fix their refusals name)
        label = select_config(selector, configs_of(contenders), "--config")
        return label, analysis.baseline, f"named with --config {selector}"
    winner, race_says = race_winner(list(races), analysis)
    if winner is not None and winner in set(contenders["label"]):
        return winner, analysis.baseline, race_says
    label = contenders.iloc[0]["label"]  # table is sorted by mean, best first
    how = f"the best mean of the {len(contenders)} configs that are not the baseline"
    return label, analysis.baseline, how + (f"; {race_says}" if race_says else "")


def make_arm(role: str, label: str, analysis: Analysis) -> Arm:
    runs = analysis.usable[analysis.usable["label"] == label]
    run_dirs = [d for d in runs["run_dir"].dropna().astype(str)]
    if not run_dirs:
        raise ConfirmError(f"{role} {label!r} has no run dir with a saved config.yaml (external results?): "
                           "confirm reruns configs of this pipeline's sweeps only")
    config = yaml.safe_load((Path(run_dirs[0]) / "config.yaml").read_text())
    row = analysis.table[analysis.table["label"] == label].iloc[0]
    estimate = {k: _plain(row[k]) for k in ("n", "mean", "ci_low", "ci_high", "delta_baseline", "baseline_low",
                                             "baseline_high", "p_baseline_holm", "verdict") if k in row}
    untrained = is_base_model(label) or (config.get("train") or {}).get("max_steps") == 0
    return Arm(role, label, config, run_dirs, untrained, estimate)


def check_real_runs(arms: dict[str, Arm]) -> None:
    """Refuse arms of simulated runs (executor=simulate) before anything runs: a simulated run scores one synthetic
    problem set and no eval suite's members, so its confirmation runs would finish with no score on the tuning or
    the locked benchmark and the confirmation could never end."""
    simulated = [f"{arm.role} {arm.label!r}" for arm in arms.values() if arm.config.get("executor") == "simulate"]
    if simulated:
        raise ConfirmError(f"the {' and the '.join(simulated)} of this sweep are simulated runs (executor=simulate): "
                           "they score one synthetic problem set, with no tuning or locked benchmark to confirm on; "
                           "confirm a sweep of real runs (executor=real)")


def _plain(value):
    if hasattr(value, "item"):
        value = value.item()
    return None if isinstance(value, float) and value != value else value


def largest_seed(collection: Collection) -> int:
    """The largest seed any run dir of the sweep used (finished or not, any config)."""
    runs = collection.runs
    if "cfg.seed" not in runs or runs["cfg.seed"].dropna().empty:
        return 0
    return int(pd.to_numeric(runs["cfg.seed"], errors="coerce").max())


def check_seed_count(count: int) -> None:
    """Seeds per arm, declared (--seeds) or advised: 0 is no request for the advice (leave --seeds out for it)."""
    if count < 2:
        raise ConfirmError(f"--seeds {count}: a paired interval needs at least 2 seeds per arm; use e.g. --seeds 3, "
                           "or leave --seeds out for the summary's seeds advice (else 3)")


def fresh_seeds(largest: int, count: int) -> list[int]:
    """`count` seeds above every seed of the sweep: largest + 1, ..., largest + count."""
    check_seed_count(count)
    return list(range(largest + 1, largest + 1 + count))


# --- the benchmarks ------------------------------------------------------------------------------

def compose_eval(overrides: list[str]) -> dict:
    """The eval section (interpolations kept) that conf/ composes with these overrides, e.g. ['eval=aime25']."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose("config", overrides=overrides)
    except HydraException as err:
        raise ConfirmError(f"--locked {' '.join(overrides)!r}: {err}; name an eval group of conf/eval/ "
                           f"(e.g. eval=aime25)") from None
    finally:
        GlobalHydra.instance().clear()
    return OmegaConf.to_container(cfg.eval, resolve=False)


def locked_benchmark(overrides: list[str], arm_config: dict) -> dict:
    """The locked benchmark's dataset fields (DATASET_KEYS), resolved against an arm's config (e.g. the tiny
    world's ${tiny.dir}). Only the dataset changes: the eval protocol (samples, sampling, prompt) stays the sweep's."""
    if not any(o.startswith("eval=") for o in overrides):
        raise ConfirmError(f"--locked {' '.join(overrides)!r} names no eval group; e.g. --locked eval=aime25")
    composed = compose_eval(overrides)
    if composed.get("suite"):
        raise ConfirmError(f"--locked {' '.join(overrides)!r} is a suite of {list(composed['suite'])}; name one "
                           "benchmark (e.g. eval=aime25)")
    fields = {k: composed.get(k) for k in DATASET_KEYS}
    node = OmegaConf.create({**{k: v for k, v in arm_config.items() if k != "eval"}, "_locked": fields})
    try:
        return OmegaConf.to_container(node, resolve=True)["_locked"]
    except Exception as err:  # an interpolation the arm's config cannot fill (a tiny group without the tiny world)
        raise ConfirmError(f"--locked {' '.join(overrides)!r}: {err}") from None


def tuning_benchmarks(arm_config: dict) -> dict[str, dict]:
    """{name: dataset fields} of what the sweep tuned on: its eval suite's members, or its one dataset."""
    ev = arm_config["eval"]
    if ev.get("suite"):
        return {name: {k: member.get(k) for k in DATASET_KEYS} for name, member in ev["suite"].items()}
    return {ev["name"]: {k: ev.get(k) for k in DATASET_KEYS}}


def identity(fields: dict) -> str:
    """A benchmark's identity: its resolved path (an existing local file or folder, absolute) or its hub id."""
    path = str(fields.get("path"))
    local = Path(path).expanduser()
    return str(local.resolve()) if local.exists() else path


def same_benchmark(a: dict, b: dict) -> bool:
    """One benchmark: the same path, or the same name (except the generic `local`) with the same split."""
    if identity(a) == identity(b):
        return True
    return a.get("name") == b.get("name") and a.get("name") != "local" and a.get("split") == b.get("split")


def runs_that_saw(benchmark: dict, roots: list[str]) -> list[str]:
    """Every run dir of the sweep (any state) whose eval, or a member of its eval suite, is `benchmark`."""
    seen = []
    for run_dir in find_run_dirs(roots):
        try:
            config = yaml.safe_load(run_dir.config.read_text())
        except (OSError, yaml.YAMLError):
            continue
        ev = (config or {}).get("eval") or {}
        members = list((ev.get("suite") or {}).values()) or [ev]
        if any(same_benchmark(benchmark, {k: m.get(k) for k in DATASET_KEYS}) for m in members):
            seen.append(str(run_dir.path))
    return seen


def suite_of(tuning: dict[str, dict], locked: dict) -> tuple[dict[str, dict], str]:
    """The eval suite a confirmation run is scored on (the tuning benchmarks + the locked one) and the locked
    benchmark's name in it (a tuning member's name when the "locked" benchmark is one of them)."""
    for name, fields in tuning.items():
        if same_benchmark(fields, locked):
            return dict(tuning), name
    name = locked["name"] if locked["name"] not in tuning else f"{locked['name']}-locked"
    return {**tuning, name: {**locked, "name": name}}, name


def ensure_world(arm_config: dict) -> None:
    """A tiny-world arm: its world (and the locked set a world built before it lacks) exists before the sweep's
    pre-flight checks the suite's files."""
    if not arm_config.get("tiny"):
        return
    ensure_tiny_assets(OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(TinyConfig), arm_config["tiny"])))


# --- running the arms ----------------------------------------------------------------------------

def results_root_of(run_dir: str, group: str) -> Path:
    """The results_root a run dir was written under (<results_root>/<group>/<slug>-<key8>)."""
    root = Path(run_dir).resolve().parent
    for _ in Path(group).parts:
        root = root.parent
    return root


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "config"


def overlay(arm: Arm, suite: dict[str, dict]) -> tuple[dict, str]:
    """(the config overlay of an arm, its group): the arm's saved config with its eval scored on `suite` (and
    named after its members), its runs under <sweep group>-confirm/<label>-<hash8 of the overlay> (another suite
    or config: another folder)."""
    config = {k: v for k, v in arm.config.items() if k not in ("seed", "force", "rerun_failed", "hydra")}
    # named for what it scores (the run's console lines, eval.json's dataset, the summary's title), not the
    # sweep's one benchmark, as conf/eval/math_suite.yaml names its suite
    config["eval"] = {**config["eval"], "suite": suite, "name": " + ".join(suite)}
    digest = hashlib.sha256(json.dumps({k: v for k, v in config.items() if k not in ("results_root", "group")},
                                       sort_keys=True, default=str).encode()).hexdigest()[:8]
    group = f"{Path(arm.group).as_posix()}{CONFIRM_SUFFIX}/{slug(arm.label)}-{digest}"
    config["results_root"] = str(results_root_of(arm.run_dirs[0], arm.group))
    config["group"] = group
    return config, group


def write_overlay(config: dict, config_dir: Path, name: str) -> None:
    """conf-dir/<OVERLAY_GROUP>/<name>.yaml: a `_global_` overlay setting every key of the arm's config."""
    path = config_dir / OVERLAY_GROUP / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = ("# @package _global_\n# written by python -m opsd_sweep.confirm: the arm's saved config, scored on the "
            "confirmation's suite\n" + yaml.safe_dump(config, sort_keys=False))
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def arm_command(arm: Arm, config_dir: Path, name: str, seeds: list[int], passthrough: list[str]) -> list[str]:
    """The multirun that runs `seeds` of an arm: the sweep entry point (or the evaluator for an untrained
    base model) with the overlay, plus the overrides given after `--` (e.g. hydra/launcher=slurm_4gpu)."""
    module = "opsd_sweep.evaluate" if arm.evaluate_only else "opsd_sweep"
    return [sys.executable, "-m", module, "-m", "--config-dir", str(config_dir), f"+{OVERLAY_GROUP}={name}",
            f"seed={','.join(map(str, seeds))}", *passthrough]


def run_arm(command: list[str]) -> int:
    print("[confirm] " + " ".join(command), flush=True)
    return subprocess.run(command, check=False).returncode
