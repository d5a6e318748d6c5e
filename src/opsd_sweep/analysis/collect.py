"""Scan results roots into one row per run (runs.csv)."""

from __future__ import annotations

import glob
from pathlib import Path

import pandas as pd
from omegaconf import OmegaConf

from opsd_sweep.runs import RunDir, read_json


def _flatten(data: dict, prefix: str = "") -> dict:
    flat = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat |= _flatten(value, f"{name}.")
        else:
            flat[name] = tuple(value) if isinstance(value, list) else value
    return flat


def find_run_dirs(roots: list[str]) -> list[RunDir]:
    """Every directory with a config.yaml under the given roots (globs allowed)."""
    found: set[Path] = set()
    for root in roots:
        for base in glob.glob(str(Path(root).expanduser())):
            found.update(p.parent for p in Path(base).rglob("config.yaml") if ".hydra" not in p.parts)
    return [RunDir(p) for p in sorted(found)]


def collect_runs(roots: list[str]) -> pd.DataFrame:
    rows = []
    for run_dir in find_run_dirs(roots):
        config = _flatten(OmegaConf.to_container(OmegaConf.load(run_dir.config)))
        status = run_dir.read_status()
        row = {"run_dir": str(run_dir.path), "key": status.get("key"), "state": status.get("state", "unknown")}
        row |= {f"cfg.{k}": v for k, v in config.items()}
        if run_dir.eval_json.exists():
            metrics = read_json(run_dir.eval_json)["metrics"]
            row |= {k: v for k, v in metrics.items() if not isinstance(v, dict)}
            n = max(metrics["pass_at_k"], key=int)
            row["pass_at_n"] = metrics["pass_at_k"][n]
        rows.append(row)
    return pd.DataFrame(rows)


def varying_columns(runs: pd.DataFrame, exclude: tuple[str, ...] = ("cfg.seed",)) -> list[str]:
    """Config columns whose value differs between runs (the sweep's axes), seed excluded."""
    cfg_cols = [c for c in runs.columns if c.startswith("cfg.") and c not in exclude]
    return [c for c in cfg_cols if runs[c].astype(str).nunique() > 1]
