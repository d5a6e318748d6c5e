"""What runs and decisions cost: eval length models, the measured per-GPU costs, and the simulated decision world."""
