"""What a model, data or eval path names, as it enters the run key.

A hub id is its own identity. A local file (a data or eval table) is identified by its size and the
sha256 of its bytes: moved or copied elsewhere it keeps its key, edited it gets a new one. A local
directory (a model) is identified by its absolute path plus a cheap fingerprint: every small file
(config.json, tokenizer, weight index) by content, every large file (weights) by size and mtime.
Weights are not hashed (GBs per job), and config + sizes alone would give two fine-tunes of the same
base one key; so a moved model directory gets a new key (its runs are repeated, never mixed up), and
weights rewritten in place get a new key too. Paths inside the tiny world's directory are identified
by their place in it: the tiny settings, already in the key, decide what they hold.
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

SMALL_FILE_BYTES = 64 << 20  # files up to this size are hashed whole (configs, tokenizers, data tables)


def path_identity(path: str, local: bool, tiny_dir: str | None) -> str:
    """The identity of a configured path (see the module docstring); a missing local path is named as is
    (the pre-flight refuses it for real runs; simulated runs never read it)."""
    if not local:
        return f"hub:{path}"
    if tiny_dir is not None and Path(path).is_relative_to(tiny_dir):
        return f"tiny:{Path(path).relative_to(tiny_dir)}"
    target = Path(path)
    if target.is_file():
        stat = target.stat()
        return f"file:{stat.st_size}:{_file_sha256(str(target), stat.st_size, stat.st_mtime_ns)}"
    if target.is_dir():
        return f"dir:{target}:{_dir_fingerprint(target)}"
    return f"missing:{target}"


@functools.lru_cache(maxsize=256)
def _file_sha256(path: str, size: int, mtime_ns: int) -> str:
    """sha256 of a file's bytes; cached per (path, size, mtime) so a grid hashes each file once."""
    del size, mtime_ns  # cache key only
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _dir_fingerprint(root: Path) -> str:
    digest = hashlib.sha256()
    for current, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))  # .cache, .git: not the model
        for name in sorted(f for f in files if not f.startswith(".")):
            path = Path(current) / name
            stat = path.stat()
            if stat.st_size <= SMALL_FILE_BYTES:
                what = _file_sha256(str(path), stat.st_size, stat.st_mtime_ns)
            else:
                what = f"{stat.st_size}:{stat.st_mtime_ns}"
            digest.update(f"{path.relative_to(root)}={what}\n".encode())
    return digest.hexdigest()[:16]
