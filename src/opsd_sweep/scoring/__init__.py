"""Scoring: what one sample scores (grade: the last boxed answer against the gold) and what a run's samples
score (metrics: avg@n, pass@k, maj@n, rates). Pure functions of the records, read by the evaluator, the run
record, the simulator and the summary alike; it imports nothing else of the project."""
