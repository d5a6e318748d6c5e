"""`python -m opsd_sweep.status [RESULTS_ROOT] [--watch | --json] [--wait-for done|any-change]`: every run
under a results root, by state.

One row per run dir: state, phase, training step progress (from train/metrics.jsonl), elapsed time,
ETA of the training phase (ETA), GPU-hours, where it runs. A run whose status says training/evaluating but
whose owner is gone (a killed sweep) shows as 'interrupted': re-running its sweep resumes it. A run stopped
at its collapse (train.stop_on_collapse) shows as 'collapsed', with the step. A dir that a rerun of its own
config would not use as it is says why: 'stale' (written before identities were recorded, its inputs not
provably unchanged: left as it is), a run of inputs since changed, or a dir of an earlier run key that the
next rerun takes over.

--json prints one JSON object instead of the table; its schema is versioned (SCHEMA_VERSION; a field is
only ever added within a version, a rename or a change of meaning makes the next version):

  schema_version  1
  root            the results root (absolute path)
  generated_at    when this was read (ISO 8601, UTC)
  settled         true when there is at least one run and none is pending, training, evaluating or queued
  counts          {state: number of runs}, every state of STATES (zeros included)
  runs            one object per run dir, sorted by `run`:
    run           its path relative to the root, e.g. "tiny/lr0.001-noclip-s1-61cb028d"
    run_id        its run key (status.json's key; the dir name when it has none): runs.csv's run_id
    kind          "cycle" (train then evaluate) or "eval_only" (python -m opsd_sweep.evaluate)
    state         one of STATES: pending, training, evaluating (running now, owner alive); queued (submitted
                  to SLURM, not started); interrupted (owner gone: rerun its sweep to resume); failed;
                  collapsed (stopped at its collapse); stale; done
    phase         "train" | "evaluate" | null: the phase it is in, or the last one it ran when it failed,
                  was interrupted or collapsed; null when queued, pending before its first phase, or done
    step, max_steps   last logged training step and train.max_steps (ints; null when unknown, and
                  max_steps is null for an eval_only run)
    gpus          the GPUs it holds or held (strings; [] on CPU)
    host, pid, job_id   where it runs or ran (null when unknown; job_id: its SLURM job)
    elapsed_s     seconds from its start to its end (to now while it runs); null before it started
    eta_s         seconds the training phase still needs (while training, from the last 5 steps' time)
    gpu_hours     GPU-hours it has used, every attempt added up (status.json), as the table's GPU-h
    error         the first line of status.json's error message (failed, interrupted), else null
    note          what the table's note column says (the error, why a dir is stale or not today's scores,
                  where it collapsed), "" when nothing
    config        its config key (below)
    label         its label in the summary that speaks for it (the summary's config label): of the summaries
                  whose runs.csv lists its dir (its dir, not its run key: one key can sit in two groups), the
                  one in the deepest folder above it (its group's own before the root's), then the newest; null
                  when none lists it (no summary yet, or the run is newer)
  configs         one object per config key, sorted: config, label (its runs' label), runs (how many),
                  done, running (pending + training + evaluating), failed, collapsed, other (queued,
                  interrupted, stale); verdict: its label's verdict in the summary.csv that speaks for its
                  runs (as `label`), else null (no summary, or no verdict for it, e.g. all runs collapsed)
  summaries       every summary.csv at the root or one folder below, newest first ([] when none):
                  path (relative to the root), written_at (the file's time, ISO 8601 UTC),
                  runs_ended_since (runs under the roots it read that ended after it was written: rerun
                  the summary when > 0; its roots: its own folder and the folders of the runs its runs.csv
                  lists, so a <group>-confirm/ run beside a group's summary does not count),
                  verdicts: [{label, n, mean, ci_low, ci_high, verdict, verdict_vs}] as summary.csv has them

The config key groups the seeds of one config without needing a finished run or the summary (whose labels
name the settings that differ across all runs, from a module that imports the statistics stack, ~1 s): the
run dir's path without its
`-s<seed>-<key8>` tail, then '#' and the first 8 hex digits of the SHA-256 of its saved config.yaml without
`seed` and without the fields that never enter a run key (run.keys.NON_SEMANTIC_FIELDS/_SUBFIELDS), e.g.
"tiny/lr0.001-noclip#3f9c01d2". A dir whose config.yaml does not read (queued on SLURM, damaged) has the
path part only.

--wait-for blocks, reading the root every --interval seconds (sleeping in between), until:
  done        the root is settled (see `settled`; a root without runs is not)
  any-change  anything in the JSON differs from the first reading, clocks aside (generated_at, elapsed_s,
              eta_s)
and then prints the final table (or JSON with --json). On stderr it says when it has taken its first
reading ("[status] first snapshot taken ...") and why it stopped. `settled` knows only run dirs that
exist: a sweep that starts more runs later (its next batch, a race's next round) can pass through a
settled moment, so an agent that needs the sweep's end waits on the sweep's process as well.
Exit codes (stable):
  0    the condition was met (done: every run settled, none failed or interrupted)
  2    usage error (a bad flag, no results root)
  3    --timeout passed first (the final reading is still printed)
  4    --wait-for done: every run settled, but at least one failed or was interrupted (rerun its sweep)
  130  Ctrl-C (143: SIGTERM); nothing more is printed
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import re
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from rich.console import Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from opsd_sweep.console import quiet_on_closed_pipe, table_console
from opsd_sweep.interrupt import exit_code, signals_raise
from opsd_sweep.run import takeover
from opsd_sweep.run.claims import current_owner, owner_alive
from opsd_sweep.run.keys import EVAL_ONLY, NON_SEMANTIC_FIELDS, NON_SEMANTIC_SUBFIELDS, keying
from opsd_sweep.run.record import RunRecord, UnreadableRun
from opsd_sweep.run.rundir import RunDir, find_run_dirs, gpu_hours, read_json, read_json_or_none, utc_now

SCHEMA_VERSION = 1
ORDER = ("training", "evaluating", "pending", "queued", "interrupted", "failed", "stale", "collapsed", "done")
STATES = ORDER  # every state a row can have (the JSON's `counts` lists each)
STYLE = {"training": "cyan", "evaluating": "cyan", "pending": "yellow", "queued": "yellow",
         "interrupted": "magenta", "failed": "red", "stale": "red", "collapsed": "red", "done": "green"}
ACTIVE = ("pending", "training", "evaluating")
UNSETTLED = (*ACTIVE, "queued")
PHASE_OF_STATE = {"training": "train", "evaluating": "evaluate"}
CLOCKS = ("elapsed_s", "eta_s")  # per-run fields that move with time alone (any-change ignores them)

# exit codes of --wait-for (documented in the module docstring; keep them stable)
MET, USAGE, TIMED_OUT, SOME_FAILED = 0, 2, 3, 4

SEED_TAIL = re.compile(r"-s\d+-[0-9a-f]{8}$")  # <slug>-s<seed>-<key8>: the run dir name of one seed


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
    run_id: str = ""
    kind: str = "cycle"
    phase: str | None = None
    gpus: list[str] = field(default_factory=list)
    host: str | None = None
    pid: int | None = None
    job_id: str | None = None
    error: str | None = None
    config: str = ""
    ended_at: str | None = None


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
        return RunRow(name, "queued", None, None, None, None, 0.0, f"SLURM {job}", "",
                      run_id=run_dir.path.name, job_id=job, config=config_key(run_dir, root, None))
    try:
        record: RunRecord | None = RunRecord.read(run_dir)
    except UnreadableRun as err:
        record, unreadable = None, str(err)
    if state in ACTIVE:
        holder = current_owner(run_dir)
        if holder is None or not owner_alive(holder):
            state = "interrupted"
    kind = EVAL_ONLY if status.get("kind") == EVAL_ONLY else "cycle"
    step, step_seconds = _training_progress(record.steps if record else run_dir.training_steps())
    max_steps = _max_steps(record) if kind == "cycle" else None
    eta = None
    if state == "training" and step_seconds is not None and max_steps is not None:
        eta = (max_steps - (step or 0)) * step_seconds
    owner = _where_it_ran(run_dir, status)
    gpus = [str(g) for g in status.get("gpus") or []]
    where = f"SLURM {owner['job_id']}" if owner["job_id"] else f"{owner['host'] or '?'}:{owner['pid'] or '?'}"
    if gpus:
        where += f" GPU {','.join(gpus)}"
    message = ((status.get("error") or {}).get("message") or "").strip()
    error = message.splitlines()[0][:300] if message else None
    note = error[:80] if error and state == "failed" else status.get("recovered", "")
    if record is None:
        note = unreadable
    elif state not in ACTIVE:  # a settled dir: would a rerun of its config use it as it is?
        standing = takeover.standing(run_dir, record.typed_config(), *keying(record.kind))
        if standing is not None:
            state = "stale" if standing.startswith("stale") else state
            note = standing.removeprefix("stale: ")
        elif record.eval_problem:
            note = f"not today's scores: {record.eval_problem}"[:120]
        elif record.grader_problem:
            note = f"not today's grades: {record.grader_problem}"[:120]
        elif state == "collapsed" and record.collapse.stopped:
            note = f"collapsed at step {record.collapse.step}: {record.collapse.reason}"[:120]
    elapsed = _seconds_between(status.get("started_at"), status.get("ended_at"))
    hours = gpu_hours(status).get("gpu_hours.total", 0.0)
    return RunRow(name, state, step, max_steps, elapsed, eta, hours, where, note,
                  run_id=record.run_id if record else str(status.get("key") or run_dir.path.name), kind=kind,
                  phase=_phase(status, kind), gpus=gpus, host=owner["host"], pid=owner["pid"],
                  job_id=owner["job_id"], error=error if state in ("failed", "interrupted") else None,
                  config=config_key(run_dir, root, record.config if record else None),
                  ended_at=status.get("ended_at"))


def _max_steps(record: RunRecord | None) -> int | None:
    try:
        return int(record.config["train"]["max_steps"])
    except (AttributeError, KeyError, TypeError, ValueError):  # no or a damaged config.yaml: no step count
        return None


def _where_it_ran(run_dir: RunDir, status: dict) -> dict:
    """host, pid, job_id from status.json; where it records none (a standalone evaluation written before
    it recorded its host), from the last claim on the run, released or not: its claimer ran it."""
    found = {name: status.get(name) for name in ("host", "pid", "job_id")}
    if found["host"] is None and found["job_id"] is None:
        numbers = sorted(int(p.name) for p in run_dir.claims.glob("*") if p.name.isdigit()) \
            if run_dir.claims.is_dir() else []
        claimant = read_json_or_none(run_dir.claims / f"{numbers[-1]:08d}") if numbers else None
        if isinstance(claimant, dict):
            found = {name: claimant.get(name) for name in found}
    return found


def _phase(status: dict, kind: str) -> str | None:
    """The phase a run is in, or the last one it ran when it stopped (see the module docstring)."""
    state = status.get("state")
    if state in PHASE_OF_STATE:
        return PHASE_OF_STATE[state]
    if state == "collapsed":
        return "train"
    if state not in ("failed", "interrupted"):
        return None
    if kind == EVAL_ONLY:
        return "evaluate"
    attempts = status.get("attempt_log")
    last = attempts[-1] if isinstance(attempts, list) and attempts and isinstance(attempts[-1], dict) else {}
    ran = last.get("phase_seconds") or status.get("phase_seconds") or {}
    return list(ran)[-1] if isinstance(ran, dict) and ran else None


def config_key(run_dir: RunDir, root: Path, config: dict | None) -> str:
    """The key that groups the seeds of one config (see the module docstring)."""
    path = run_dir.path.relative_to(root)
    base = str(path.parent / SEED_TAIL.sub("", path.name)) if path.name else "."
    return f"{base}#{_config_digest(config)}" if config else base


def _config_digest(config: dict) -> str:
    """8 hex digits of the saved config without seed and the fields that never enter a run key."""
    kept = {k: v for k, v in config.items() if k not in NON_SEMANTIC_FIELDS and k != "seed"}
    if kept.get("executor") != "simulate":
        kept.pop("simulate", None)
    for section, names in NON_SEMANTIC_SUBFIELDS.items():
        if isinstance(kept.get(section), dict):
            kept[section] = {k: v for k, v in kept[section].items() if k not in names}
    canonical = json.dumps(kept, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:8]


# --- the JSON --------------------------------------------------------------------------------------

def read_summaries(root: Path) -> list[dict]:
    """Every summary.csv at the root or one folder below, newest first, with the run labels of the runs.csv
    beside it (under `_labels`, run_id -> label; dropped from the JSON)."""
    found = []
    for path in [root / "summary.csv", *sorted(root.glob("*/summary.csv"))]:
        try:
            written = path.stat().st_mtime
            with path.open(newline="") as handle:
                rows = list(csv.DictReader(handle))
        except (OSError, csv.Error, UnicodeDecodeError):
            continue
        listed = []
        try:
            with (path.parent / "runs.csv").open(newline="") as handle:
                listed = [(r["run_dir"], r["label"]) for r in csv.DictReader(handle) if r.get("run_dir")]
        except (OSError, csv.Error, UnicodeDecodeError, KeyError):
            pass  # no runs.csv beside it: its verdicts are listed, no run is labelled by it
        when = datetime.fromtimestamp(written, timezone.utc).isoformat(timespec="seconds")
        found.append({"path": str(path.relative_to(root)), "_written": written, "written_at": when,
                      "verdicts": [_verdict(r) for r in rows if r.get("label")], "_listed": listed,
                      "_folder": path.parent})
    return sorted(found, key=lambda s: -s["_written"])


def labels_by_run(listed: list[tuple[str, str]], names: list[str], root: Path) -> dict[str, str]:
    """Run name (path under root) -> label, for the run dirs a runs.csv lists (its (run_dir, label) rows).

    By the dir, never by the run key: one config and seed run in two groups share a key, and a summary that
    read one of them says nothing of the other. A listed dir that exists is matched by its resolved path; one
    that no longer exists (the results root was moved, or the summary ran from another folder and wrote a
    relative path) by its last folders, the run's path under root (the longest such name)."""
    by_real = {(root / name).resolve(): name for name in names}
    labels = {}
    for run_dir, label in listed:
        listed_path = Path(run_dir)
        if listed_path.exists():
            name = by_real.get(listed_path.resolve())
        else:
            tails = [n for n in names if listed_path.parts[-len(Path(n).parts):] == Path(n).parts]
            name = max(tails, key=lambda n: len(Path(n).parts), default=None)
        if name is not None:
            labels[name] = label
    return labels


