"""opsd_sweep: sweeps of noisy OPSD train-then-evaluate runs, with honest statistics."""

from pathlib import Path

#: The Hydra config directory (the only place defaults live).
CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
