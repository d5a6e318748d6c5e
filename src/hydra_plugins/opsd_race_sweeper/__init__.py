"""`hydra/sweeper=race`: the racing sweeper of opsd_sweep (policy in opsd_sweep.race)."""
