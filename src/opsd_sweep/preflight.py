"""Checks of a run config against this machine and the files it names, before any compute: the
packages it asks for are installed (vllm for backend=vllm, the tracker of train.report_to), the model,
data and eval sources exist (locally, or in the hub cache when offline), data files are not empty, and
loss_top_k fits the model's vocabulary. Reads config files and the first record of each table, never
weights (an unbuilt tiny world's vocabulary: its tokenizer is trained, nothing is written).
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

from opsd_sweep.backends import vllm_installed
from opsd_sweep.config import RunConfig, is_local_path
from opsd_sweep.tiny import tiny_vocab_size
from opsd_sweep.trackers import missing_tracker_package


def preflight_problems(run: RunConfig, train: bool) -> list[str]:
    """Every problem of the run's model, eval and (when it trains) data sources, each naming the key,
    the value and the fix.

    Simulated runs read none of them: nothing is checked. Paths inside the tiny world's directory are
    checked once it is built (the first cycle builds it)."""
    if run.executor == "simulate":
        return []
    tiny = Path(run.tiny.dir) if run.tiny is not None else None
    problems = _package_problems(run, train)
    model_config = None
    if not _unbuilt_tiny(run.model.path, tiny):
        problem, model_config = _model_config(run.model.path)
        problems += [problem] if problem else []
    tables = [("data", run.data)] if train else []
    if run.eval.suite:  # eval=math_suite reads each benchmark's table, not the top-level one
        tables += [(f"eval.suite.{name}", benchmark) for name, benchmark in run.eval.suite.items()]
    else:
        tables.append(("eval", run.eval))
    for section, cfg in tables:
        if not _unbuilt_tiny(cfg.path, tiny):
            problems += _table_problems(section, cfg.path, cfg.split)
    vocab = model_vocab_size(run) if run.loss_top_k is not None else None
    if vocab is not None and run.loss_top_k > vocab:
        problems.append(f"loss_top_k={run.loss_top_k} exceeds the vocabulary of model.path={run.model.path} "
                        f"({vocab} tokens): it would keep the full distribution, as loss_top_k=null does; set "
                        f"loss_top_k below {vocab} to keep the teacher's top k, or null")
    return problems


def model_vocab_size(run: RunConfig) -> int | None:
    """The size of the model's logits (config.json's vocab_size): the tiny world's from its settings, built or
    not (tiny.py); else model.path's; None where it cannot be read here (a hub id not cached, online)."""
    if run.tiny is not None and Path(run.model.path) == Path(run.tiny.dir) / "model":
        return tiny_vocab_size(run.tiny)
    problem, config = _model_config(run.model.path)
    vocab = (config or {}).get("vocab_size") if problem is None else None
    return vocab if isinstance(vocab, int) else None


def _package_problems(run: RunConfig, train: bool) -> list[str]:
    """An explicit backend=vllm needs the vllm package (`auto` never fails: it falls back to hf); a
    tracker needs its package."""
    backends = [("rollout.backend", run.rollout.backend)] if train else []
    problems = [f"{key}=vllm but vllm is not installed here: make install-gpu, or use {key}=auto (vllm where "
                "it runs, else hf)" for key, backend in [*backends, ("eval.backend", run.eval.backend)]
                if backend == "vllm" and not vllm_installed()]
    if train and run.train.strategy == "fsdp" and run.rollout.backend == "auto" and not vllm_installed():
        problems.append("train.strategy=fsdp needs the vllm rollout, but rollout.backend=auto resolves to hf here "
                        "(vllm is not installed): make install-gpu, or use train.strategy=ddp")
    kv_options = [("rollout", run.rollout)] if train else []
    for section, cfg in [*kv_options, ("eval", run.eval)]:
        if cfg.kv_cache_dtype != "auto" and cfg.backend == "auto" and not vllm_installed():
            problems.append(f"{section}.kv_cache_dtype={cfg.kv_cache_dtype} is a vLLM option, but {section}.backend="
                            f"auto resolves to hf here (vllm is not installed): make install-gpu, or "
                            f"{section}.kv_cache_dtype=auto")
    tracker = missing_tracker_package(run.train.report_to) if train else None
    return problems + ([tracker] if tracker else [])


def _unbuilt_tiny(path: str, tiny: Path | None) -> bool:
    return tiny is not None and Path(path).is_relative_to(tiny) and not (tiny / "settings.json").exists()


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes", "on")


@functools.lru_cache(maxsize=64)
def _model_config(path: str) -> tuple[str | None, dict | None]:
    """(problem or None, the model's config.json or None) for a local model dir or a hub id."""
    if is_local_path(path):
        config = Path(path) / "config.json"
        if not config.is_file():
            return (f"model.path={path}: no model directory with a config.json there; set model.path to a "
                    "directory holding config.json, the tokenizer and the weights"), None
        return None, json.loads(config.read_text())
    from huggingface_hub import try_to_load_from_cache

    cached = try_to_load_from_cache(path, "config.json")
    if isinstance(cached, str):
        return None, json.loads(Path(cached).read_text())
    if _offline():
        return (f"model.path={path}: the hub id is not in the local cache and HF_HUB_OFFLINE=1; download it "
                f"where there is network (huggingface-cli download {path}) and copy the cache here, or set "
                "model.path to a local directory"), None
    return None, None  # online: loaded (and checked) when the run starts


@functools.lru_cache(maxsize=64)
def _table_problems(section: str, path: str, split: str) -> list[str]:
    if not is_local_path(path):
        return [] if not _offline() or _dataset_cached(path) else [
            f"{section}.path={path}: the hub dataset is not in the local cache and HF_HUB_OFFLINE=1; load it "
            f"once where there is network (datasets.load_dataset('{path}', split='{split}')) and copy "
            f"~/.cache/huggingface here, or export it to a local file and set {section}.path=/path/to/file.jsonl"]
    file = Path(path)
    if not file.is_file():
        return [f"{section}.path={path} does not exist; set it to an existing .jsonl, .json or .parquet file"]
    if file.suffix not in (".jsonl", ".json", ".parquet"):
        return [f"{section}.path={path} has suffix {file.suffix!r}; use a .jsonl, .json or .parquet file"]
    if _is_empty(file):
        return [f"{section}.path={path} holds no records; point {section}.path at a file with problems in it"]
    return []


def _is_empty(file: Path) -> bool:
    """Whether a table has no record: no non-blank line (.jsonl), an empty list (.json), no rows (.parquet)."""
    if file.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.ParquetFile(file).metadata.num_rows == 0
    with open(file, errors="replace") as handle:
        if file.suffix == ".jsonl":
            return not any(line.strip() for line in handle)
        return handle.read(64).strip() in ("", "[]")


def _dataset_cached(name: str) -> bool:
    """Whether a hub dataset has a copy in the hub cache or in the datasets cache."""
    from huggingface_hub import constants

    home = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface"))
    datasets_cache = Path(os.environ.get("HF_DATASETS_CACHE", home / "datasets"))
    return ((Path(constants.HF_HUB_CACHE) / f"datasets--{name.replace('/', '--')}").is_dir()
            or any(datasets_cache.glob(f"{name.replace('/', '___')}*")))
