"""opsd_sweep: sweeps of noisy OPSD train-then-evaluate runs, with honest statistics."""

from pathlib import Path

from omegaconf import OmegaConf

#: The Hydra config directory (the only place defaults live).
CONF_DIR = Path(__file__).resolve().parents[2] / "conf"


def job_gpus(executor: str, num_gpus: int) -> int:
    """GPUs a launcher gives one cycle: simulated cycles need none, real ones train.num_gpus."""
    return 0 if executor == "simulate" else num_gpus


# Registered on import of the package, before Hydra resolves the launcher config of any entry point
# (conf/hydra/launcher/*.yaml: gpus_per_job: ${opsd.job_gpus:${executor},${train.num_gpus}}).
OmegaConf.register_new_resolver("opsd.job_gpus", job_gpus, replace=True)
