"""`python -m opsd_sweep.status [RESULTS_ROOT] [--watch]`: every run under a results root, by state.

One row per run dir: state, phase, training step progress (from train/metrics.jsonl), elapsed time,
ETA of the training phase (ETA), GPU-hours, where it runs. A run whose status says training/evaluating but
whose owner is gone (a killed sweep) shows as 'interrupted': re-running its sweep resumes it. A dir that
a rerun of its own config would not use as it is says why: 'stale' (written before identities were
recorded, its inputs not provably unchanged: left as it is), a run of inputs since changed, or a dir of
an earlier run key that the next rerun takes over.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from rich.console import Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from opsd_sweep.console import table_console
from opsd_sweep.run import takeover
from opsd_sweep.run.claims import current_owner, owner_alive
from opsd_sweep.run.keys import keying
from opsd_sweep.run.record import RunRecord, UnreadableRun
from opsd_sweep.run.rundir import RunDir, find_run_dirs, gpu_hours, read_json

ORDER = ("training", "evaluating", "pending", "queued", "interrupted", "failed", "stale", "collapsed", "done")
STYLE = {"training": "cyan", "evaluating": "cyan", "pending": "yellow", "queued": "yellow",
         "interrupted": "magenta", "failed": "red", "stale": "red", "collapsed": "red", "done": "green"}
ACTIVE = ("pending", "training", "evaluating")


@dataclass
class RunRow:
    name: str
    state: str
    step: int | None
    max_steps: int | None
    elapsed_s: float | None
    eta_s: float | None
    gpu_hours: float
    where: str
    note: str


def find_runs(root: Path) -> list[RunDir]:
    """Run dirs under root that were started or submitted (run.rundir.find_run_dirs)."""
    return [r for r in find_run_dirs([root]) if r.status.exists() or r.submission.exists()]


def _seconds_between(start: str | None, end: str | None) -> float | None:
    if not start:
        return None
    stop = datetime.fromisoformat(end) if end else datetime.now(timezone.utc)
    return (stop - datetime.fromisoformat(start)).total_seconds()


def _training_progress(steps: list[dict]) -> tuple[int | None, float | None]:
    """(last logged step, mean seconds per step over the last 5 steps) from metrics.jsonl's lines."""
    if not steps:
        return None, None
    recent = [r["step_seconds"] for r in steps[-5:] if "step_seconds" in r]
    return steps[-1]["step"], (sum(recent) / len(recent) if recent else None)


def run_row(run_dir: RunDir, root: Path) -> RunRow:
    """One row of the table, from the run's record (run.record.RunRecord); a dir whose config.yaml does not
    read shows what its status.json says, with the reason as its note."""
    name = str(run_dir.path.relative_to(root))
    status = run_dir.read_status()
    state = status.get("state")
    if state is None:  # submitted to SLURM, not started yet
        job = read_json(run_dir.submission).get("job_id") if run_dir.submission.exists() else None
        return RunRow(name, "queued", None, None, None, None, 0.0, f"SLURM {job}", "")
    try:
        record: RunRecord | None = RunRecord.read(run_dir)
    except UnreadableRun as err:
        record, unreadable = None, str(err)
    if state in ACTIVE:
        owner = current_owner(run_dir)
        if owner is None or not owner_alive(owner):
            state = "interrupted"
    step, step_seconds = _training_progress(record.steps if record else run_dir.training_steps())
    max_steps = _max_steps(record)
    eta = None
    if state == "training" and step_seconds is not None and max_steps is not None:
        eta = (max_steps - (step or 0)) * step_seconds
    where = f"SLURM {status['job_id']}" if status.get("job_id") else f"{status.get('host', '?')}:{status.get('pid', '?')}"
    if status.get("gpus"):
        where += f" GPU {','.join(map(str, status['gpus']))}"
    error = (status.get("error") or {}).get("message") or ""
    note = error.strip().splitlines()[0][:80] if error and state == "failed" else status.get("recovered", "")
    if record is None:
        note = unreadable
    elif state not in ACTIVE:  # a settled dir: would a rerun of its config use it as it is?
        standing = takeover.standing(run_dir, record.typed_config(), *keying(record.kind))
        if standing is not None:
            state = "stale" if standing.startswith("stale") else state
            note = standing.removeprefix("stale: ")
        elif record.eval_problem:
            note = f"not today's scores: {record.eval_problem}"[:120]
    return RunRow(name, state, step, max_steps, _seconds_between(status.get("started_at"), status.get("ended_at")),
                  eta, gpu_hours(status).get("gpu_hours.total", 0.0), where, note)


def _max_steps(record: RunRecord | None) -> int | None:
    try:
        return int(record.config["train"]["max_steps"])
    except (AttributeError, KeyError, TypeError, ValueError):  # no or a damaged config.yaml: no step count
        return None


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def render(rows: list[RunRow], root: Path) -> Group:
    rows = sorted(rows, key=lambda r: (ORDER.index(r.state) if r.state in ORDER else len(ORDER), r.name))
    table = Table(title=f"runs under {root}", title_justify="left")
    table.add_column("run", overflow="fold")
    for column, justify in (("state", "left"), ("steps", "right"), ("elapsed", "right"), ("ETA", "right"),
                            ("GPU-h", "right"), ("where", "left"), ("note", "left")):
        table.add_column(column, justify=justify)
    for r in rows:
        steps = f"{r.step or 0}/{r.max_steps}" if r.max_steps else ""
        table.add_row(r.name, Text(r.state, style=STYLE.get(r.state, "")), steps, _duration(r.elapsed_s),
                      _duration(r.eta_s), f"{r.gpu_hours:.3f}", r.where, r.note)
    counts = {state: sum(r.state == state for r in rows) for state in ORDER}
    total = " ".join(f"{state} {n}" for state, n in counts.items() if n)
    footer = Text(f"{len(rows)} runs: {total or 'none'} | GPU-hours {sum(r.gpu_hours for r in rows):.3f}")
    return Group(table, footer)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m opsd_sweep.status", description=__doc__.splitlines()[0])
    parser.add_argument("results_root", nargs="?", default="results", help="results root (default: results)")
    parser.add_argument("--watch", action="store_true", help="refresh the table until Ctrl-C")
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between refreshes with --watch")
    args = parser.parse_args(argv)
    root = Path(args.results_root).absolute()
    if not root.is_dir():
        parser.error(f"no results root at {root}; pass the folder your sweeps write to (results_root)")

    def snapshot() -> Group:
        return render([run_row(r, root) for r in find_runs(root)], root)

    console = table_console()
    if not args.watch:
        console.print(snapshot())
        return
    with Live(snapshot(), console=console, auto_refresh=False) as live:
        try:
            while True:
                time.sleep(args.interval)
                live.update(snapshot(), refresh=True)
        except KeyboardInterrupt:
            pass  # Ctrl-C is how a watch ends: leave the last snapshot on screen, no traceback


if __name__ == "__main__":
    main()
