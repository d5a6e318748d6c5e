"""Load problem tables from a local JSONL / JSON / parquet file or a hub dataset, with clear errors.

Shared by the trainer (problems + solutions) and the evaluator (problems + answers). Rows come back
as plain dicts keyed by our field names, each with a string `id`.
"""

from __future__ import annotations

import json
from pathlib import Path

from opsd_sweep.config import is_local_path

LOCAL_SUFFIXES = (".jsonl", ".json", ".parquet")


class DatasetUnavailableError(RuntimeError):
    """The dataset is neither a readable local file nor cached from the hub."""


def load_rows(path: str, split: str, fields: dict[str, str], max_rows: int | None = None, *,
              id_field: str | None = None, section: str = "data") -> list[dict]:
    """Rows as dicts with our field names (keys of `fields`) read from the source columns (values).

    `id` comes from the `id_field` column (None: the row position); ids must be unique. `section`
    names the config section in error messages (data or eval).
    """
    raw = _read_local(Path(path), section) if is_local_path(path) else _read_hub(path, split, section)
    wanted = dict(fields) | ({"id": id_field} if id_field else {})
    if raw:
        missing = sorted({src for src in wanted.values() if src not in raw[0]})
        if missing:
            raise KeyError(f"dataset {path!r} has no column(s) {missing}; its columns are {sorted(raw[0])}. "
                           f"Set the {section}.*_field keys to the right column names.")
    rows = [{ours: row[src] for ours, src in fields.items()}
            | {"id": str(row[id_field]) if id_field else str(i)} for i, row in enumerate(raw)]
    _check_unique_ids(rows, path, id_field, section)
    return rows[:max_rows] if max_rows else rows


def _check_unique_ids(rows: list[dict], path: str, id_field: str | None, section: str) -> None:
    seen: set[str] = set()
    for row in rows:
        if row["id"] in seen:
            raise ValueError(f"dataset {path!r}: id {row['id']!r} of column {id_field!r} is not unique; "
                             f"set {section}.id_field to a unique column or null (row position)")
        seen.add(row["id"])


def _read_local(path: Path, section: str) -> list[dict]:
    if not path.exists():
        raise DatasetUnavailableError(f"dataset file {path} does not exist; set {section}.path to an "
                                      "existing .jsonl, .json or .parquet file")
    if path.suffix == ".parquet":
        import pandas as pd

        return pd.read_parquet(path).to_dict("records")
    if path.suffix == ".json":
        records = json.loads(path.read_text())
        if not isinstance(records, list):
            raise ValueError(f"{path}: a .json dataset must hold a list of records (or use .jsonl)")
        return records
    if path.suffix == ".jsonl":
        with open(path) as handle:
            return [json.loads(line) for line in handle if line.strip()]
    raise DatasetUnavailableError(f"dataset file {path} has suffix {path.suffix!r}; "
                                  f"{section}.path must end in one of {list(LOCAL_SUFFIXES)}")


def _read_hub(name: str, split: str, section: str) -> list[dict]:
    import datasets

    try:
        return list(datasets.load_dataset(name, split=split))
    except Exception as err:  # offline, not cached, no such split: all end here with one fix list
        raise DatasetUnavailableError(
            f"dataset {name!r} (split {split!r}) could not be loaded: {err.__class__.__name__}: {err}\n"
            f"Provide it in one of two ways: (1) where there is network, run "
            f"`python -c \"import datasets; datasets.load_dataset('{name}', split='{split}')\"` and copy "
            "~/.cache/huggingface to this machine; or (2) export it to a local file and set "
            f"{section}.path=/path/to/file.jsonl (or .parquet), with {section}.*_field naming its columns."
        ) from err
