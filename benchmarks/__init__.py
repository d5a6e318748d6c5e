"""Speed, cost and statistics benchmarks of opsd_sweep; run each as `python -m benchmarks.<name>` from the repo root."""