def _under(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def covers(summary: dict, run_path: Path, root: Path) -> bool:
    """Whether a run dir is under the roots a summary read: its own folder (the summary is written to its first
    root unless --out says otherwise) or a folder that held a run dir its runs.csv lists (labels_by_run, so a
    results root moved since still matches). A run elsewhere (e.g. a confirmation's <group>-confirm/ beside the
    group's summary, or another group's run of the same key) is not its business: it neither makes the summary
    stale nor takes its labels."""
    folders = {summary["_folder"], *((root / name).parent for name in summary["_labels"])}
    return any(_under(run_path, folder) for folder in folders)


def nearest_summary(name: str, root: Path, summaries: list[dict]) -> dict | None:
    """The summary that speaks for the run dir at root / name: among those whose runs.csv lists that dir, the
    one in the deepest folder above it (its group's own, before a summary of the whole root), then the newest;
    else None."""
    run_path = root / name
    listing = [s for s in summaries if name in s["_labels"]]  # summaries are newest first; sorted() is stable
    ranked = sorted(listing, key=lambda s: (not _under(run_path, s["_folder"]), -len(s["_folder"].parts)))
    return ranked[0] if ranked else None


def _verdict(row: dict) -> dict:
    def number(name: str) -> float | None:
        try:
            return float(row[name])
        except (KeyError, TypeError, ValueError):
            return None

    n = number("n")
    return {"label": row["label"], "n": int(n) if n is not None else None, "mean": number("mean"),
            "ci_low": number("ci_low"), "ci_high": number("ci_high"), "verdict": row.get("verdict") or None,
            "verdict_vs": row.get("verdict_vs") or None}


def status_json(rows: list[RunRow], root: Path) -> dict:
    """The --json object (schema: the module docstring)."""
    summaries = read_summaries(root)
    for summary in summaries:
        summary["_labels"] = labels_by_run(summary["_listed"], [r.name for r in rows], root)
    speaks_for = {r.name: nearest_summary(r.name, root, summaries) for r in rows}
    runs = []
    for r in sorted(rows, key=lambda r: r.name):
        summary = speaks_for[r.name]
        label = summary["_labels"][r.name] if summary else None
        runs.append({"run": r.name, "run_id": r.run_id, "kind": r.kind, "state": r.state, "phase": r.phase,
                     "step": r.step, "max_steps": r.max_steps, "gpus": r.gpus, "host": r.host, "pid": r.pid,
                     "job_id": r.job_id, "elapsed_s": _rounded(r.elapsed_s), "eta_s": _rounded(r.eta_s),
                     "gpu_hours": round(r.gpu_hours, 6), "error": r.error, "note": r.note, "config": r.config,
                     "label": label})
    configs = []
    for key in sorted({r["config"] for r in runs}):
        own = [r for r in runs if r["config"] == key]
        labelled = next((r for r in own if r["label"] is not None), None)  # its runs' own (nearest) summary
        label = labelled["label"] if labelled else None
        verdicts = speaks_for[labelled["run"]]["verdicts"] if labelled else []
        verdict = next((v["verdict"] for v in verdicts if v["label"] == label), None)
        count = {state: sum(r["state"] == state for r in own) for state in ("done", "failed", "collapsed")}
        running = sum(r["state"] in ACTIVE for r in own)
        configs.append({"config": key, "label": label, "runs": len(own), "done": count["done"],
                        "running": running, "failed": count["failed"], "collapsed": count["collapsed"],
                        "other": len(own) - running - sum(count.values()), "verdict": verdict})
    for summary in summaries:
        summary["runs_ended_since"] = sum(_after(r.ended_at, summary["_written"]) for r in rows
                                          if covers(summary, root / r.name, root))
    counts = {state: sum(r.state == state for r in rows) for state in STATES}
    counts |= {r.state: counts.get(r.state, 0) + 1 for r in rows if r.state not in STATES}
    return {"schema_version": SCHEMA_VERSION, "root": str(root), "generated_at": utc_now(),
            "settled": settled(rows), "counts": counts, "runs": runs, "configs": configs,
            "summaries": [{k: v for k, v in s.items() if not k.startswith("_")} for s in summaries]}


def _rounded(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 1)


def _after(when: str | None, timestamp: float) -> bool:
    try:
        return when is not None and datetime.fromisoformat(when).timestamp() > timestamp
    except ValueError:
        return False


def settled(rows: list[RunRow]) -> bool:
    """At least one run, and none pending, training, evaluating or queued."""
    return bool(rows) and not any(r.state in UNSETTLED for r in rows)


def fingerprint(snapshot: dict) -> str:
    """The JSON without its clocks (generated_at, each run's elapsed_s and eta_s): what any-change
    compares."""
    steady = {k: v for k, v in snapshot.items() if k != "generated_at"}
    steady["runs"] = [{k: v for k, v in run.items() if k not in CLOCKS} for run in snapshot["runs"]]
    return json.dumps(steady, sort_keys=True)


# --- the table -------------------------------------------------------------------------------------

def _duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def render(rows: list[RunRow], root: Path | str) -> Group:
    """The table of `rows` under its title, `root` as the user gave it (summary.md's paths are spelled so too)."""
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


# --- the command -----------------------------------------------------------------------------------

EPILOG = """exit codes (--wait-for):
  0    the condition was met (done: every run settled, none failed or interrupted)
  2    usage error
  3    --timeout passed first (the final reading is still printed)
  4    --wait-for done: every run settled, but at least one failed or was interrupted
  130  Ctrl-C (143: SIGTERM)

examples:
  python -m opsd_sweep.status results --json                  # schema: pydoc opsd_sweep.status
  python -m opsd_sweep.status results --wait-for done --timeout 3600 --json  # until the sweep settles
  python -m opsd_sweep.status results --wait-for any-change --timeout 600    # wake on any change
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m opsd_sweep.status", description=__doc__.split("\n\n")[0],
                                     epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results_root", nargs="?", default="results", help="results root (default: results)")
    parser.add_argument("--watch", action="store_true", help="refresh the table until Ctrl-C")
    parser.add_argument("--json", action="store_true", help=f"print one JSON object (schema_version "
                        f"{SCHEMA_VERSION}, documented in `pydoc opsd_sweep.status`) instead of the table")
    parser.add_argument("--wait-for", choices=("done", "any-change"), help="block until every run is settled "
                        "(done) or anything but the clocks changes (any-change); see the exit codes below")
    parser.add_argument("--timeout", type=float, help="with --wait-for: give up after this many seconds "
                        "(exit 3; default: no limit)")
    parser.add_argument("--interval", type=float, default=5.0,
                        help="seconds between readings with --watch or --wait-for (default 5)")
    args = parser.parse_args(argv)
    root, shown = Path(args.results_root).absolute(), args.results_root  # the table says it as given
    if not root.is_dir():
        parser.error(f"no results root at {shown}; pass the folder your sweeps write to (results_root)")
    if args.watch and (args.json or args.wait_for):
        parser.error("--watch shows a live table; it does not combine with --json or --wait-for")
    if args.interval <= 0 or (args.timeout is not None and args.timeout < 0):
        parser.error("--interval must be > 0 and --timeout >= 0 (seconds)")
    if args.timeout is not None and not args.wait_for:
        parser.error("--timeout applies to --wait-for")

    def rows() -> list[RunRow]:
        return [run_row(r, root) for r in find_runs(root)]

    console = table_console()
    if args.wait_for:
        try:
            with signals_raise():
                code, final = wait_for(args.wait_for, root, rows, args.timeout, args.interval)
        except KeyboardInterrupt as err:  # Ctrl-C ends a wait: no traceback, no half-printed output
            print("[status] interrupted", file=sys.stderr, flush=True)
            return exit_code(err)
        _print(final, root, args.json, console, shown)
        return code
    if not args.watch:
        _print(rows(), root, args.json, console, shown)
        return MET
    with Live(render(rows(), shown), console=console, auto_refresh=False) as live:
        try:
            while True:
                time.sleep(args.interval)
                live.update(render(rows(), shown), refresh=True)
        except KeyboardInterrupt:
            pass  # Ctrl-C is how a watch ends: leave the last snapshot on screen, no traceback
    return MET


def _print(rows: list[RunRow], root: Path, as_json: bool, console, shown: str) -> None:
    if as_json:  # the JSON's root stays absolute (schema_version 1)
        print(json.dumps(status_json(rows, root), indent=2), flush=True)
    else:
        console.print(render(rows, shown))


def wait_for(condition: str, root: Path, read, timeout: float | None,
             interval: float) -> tuple[int, list[RunRow]]:
    """Read the root (`read()` -> rows) until `condition` holds or `timeout` seconds pass, sleeping `interval`
    between readings. Returns (exit code, the last reading's rows)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    rows = read()
    first = fingerprint(status_json(rows, root))
    print(f"[status] first snapshot taken ({len(rows)} runs); waiting for {condition}"
          f"{f', at most {timeout:g} s' if timeout is not None else ''}, reading every {interval:g} s",
          file=sys.stderr, flush=True)
    while True:
        if condition == "done" and settled(rows):
            failed = [r.name for r in rows if r.state in ("failed", "interrupted")]
            print(f"[status] every run settled; {len(failed)} failed or interrupted" if failed else
                  "[status] every run settled", file=sys.stderr, flush=True)
            return (SOME_FAILED if failed else MET), rows
        if condition == "any-change" and fingerprint(status_json(rows, root)) != first:
            print("[status] changed", file=sys.stderr, flush=True)
            return MET, rows
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            print(f"[status] timed out after {timeout:g} s", file=sys.stderr, flush=True)
            return TIMED_OUT, rows
        time.sleep(interval if left is None else min(interval, left))
        rows = read()


if __name__ == "__main__":
    sys.exit(quiet_on_closed_pipe(main))
