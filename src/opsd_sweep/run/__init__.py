"""The run contract: what a run is, where its dir is, who may write it, and what it means when read.

Write side:
    keys.py      the run key of a cycle and of a standalone evaluation (semantic_dict, the NON_SEMANTIC
                 tables), and the identities of the inputs its results depend on (recorded in identity.json)
    identity.py  what a path, a checkpoint and an evaluator are by content (the identities keys.py uses)
    added.py     the one table of config fields added since earlier releases (old value, key rule)
    rundir.py    RunDir, the owner of every file name in a run dir; atomic reads and writes
    claims.py    which process runs a run now, and whether its owner is alive
    takeover.py  locating a run's dir (read-only) and taking over a dir of an earlier key (in the
                 cycle, under its claim), only when provably the same experiment
Read side:
    record.py    RunRecord: what one run dir means (state, today's scores or why not, collapse, one pass's
                 GPU-hours, counts_for_statistics with its reason); the summary, status and the race read
                 runs only through it
    collapse.py  the collapse rule (a pure function of metrics.jsonl) that the trainer stops on and the
                 record judges by, and the marker the trainer leaves when it stopped a run there

A newcomer changing what identifies a run edits keys.py; what counts as a result, record.py.
"""
