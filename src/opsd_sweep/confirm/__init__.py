"""The locked confirmation stage: `python -m opsd_sweep.confirm RESULTS_DIR` reruns a sweep's chosen config and
its in-sweep baseline on fresh seeds, on a benchmark the sweep never evaluated and on its tuning benchmark, and
says whether the sweep's winner holds (plan: what to run; verdict: the statistics; report: what is written)."""
