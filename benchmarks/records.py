"""Where a benchmark's JSON record goes (benchmarks/measured/<name>_<date>.json, or --out) and how it is written."""

from __future__ import annotations

import datetime
import json
import sys
from pathlib import Path

MEASURED = Path(__file__).resolve().parent / "measured"


def record_head(module: str, argv: list[str] | None) -> dict:
    """A record's date and the command line that made it (python -m benchmarks.<module> with its arguments)."""
    args = sys.argv[1:] if argv is None else argv
    return {"date": datetime.date.today().isoformat(), "command": " ".join([f"python -m benchmarks.{module}", *args])}


def write_record(record: dict, name: str, out: Path | None) -> Path:
    """Write `record` to `out`, or to measured/<name>_<date>.json; say where."""
    path = out or MEASURED / f"{name}_{record['date']}.json"
    path.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {path}")
    return path
