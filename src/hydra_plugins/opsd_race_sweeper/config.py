"""Schema of `hydra/sweeper=race`; the values (with their meaning) live in conf/hydra/sweeper/race.yaml.

No `from __future__ import annotations` here: Hydra executes plugin modules outside sys.modules, where
dataclasses cannot resolve string annotations.
"""


from dataclasses import dataclass
from typing import Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING


@dataclass
class RaceSweeperConf:
    _target_: str = "hydra_plugins.opsd_race_sweeper.race_sweeper.RaceSweeper"
    min_seeds: int = MISSING  # seeds every config gets before the first test
    max_seeds: int = MISSING  # seeds per config at most (racing phase)
    seeds_per_round: int = MISSING  # seeds added to every live config per round
    alpha: float = MISSING  # level of the final "better than the baseline" claim (Holm)
    stop_alpha: float = MISSING  # Holm level of a round's best vs the baseline that ends the race
    eliminate_alpha: float = MISSING  # Holm level of "worse than the best" that drops a config
    futility_effect: Optional[float] = MISSING  # stop a config that cannot beat the baseline by this; null/0 = off
    anchor_alpha: float = MISSING  # level of the test against the published anchor (reported only)
    target_half_width: float = MISSING  # stop when every live config's CI half-width is <= this
    budget_gpu_hours: Optional[float] = MISSING  # stop before a round would pass it; null = no budget
    confirm_seeds: int = MISSING  # fresh seeds of the winner after the race
    first_seed: int = MISSING  # seeds are first_seed, first_seed + 1, ...
    max_failures: int = MISSING  # failed race runs after which a config leaves the race; as many failed confirmation
    # runs end its confirmation, the verdict stands (counted per phase; a collapse is no failure)
    collapsed_score: Optional[float] = MISSING  # the score of a run stopped at its collapse; null: its config leaves
    pairing: str = MISSING  # none | seed: compare configs by paired differences over the seeds both ran
    baseline: Optional[str] = MISSING  # the in-sweep baseline, a selector (opsd_sweep.selector): "lr=5e-6"
    metric: str = MISSING  # eval.json metric the race decides on
    claim_poll_seconds: float = MISSING  # how often to look at a run that another sweep is running


ConfigStore.instance().store(group="hydra/sweeper", name="race_schema", node=RaceSweeperConf,
                             provider="opsd_sweep")
