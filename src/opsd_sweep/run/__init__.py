"""The run contract: what a run is, where its dir is, and who may write it.

    keys.py      the run key of a cycle and of a standalone evaluation, and the identities of the
                 inputs its results depend on (recorded in identity.json)
    added.py     the one table of config fields added since earlier releases (old value, key rule)
    rundir.py    RunDir, the owner of every file name in a run dir; atomic reads and writes
    claims.py    which process runs a run now, and whether its owner is alive
    takeover.py  locating a run's dir (read-only) and taking over a dir of an earlier key (in the
                 cycle, under its claim), only when provably the same experiment

A newcomer changing what identifies a run edits keys.py (semantic_dict and the NON_SEMANTIC tables).
"""
