"""Speed, cost and statistics benchmarks of opsd_sweep: each runs as `python -m benchmarks.<name>` from the
repo root; their records and dated write-ups are in benchmarks/measured/ (README.md there is the index)."""
