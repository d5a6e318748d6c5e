"""Run an evaluation plan over data-parallel engines: in this process for one engine, else one
spawned process per engine (per GPU group), all pulling shards from one queue.

Each engine writes its finished shards itself, so a crash or kill loses only the shards in flight; a
rerun resumes from the files. One progress bar counts problems x samples across all engines.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import queue
import traceback
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from tqdm import tqdm

from opsd_sweep.evaluate.engine import Engine, EngineSpec, Shard
from opsd_sweep.evaluate.generate import open_engine
from opsd_sweep.evaluate.shards import ShardStore


class EngineFailed(RuntimeError):
    """One or more engines died; the shards they held are left for a rerun."""


def visible_gpus() -> list[str]:
    """GPU ids this process may use: CUDA_VISIBLE_DEVICES when set, else every device torch sees."""
    import torch

    if not torch.cuda.is_available():
        return []
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is None:
        return [str(i) for i in range(torch.cuda.device_count())]
    return [g.strip() for g in listed.split(",") if g.strip()]


def engine_groups(backend: str, tensor_parallel_size: int, engines: int | None,
                  gpus: list[str]) -> list[list[str] | None]:
    """The GPU set of every data-parallel engine (None = a CPU engine).

    vllm: groups of tensor_parallel_size GPUs; hf: one GPU each. `engines` caps the count
    (null = as many as fit).
    """
    if not gpus:
        if backend == "vllm":
            raise RuntimeError("eval.backend=vllm needs GPUs but none are visible (CUDA_VISIBLE_DEVICES); "
                               "use eval.backend=hf on CPU")
        return [None] * (engines or 1)
    size = tensor_parallel_size if backend == "vllm" else 1
    groups: list[list[str] | None] = [gpus[i:i + size] for i in range(0, len(gpus) - size + 1, size)]
    if not groups:
        raise RuntimeError(f"eval.tensor_parallel_size={size} needs {size} GPUs; only {gpus} are visible")
    if engines is not None and engines > len(groups):
        raise RuntimeError(f"eval.engines={engines} needs {engines * size} GPUs; only {gpus} are visible")
    return groups[:engines] if engines else groups


def run_plan(spec: EngineSpec, prompts: list[list[int]], shards: list[Shard], store: ShardStore,
             groups: list[list[str] | None], desc: str,
             attach: Callable[[EngineSpec], Engine] | None = None) -> int:
    """Generate every shard the store lacks; return how many shards were already done (resumed).

    `attach` serves the plan with an engine that is already running, in this process (one group)."""
    pending = [s for s in shards if not store.done(s.index)]
    total = sum(len(s.jobs) for s in shards)
    pending_jobs = sum(len(s.jobs) for s in pending)
    resumed = len(shards) - len(pending)
    if resumed:
        print(f"[evaluate] resuming: {resumed}/{len(shards)} shards ({total - pending_jobs}/{total} samples) "
              f"already done in {store.root}", flush=True)
    if not pending:
        return resumed
    # each engine takes at most its fair share at once, so the first engine up cannot take everything
    cap = spec.max_num_seqs if spec.backend == "vllm" else spec.batch_size
    spec = replace(spec, max_in_flight=max(1, min(cap, math.ceil(pending_jobs / len(groups)))))
    with tqdm(total=total, initial=total - pending_jobs, desc=f"{desc} ({len(groups)} engine(s))",
              unit="sample") as bar:
        if len(groups) == 1:
            feed = iter(pending)
            engine = attach(spec) if attach else open_engine(spec, "cpu" if groups[0] is None else "cuda")
            engine.serve(prompts, lambda: next(feed, None), store.write, bar.update)
        else:
            _run_processes(spec, prompts, pending, store, groups, bar)
    return resumed


def _run_processes(spec: EngineSpec, prompts: list[list[int]], pending: list[Shard], store: ShardStore,
                   groups: list[list[str] | None], bar: tqdm) -> None:
    context = multiprocessing.get_context("spawn")  # CUDA and vLLM need fresh processes, not forks
    tasks, messages = context.Queue(), context.Queue()
    for shard in pending:
        tasks.put(shard)
    for _ in groups:
        tasks.put(None)
    workers = [context.Process(target=engine_worker, name=f"eval-engine-{rank}", daemon=False,
                               args=(rank, gpus, len(groups), spec, prompts, store.root, store.fingerprint,
                                     tasks, messages))
               for rank, gpus in enumerate(groups)]
    for worker in workers:
        worker.start()
    errors: dict[int, str] = {}
    running = set(range(len(workers)))
    try:
        while running:
            try:
                kind, rank, value = messages.get(timeout=1.0)
            except queue.Empty:
                for rank in list(running):
                    if workers[rank].exitcode is not None:  # died without saying goodbye (OOM kill, signal)
                        errors.setdefault(rank, f"exited with code {workers[rank].exitcode}")
                        running.discard(rank)
                continue
            if kind == "samples":
                bar.update(value)
            elif kind == "error":
                errors[rank] = value
            elif kind == "exit":
                running.discard(rank)
    finally:
        for worker in workers:
            worker.join(timeout=30)
            if worker.is_alive():
                worker.kill()
    missing = [s.index for s in pending if not store.done(s.index)]
    if errors or missing:
        detail = "\n".join(f"engine {rank} (GPUs {groups[rank]}): {text}"
                           for rank, text in sorted(errors.items()))
        raise EngineFailed(f"{len(missing)} shard(s) unfinished; rerun the same command to resume them."
                           f"\n{detail}")


def engine_worker(rank: int, gpus: list[str] | None, n_engines: int, spec: EngineSpec,
                  prompts: list[list[int]], store_root: Path, plan_fingerprint: str, tasks, messages) -> None:
    """One engine process: pin its GPUs, start the engine, serve shards from the queue."""
    _exit_with_parent()
    if gpus is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)  # before torch or vllm touch CUDA
    try:
        if gpus is None:
            import torch

            torch.set_num_threads(max(1, (os.cpu_count() or 1) // n_engines))  # CPU engines share the cores
        store = ShardStore(store_root, plan_fingerprint)
        engine = open_engine(spec, "cpu" if gpus is None else "cuda")
        engine.serve(prompts, tasks.get, store.write, lambda n: messages.put(("samples", rank, n)))
    except BaseException:
        messages.put(("error", rank, traceback.format_exc(limit=8)))
        raise
    finally:
        messages.put(("exit", rank, None))


def _exit_with_parent() -> None:
    """Ask Linux to kill this engine when the evaluator dies (a killed evaluation leaves no orphans)."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return  # not Linux: an orphaned engine finishes its shards and exits
