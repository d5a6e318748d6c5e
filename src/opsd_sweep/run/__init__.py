"""The run contract: what identifies a run (keys.py) and where its dir is."""
