"""Hand-built inputs that the tests and the benchmarks share, never used by the tool itself: run dirs written per
the run contract (rundirs), the OPSD loss as its textbook formula (loss_reference), and a run config composed
from the real conf/ without running it (run_config)."""
