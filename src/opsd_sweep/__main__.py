"""`python -m opsd_sweep [-m] overrides...`: the Hydra app. One job = one train-then-eval cycle."""

from __future__ import annotations

import dataclasses
import difflib
import shutil
import sys
import typing
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from opsd_sweep import CONF_DIR
from opsd_sweep.config import ConfigError, RunConfig
from opsd_sweep.cycle import load_cycle_config, run_cycle
from opsd_sweep.interrupt import exit_code
from opsd_sweep.config import renamed_key_problem
from opsd_sweep.tiny import ensure_tiny_assets


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
def main(cfg: DictConfig) -> dict:
    try:
        run = load_cycle_config(cfg)  # a bad config raises here, before any compute
    except ConfigError as err:
        refuse_config(err, cfg)
    if run.tiny is not None:
        ensure_tiny_assets(run.tiny)
    return run_cycle(run)


def refuse_config(err: ConfigError, cfg: DictConfig) -> typing.NoReturn:
    """A single run's bad config (also python -m opsd_sweep.evaluate's): exit with one paragraph, not Hydra's
    traceback, leaving nothing on disk. In a multirun, re-raise: the launcher reports it with the job."""
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


def unknown_key_problems(args: list[str]) -> list[str]:
    """Overrides whose key the run config does not have, each with the closest valid key. Hydra would
    reject them too, but only after composing and without a suggestion."""
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
            continue  # Hydra's own settings and config-group choices: Hydra checks those itself
        parts = key.split(".")
        if any(".".join(parts[:i]) in keys and (i == len(parts) or keys[".".join(parts[:i])])
               for i in range(1, len(parts) + 1)):
            continue
        close = difflib.get_close_matches(key, list(keys) + sorted(groups), n=1, cutoff=0.6)
        hint = f"did you mean '{close[0]}'?" if close else "no similar key exists"
        problems.append(f"unknown config key '{key}' in override '{arg}': {hint}")
    return problems


if __name__ == "__main__":
    problems = unknown_key_problems(sys.argv[1:])
    if problems:
        sys.exit("\n".join(problems) + "\nValid keys are the fields of RunConfig (src/opsd_sweep/config.py); "
                 "`python -m opsd_sweep --cfg job` prints the composed config.")
    try:
        main()
    except KeyboardInterrupt as err:  # a single run (no -m) stopped by Ctrl-C or SIGTERM; marked interrupted
        print(f"[opsd_sweep] {err or 'interrupted by SIGINT'}: run the same command again to resume", file=sys.stderr)
        sys.exit(exit_code(err))
