"""Racing: spend training seeds where decisions are still open (iterated racing over a grid of configs).

Pure policy (`policy.decide`: results table in, decisions and next runs out), its driver loop
(`driver.run_race`), the decision log (`log.RaceLog`, race.jsonl) and the reader of run dirs
(`results.read_run_result`). The Hydra sweeper `hydra/sweeper=race` and the benchmark both use them.
"""

from opsd_sweep.race.driver import run_race
from opsd_sweep.race.policy import RaceState, RunRequest, RunResult, Step, decide
from opsd_sweep.race.settings import RaceSettings, RaceSpec

__all__ = ["RaceSettings", "RaceSpec", "RaceState", "RunRequest", "RunResult", "Step", "decide",
           "run_race"]
