"""Load problem tables from a local JSONL / parquet file or a hub dataset, with clear offline errors."""

from __future__ import annotations

import json
from pathlib import Path

from opsd_sweep.config import is_local_path


class DatasetUnavailableError(RuntimeError):
    """The dataset is neither a readable local file nor cached from the hub."""


def load_rows(path: str, split: str, fields: dict[str, str], max_rows: int | None = None) -> list[dict]:
    """Rows as dicts with our field names (keys of `fields`) read from the source columns (values)."""
    raw = _read_local(Path(path)) if is_local_path(path) else _read_hub(path, split)
    if raw:
        missing = [src for src in fields.values() if src not in raw[0]]
        if missing:
            raise KeyError(f"dataset {path!r} has no column(s) {missing}; its columns are {sorted(raw[0])}. "
                           "Set the *_field keys of the data/eval config to the right column names.")
    rows = [{ours: row[src] for ours, src in fields.items()} | {"id": str(row.get("id", i))}
            for i, row in enumerate(raw)]
    return rows[:max_rows] if max_rows else rows


def _read_local(path: Path) -> list[dict]:
    if not path.exists():
        raise DatasetUnavailableError(f"dataset file {path} does not exist; pass an existing .jsonl or .parquet path")
    if path.suffix == ".parquet":
        import pandas as pd
        return pd.read_parquet(path).to_dict("records")
    with open(path) as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _read_hub(name: str, split: str) -> list[dict]:
    import datasets

    try:
        return list(datasets.load_dataset(name, split=split))
    except Exception as err:
        raise DatasetUnavailableError(
            f"dataset {name!r} (split {split!r}) could not be loaded: {err.__class__.__name__}: {err}. "
            f"Offline machines need it cached (run `python -c \"import datasets; datasets.load_dataset('{name}')\"` "
            "where there is network, then copy ~/.cache/huggingface) or a local copy: set the path to a "
            ".jsonl or .parquet file.") from err
