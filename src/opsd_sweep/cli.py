"""What every entry point says and does at its edges: a typo'd override refused with the key it meant, a bad config
refused in one paragraph leaving nothing on disk, and the exit code of a single job (no -m)."""

from __future__ import annotations

import dataclasses
import difflib
import shutil
import typing
from collections.abc import Mapping
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from opsd_sweep import CONF_DIR
from opsd_sweep.config import ConfigError, RunConfig, renamed_key_problem


def check_overrides(args: list[str], app: str, prefix: str = "") -> None:
    """Exit naming each override whose key the run config does not have, with the closest valid key, before Hydra
    composes anything (Hydra would say `+key=...`, and following that advice fails on the schema). `app` is the
    Hydra app (`opsd_sweep.evaluate`) whose `--cfg job` prints the composed config; `prefix` starts the message."""
    problems = unknown_key_problems(args)
    if problems:
        raise SystemExit(prefix + "\n".join(problems) + "\nValid keys are the fields of RunConfig "
                         f"(src/opsd_sweep/config.py); `python -m {app} --cfg job` prints the composed config.")


def unknown_key_problems(args: list[str]) -> list[str]:
    """Overrides whose key the run config does not have, each with the closest valid key; overrides under a
    section's old name, with the new one. Hydra's own settings and config-group choices are left to Hydra."""
    keys = schema_keys()
    groups = {p.name for p in CONF_DIR.iterdir() if p.is_dir()}
    problems = []
    for arg in args:
        if arg.startswith("-") or "=" not in arg:
            continue
        key = arg.split("=", 1)[0].lstrip("+~")
        if (renamed := renamed_key_problem(arg)) is not None:
            problems.append(f"override {renamed}")
            continue
        if key.split(".")[0] == "hydra" or "/" in key or "@" in key or key in groups:
            continue
        parts = key.split(".")
        if any(".".join(parts[:i]) in keys and (i == len(parts) or keys[".".join(parts[:i])])
               for i in range(1, len(parts) + 1)):
            continue
        close = difflib.get_close_matches(key, list(keys) + sorted(groups), n=1, cutoff=0.6)
        hint = f"did you mean '{close[0]}'?" if close else "no similar key exists"
        problems.append(f"unknown config key '{key}' in override '{arg}': {hint}")
    return problems


def schema_keys(schema: type = RunConfig, prefix: str = "") -> dict[str, bool]:
    """Every dotted key of the run config -> whether it holds free-form entries (a list or a dict)."""
    keys = {}
    hints = typing.get_type_hints(schema)
    for field in dataclasses.fields(schema):
        key, kind = prefix + field.name, hints[field.name]
        inner = [a for a in typing.get_args(kind) if a is not type(None)]  # Optional[X] -> X
        kind = inner[0] if len(inner) == 1 else kind
        keys[key] = typing.get_origin(kind) in (list, dict)
        if dataclasses.is_dataclass(kind):
            keys |= schema_keys(kind, key + ".")
    return keys


def refuse_config(err: ConfigError, cfg: DictConfig) -> typing.NoReturn:
    """A single job's bad config: exit with one paragraph, not Hydra's traceback, leaving nothing on disk. In a
    multirun, re-raise: the launcher reports it with the job."""
    if HydraConfig.get().mode != RunMode.RUN:
        raise err
    remove_empty_dirs(Path(HydraConfig.get().runtime.output_dir), stop=Path(cfg.results_root).absolute().parent)
    raise SystemExit(f"{err}\nNothing was run or written.") from None


def remove_empty_dirs(path: Path, stop: Path) -> None:
    """Remove the output dir Hydra made for a refused run (its .hydra/ and the job's log, nothing else) and
    each parent left empty, up to `stop`: a refused run leaves nothing behind."""
    if all(item.name == ".hydra" or item.suffix == ".log" for item in path.iterdir()):
        shutil.rmtree(path)
    for folder in path.parents:
        if folder == stop or stop not in folder.parents or any(folder.iterdir()):
            return
        folder.rmdir()


def finished(answer: Mapping) -> bool:
    """Whether a job's answer (run_cycle's, or the standalone evaluation's of the same shape) is a finished run:
    done, collapsed and stopped, or skipped as done. A run that failed, that failed before and was skipped
    (reason 'failed'), or that another live process holds (reason 'claimed') is not: the launchers count those
    unfinished too (hydra_plugins/opsd_local_gpus/_report.py, UNFINISHED)."""
    return answer.get("state") in ("done", "collapsed") or answer.get("reason") == "done"


def exit_unless_finished(answer: dict) -> dict:
    """The answer of a job; a single job (no -m) whose run did not finish exits 1 instead, after the line that
    said why (the FAILED or skip line), as `-m` exits non-zero for the same run."""
    if HydraConfig.get().mode == RunMode.RUN and not finished(answer):
        raise SystemExit(1)
    return answer
