"""Hydra launchers for opsd_sweep: `local_gpus` (packs jobs onto the GPUs of one machine) and
`opsd_slurm` (hydra-submitit-launcher's SLURM launcher plus grid checks, re-attach and failure records)."""
