"""`python -m opsd_sweep.plan`: before a sweep, what its grid costs to find a gain, and what a budget resolves."""
