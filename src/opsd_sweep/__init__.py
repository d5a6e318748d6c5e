"""opsd_sweep: sweeps of noisy OPSD train-then-evaluate runs, with honest statistics."""

from pathlib import Path

from omegaconf import OmegaConf


def shipped_dir(package: str, checkout: str) -> Path:
    """A folder of data files: inside the installed package (a wheel: pyproject's package-dir puts it
    there), else where it lives in a checkout (editable install, or src/ on the path). A path, not
    importlib.resources: setuptools' editable finder does not import a folder without __init__.py."""
    here = Path(__file__).resolve().parent
    installed = here / package
    return installed if installed.is_dir() else here.parents[1] / checkout


#: The Hydra config directory (the only place defaults live): conf/ of a checkout, opsd_sweep/conf of a wheel.
CONF_DIR = shipped_dir("conf", "conf")
#: accelerate's config file of each train.strategy (cycle.phase_command passes it to `accelerate launch`).
ACCELERATE_DIR = shipped_dir("accelerate_configs", "launchers/accelerate")


def settings_from_conf(schema: type, name: str, overrides: dict):
    """conf/NAME typed by the dataclass `schema`, with the given overrides (None: not given) on top: a command's
    own settings (the summary's, the planner's), read as Hydra reads a run's."""
    base = OmegaConf.merge(OmegaConf.structured(schema), OmegaConf.load(CONF_DIR / name))
    return OmegaConf.to_object(OmegaConf.merge(base, {k: v for k, v in overrides.items() if v is not None}))


def job_gpus(executor: str, num_gpus: int) -> int:
    """GPUs a launcher gives one cycle: simulated cycles need none, real ones train.num_gpus."""
    return 0 if executor == "simulate" else num_gpus


# Registered on import of the package, before Hydra resolves the launcher config of any entry point
# (conf/hydra/launcher/*.yaml: gpus_per_job: ${opsd.job_gpus:${executor},${train.num_gpus}}).
OmegaConf.register_new_resolver("opsd.job_gpus", job_gpus, replace=True)
