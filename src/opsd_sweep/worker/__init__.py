"""The warm phase worker: one long-lived process per GPU set (or CPU slot) of a local sweep that runs
the phases of the cycles given to it one after another, in-process, keeping what is costly to rebuild
(warm.py) and giving each cycle fresh state.

  server.py  the worker process: accept one phase at a time, run it with its output in the phase log
  client.py  the cycle's side: send a phase to the worker and wait for its exit status
  warm.py    what the worker keeps between cycles, and how each cycle gets its fresh state
"""
