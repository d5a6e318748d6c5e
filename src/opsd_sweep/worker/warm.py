"""What a phase worker keeps between cycles, and the fresh state each cycle gets on top of it.

Kept (keyed by everything that shapes them, so a cycle only reuses what it would have built itself):
the tokenizer, the PEFT-wrapped student (base weights, LoRA modules, gradient checkpointing, compiled
decoder layers) and the vLLM rollout engine. The model is keyed by its content identity (model_identity),
not its path: a local model dir rewritten in place between cycles gets its objects built anew from the new
files, as a process of its own would build them. Fresh per cycle: the LoRA values (re-drawn by PEFT's own
initialisation under the run's seed, in place: see fresh_adapter), optimizer, scheduler, EMA teacher,
RNG states, the engine's prefix cache and LoRA ids. Outside a worker (a phase process of its own) the
cache is off and every call builds, so both paths run the same code.
"""

from __future__ import annotations

import contextlib
import gc
import random
from collections.abc import Callable, Hashable, Iterator
from typing import Any

from opsd_sweep.config import is_local_path
from opsd_sweep.run.identity import path_identity

_enabled = False
_kept: dict[str, tuple[Hashable, Any]] = {}  # slot -> (key, object)


def enable() -> None:
    """Called once by the worker process: from now on objects are kept between phases."""
    global _enabled
    _enabled = True


def active() -> bool:
    return _enabled


class NeedsFreshProcess(RuntimeError):
    """This phase needs an object unlike the kept one, and the kept one cannot be replaced in this
    process (a vLLM engine holds its GPU memory and process group until the process ends): the phase
    runs in a process of its own instead, and the worker makes way for a new one."""


class RunsBeside(RuntimeError):
    """This phase needs most of the GPU for an engine of its own (the evaluation's vLLM engine, or its
    model for HF generate): it runs in a process of its own beside the worker, which stays, holding only
    what it keeps asleep (the trainer sleeps its rollout engine when the evaluation does not use it), so
    the next cycle trains on the kept student and engine instead of building them again."""


def reuse(slot: str, key: Hashable, build: Callable[[], Any], refresh: Callable[[Any], None] | None = None,
          replaceable: bool = True):
    """The object kept in `slot` if it was built under an equal `key` (after `refresh` on it), else
    `build()`. An object of another key is dropped first, or, when not `replaceable`, NeedsFreshProcess."""
    if not _enabled:
        return build()
    if slot in _kept:
        kept_key, obj = _kept[slot]
        if kept_key == key:
            if refresh is not None:
                refresh(obj)
            return obj
        if not replaceable:
            raise NeedsFreshProcess(f"this cycle's {slot} ({key}) differs from the one this worker keeps ({kept_key})")
        del _kept[slot], obj
        release_memory()
    obj = build()
    _kept[slot] = (key, obj)
    return obj


def model_identity(run) -> str:
    """What `run.model.path` holds now, for the keys of what is built from it: the identity the run key gives
    it (run.keys.input_identities: a hub id by itself, a local dir by its place and a fingerprint of its
    files, run/identity.py). A model of the tiny world, which the run key names by its place only (the tiny.*
    settings in the key say what it holds), is fingerprinted like any local dir: a sweep over tiny settings
    rebuilds the world at the same path. Cheap from the second cycle of a worker on: small files are hashed
    once per (path, size, mtime) in a process, large ones (weights over 64 MiB) never, only stat'ed."""
    return path_identity(run.model.path, is_local_path(run.model.path), tiny_dir=None)


def kept(slot: str):
    """The object in `slot`, or None."""
    return _kept[slot][1] if slot in _kept else None


def release_memory() -> None:
    """Free what the last cycle left (its optimizer, activations, EMA) before the next one sizes itself."""
    gc.collect()
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()


@contextlib.contextmanager
def rng_untouched() -> Iterator[None]:
    """Run the block without moving python's, numpy's, torch's or CUDA's global RNG: a vLLM engine seeds
    them when it starts in this process, which a cycle on a kept engine would not do."""
    import numpy as np
    import torch

    states = random.getstate(), np.random.get_state(), torch.random.get_rng_state()
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    try:
        yield
    finally:
        random.setstate(states[0])
        np.random.set_state(states[1])
        torch.random.set_rng_state(states[2])
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)


FRESH = "opsd_fresh"  # the adapter name PEFT initialises the new values under


def fresh_adapter(peft_model) -> None:
    """Give a kept student the LoRA values a new get_peft_model would draw now (same RNG draws, same
    order: PEFT's own update_layer through add_adapter), written into the existing parameters so that
    compiled graphs and the engine's parameter map stay valid. Grads are cleared, eval mode restored
    (from_pretrained's mode)."""
    import torch
    from peft.tuners.tuners_utils import BaseTunerLayer

    adapter = peft_model.active_adapter
    # The compiled layers guard on the identity of each layer's `_active_adapter` object, which
    # set_adapter replaces: put the very same objects back, or every layer recompiles in the next cycle.
    active = {m: m._active_adapter for m in peft_model.modules() if isinstance(m, BaseTunerLayer)}
    peft_model.add_adapter(FRESH, peft_model.peft_config[adapter])
    params = dict(peft_model.named_parameters())
    with torch.no_grad():
        for name, param in params.items():
            if f".{FRESH}." in name:
                params[name.replace(f".{FRESH}.", f".{adapter}.")].copy_(param)
    peft_model.delete_adapter(FRESH)
    peft_model.set_adapter(adapter)
    for module, name in active.items():
        module._active_adapter = name
    for param in peft_model.parameters():
        param.grad = None
    peft_model.eval()
