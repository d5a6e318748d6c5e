"""Which generation backend a phase uses, and the process environment vLLM needs to run inside a cycle.

`rollout.backend` and `eval.backend` default to `auto`: vllm where it is installed and the phase has
CUDA GPUs, else hf (the CPU path of the tiny profile). Asking for `vllm` where it cannot run is a
ConfigError before any compute (config.validate) or a clear error at the start of the phase.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

BACKENDS = ("auto", "hf", "vllm")


def vllm_installed() -> bool:
    """True when `import vllm` would find the package (checked without importing it: seconds saved)."""
    return importlib.util.find_spec("vllm") is not None


def resolve_backend(requested: str, has_gpus: bool, key: str) -> tuple[str, str]:
    """(backend, why) for a phase: `auto` becomes vllm where it can run, hf elsewhere.

    `key` names the config key (rollout.backend / eval.backend) in the messages."""
    if requested == "hf":
        return "hf", f"{key}=hf"
    can_run = vllm_installed() and has_gpus
    if requested == "vllm":
        if not can_run:
            missing = "vllm is not installed (make install-gpu)" if not vllm_installed() else "no CUDA GPU is visible"
            raise RuntimeError(f"{key}=vllm but {missing}; use {key}=auto (vllm on GPUs, else hf) or {key}=hf")
        return "vllm", f"{key}=vllm"
    if requested != "auto":
        raise ValueError(f"{key}={requested!r} is not one of {list(BACKENDS)}")
    if can_run:
        return "vllm", f"{key}=auto: vllm is installed and CUDA GPUs are visible"
    why = "vllm is not installed" if not vllm_installed() else "no CUDA GPU is visible"
    return "hf", f"{key}=auto: {why}"


def vllm_env(cache_dir: str | Path | None) -> dict[str, str]:
    """Environment a process needs before it starts a vLLM engine.

    - VLLM_WORKER_MULTIPROC_METHOD=spawn: a phase touches CUDA (device checks, tokenizer-side torch)
      before its engine starts, and vLLM's default fork of the engine-core process then fails with
      'Cannot re-initialize CUDA in forked subprocess'.
    - With a cache dir: the compile caches under it (vLLM's torch.compile artefacts, inductor's FX
      graph and autotune caches, Triton kernels), so the 2nd..Nth cycle of a sweep starts warm, also
      on the other nodes of a cluster that share the file system.
    """
    env = {"VLLM_WORKER_MULTIPROC_METHOD": "spawn"}
    if cache_dir is not None:
        root = Path(cache_dir) / "compile"
        env |= {"VLLM_CACHE_ROOT": str(root / "vllm"), "TORCHINDUCTOR_CACHE_DIR": str(root / "inductor"),
                "TRITON_CACHE_DIR": str(root / "triton")}
    return env


def prepare_vllm_process(cache_dir: str | Path | None = None) -> None:
    """Set vllm_env() in this process, keeping values the user (or the cycle) set already."""
    for key, value in vllm_env(cache_dir).items():
        os.environ.setdefault(key, value)
