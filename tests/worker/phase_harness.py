"""`python -m tests.worker.phase_harness FD`: the real phase worker (server.serve) with two phases that do
what the real ones do to it on a GPU box, on the CPU: `train` keeps an object in the worker, as the
trainer keeps its student and rollout engine; `evaluate` asks for a process of its own, as the evaluation's
own vLLM engine does (warm.RunsBeside), or for a fresh worker (warm.NeedsFreshProcess), as the run dir's
`needs` file says."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

from opsd_sweep.worker import server, warm


def train(run_dir: str) -> None:
    built = []
    warm.reuse("student", "model-a", lambda: built.append(True) or object())
    with open(Path(run_dir) / "trained", "a") as handle:
        handle.write("built\n" if built else "kept\n")


def evaluate(run_dir: str) -> None:
    needs = (Path(run_dir) / "needs").read_text()
    raise {"beside": warm.RunsBeside, "fresh": warm.NeedsFreshProcess}[needs]("an engine of its own")


if __name__ == "__main__":
    server.PHASES = {"train": (__name__, "train"), "evaluate": (__name__, "evaluate")}
    sys.exit(server.serve(socket.socket(fileno=int(sys.argv[1]))))
