"""The grid a sweep would run, from the same overrides `python -m opsd_sweep -m` takes, composed with real Hydra.

Sweep overrides (a,b,c) on the command line and the sweep's own axes (hydra.sweeper.params of e.g. +sweep=lr_grid)
are crossed into configs, as Hydra's basic sweeper does (a key on the command line replaces the same axis of the
config); seed=... is the seeds each config would get, not an axis.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Optional

from omegaconf import OmegaConf

from opsd_sweep import CONF_DIR
from opsd_sweep.config import ConfigError, RunConfig, load_run_config, to_dict
from opsd_sweep.selector import SelectorError, select_config
from opsd_sweep.summarize.collect import flatten


class GridError(ValueError):
    """Overrides that do not make a grid the planner can price."""


@dataclass(frozen=True)
class Grid:
    configs: dict[str, tuple[str, ...]]  # label -> its sweep overrides
    fixed: tuple[str, ...]  # overrides every config gets
    seeds: Optional[tuple[int, ...]]  # seed=... of the overrides; None when not given
    baseline: Optional[str]  # the grid's config the others are compared with; None: an arm outside the grid
    run: RunConfig  # the first config (the baseline's when it is in the grid), composed and validated

    @property
    def comparisons(self) -> int:
        """Configs compared with the baseline: the family the error rate is held over."""
        return len(self.configs) - (self.baseline is not None)

    @property
    def arms(self) -> int:
        """Arms that run seeds: the configs, and the baseline when it is outside the grid."""
        return len(self.configs) + (self.baseline is None)


def compose(overrides: list[str], hydra: bool = False):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            return hydra_compose("config", overrides=overrides, return_hydra_config=hydra)
    except HydraException as err:
        raise GridError(f"{' '.join(overrides)!r} does not compose: {err}; `python -m opsd_sweep --cfg job "
                        "OVERRIDES` shows what a sweep would compose") from None
    finally:
        GlobalHydra.instance().clear()


def sweep_axes(overrides: list[str]) -> tuple[list[str], dict[str, list[str]]]:
    """(overrides every job gets, {key: values} of each discrete sweep override), in the order given."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception as err:  # noqa: BLE001 - Hydra's parser errors name the override
        raise GridError(f"{' '.join(overrides)!r}: {err}") from None
    fixed, axes = [], {}
    for override in parsed:
        key = override.get_key_element()
        if not override.is_sweep_override():
            fixed.append(override.input_line)
        elif override.is_discrete_sweep():
            axes[key] = list(override.sweep_string_iterator())
        else:
            raise GridError(f"{override.input_line!r} is a {override.value_type.name} sweep; list the values "
                            "instead (a,b,c or range(...))")
    return fixed, axes


def expand(overrides: list[str], baseline: Optional[str] = None) -> Grid:
    """The grid of `overrides` (module docstring), each config composed and validated as a sweep's job would be."""
    fixed, axes = sweep_axes(overrides)
    params = compose(fixed, hydra=True).hydra.sweeper.params
    if params:  # the sweep's own axes; the command line's replace the same key
        _, own = sweep_axes([f"{key}={value}" for key, value in OmegaConf.to_container(params).items()])
        axes = {**{k: v for k, v in own.items() if k not in axes}, **axes}
    seeds = axes.pop("seed", None)
    try:
        seeds = None if seeds is None else tuple(int(s) for s in seeds)
    except ValueError:
        raise GridError(f"seed={','.join(seeds)}: seeds are whole numbers, e.g. seed=1,2,3") from None
    configs = {(" ".join(combo) or "default"): combo
               for combo in itertools.product(*([f"{k}={v}" for v in values] for k, values in axes.items()))}
    runs = {}
    for label, combo in configs.items():
        try:
            runs[label] = load_run_config(compose([*fixed, *combo]))
        except ConfigError as err:
            raise GridError(f"config {label!r} of the grid: {err}") from None
    chosen = None
    if baseline is not None:  # matched on the composed configs' values, as summary --baseline matches runs
        as_values = {label: {**flatten(to_dict(runs[label])), **dict(o.split("=", 1) for o in combo)}
                     for label, combo in configs.items()}
        try:
            chosen = select_config(baseline, as_values, "--baseline")
        except SelectorError as err:
            raise GridError(f"{err}; or leave --baseline out for a baseline outside the grid") from None
    return Grid(configs, tuple(fixed), seeds, chosen, runs[chosen or next(iter(configs))])
