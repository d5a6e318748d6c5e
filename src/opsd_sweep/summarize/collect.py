"""Scan results roots (and external CSVs) into tidy tables: one row per run, one row per sample.

A run dir that cannot be read (corrupt YAML/JSON, missing config) is listed in `skipped` with the
reason and never stops the scan; every other run keeps its row, and one that does not count (unfinished,
failed, stopped at its collapse, or scores known to be wrong: run.record.RunRecord.left_out) is listed
too, because the statistics use only runs that count (column `counts`).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from opsd_sweep.summarize.checkpoints import step_of
from opsd_sweep.summarize.collapses import collapse_columns
from opsd_sweep.summarize.drift import drift_columns
from opsd_sweep.summarize.metric_scope import K_DEPENDENT, PASS_AT, problem_set
from opsd_sweep.run.keys import NON_SEMANTIC_FIELDS, NON_SEMANTIC_SUBFIELDS
from opsd_sweep.inference.design import stratified_score
from opsd_sweep.run.identity import grader_of
from opsd_sweep.run.keys import EVAL_ONLY
from opsd_sweep.run.record import RunRecord, UnreadableRun
from opsd_sweep.run.rundir import RunDir, find_run_dirs
from opsd_sweep.selector import SHORT_NAMES

TAIL_FRACTION = 0.10  # "final" training diagnostics = mean over the last 10% of steps
# Knobs that only shape training: an untrained run (train.max_steps=0, the base model) ignores them.
TRAINING_KNOBS = ("cfg.learning_rate", "cfg.clip", "cfg.loss_top_k", "cfg.train.", "cfg.loss.", "cfg.rollout.",
                  "cfg.data.")
BASE_MODEL_LABEL = "base model"


def is_base_model(label: object) -> bool:
    """Whether a config label names an untrained base model (train.max_steps=0)."""
    return str(label).startswith(BASE_MODEL_LABEL)

SAMPLE_COLUMNS = ["run_id", "problem", "problem_index", "sample", "correct", "formatted", "tokens",
                  "finish_reason"]


@dataclass
class Collection:
    runs: pd.DataFrame  # one row per run: identity, label, cfg.* (varying), state, metrics, diagnostics
    samples: pd.DataFrame  # one row per run x problem x sample (SAMPLE_COLUMNS)
    skipped: pd.DataFrame  # path, state, reason: every run dir the statistics do not use
    fixed: dict  # config values shared by every run-dir run (for the report header)
    anchors: list[dict] = field(default_factory=list)  # distinct `anchor` sections of the runs' configs


# --- reading one run -----------------------------------------------------------------------------

def flatten(data: dict, prefix: str = "") -> dict:
    """Nested dict -> {dotted.name: value}; lists become tuples so they can be grouped on."""
    flat = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat |= flatten(value, f"{name}.")
        else:
            flat[name] = tuple(value) if isinstance(value, list) else value
    return flat


def training_diagnostics(steps: list[dict]) -> dict:
    """Per numeric key of metrics.jsonl: `train.<key>.last` and `train.<key>.tail` (mean of the last 10%)."""
    if not steps:
        return {}
    tail = steps[-max(1, math.ceil(TAIL_FRACTION * len(steps))):]
    out: dict = {"train.steps": int(steps[-1]["step"])}
    for key in steps[-1]:
        if key == "step" or not isinstance(steps[-1][key], (int, float)) or isinstance(steps[-1][key], bool):
            continue
        values = [s[key] for s in tail if isinstance(s.get(key), (int, float))]
        out[f"train.{key}.last"] = float(steps[-1][key])
        out[f"train.{key}.tail"] = float(np.mean(values))
    return out


def last_metrics_value(steps: list[dict], key: str):
    """`key` of the newest metrics line that has it (e.g. the resolved rollout backend), or None."""
    return next((record[key] for record in reversed(steps) if key in record), None)


def eval_metrics(evaluation: dict) -> dict:
    """The evaluator's metrics flattened: avg_at_n, pass_at_<k> for every k, maj_at_n, rates, tokens;
    an eval suite adds `pooled` and each benchmark's own as `<benchmark>.<metric>`."""
    metrics = evaluation["metrics"]
    out = _flat_metrics(metrics)
    for name, own in (evaluation.get("benchmarks") or {}).items():
        out |= {f"{name}.{key}": value for key, value in _flat_metrics(own).items()}
    out["checkpoint_step"] = step_of(evaluation)  # the final one (eval.checkpoints=all: checkpoints.csv has all)
    out["n_problems"] = evaluation.get("n_problems")
    out["n_samples"] = evaluation.get("n_samples")
    return out


def _flat_metrics(metrics: dict) -> dict:
    out = {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float))}
    return out | {f"pass_at_{k}": float(v) for k, v in (metrics.get("pass_at_k") or {}).items()}


def sample_rows(run_id: str, evaluation: dict) -> list[tuple]:
    rows = []
    for index, problem in enumerate(evaluation.get("problems") or []):
        for j, sample in enumerate(problem.get("samples") or []):
            rows.append((run_id, str(problem.get("id", index)), index, j, bool(sample["correct"]),
                         bool(sample.get("formatted", False)), sample.get("n_tokens"), sample.get("finish_reason")))
    return rows


def eval_variance_points(samples: list[tuple]) -> float:
    """V_eval of the run's score in percent points^2, from its own samples: design.stratified_score's variance
    (1/P^2) sum_i p_i (1 - p_i) / (n_i - 1), so each run at its own K and an allocated run at its own per-problem
    counts; nan when a problem has fewer than 2 samples."""
    if not samples:
        return math.nan
    index = np.array([row[2] for row in samples])
    present = np.unique(index)
    drawn = np.bincount(index)[present]
    solved = np.bincount(index, weights=np.array([row[4] for row in samples], dtype=float))[present]
    return 1e4 * stratified_score(solved, drawn).eval_var


def sampling_columns(config: dict, evaluation: dict) -> dict:
    """runs.csv's columns of the samples per problem a run used and why (summarize/sampling.py reads them):
    k_source (declared | auto), k_reason, allocation (uniform | neyman), allocation_reason, samples_min/max."""
    declared = (config.get("eval") or {}).get("n_samples")
    choice, allocation = evaluation.get("k_choice") or {}, evaluation.get("allocation") or {}
    sizes = [len(p.get("samples") or []) for p in evaluation.get("problems") or []]
    return {"k_source": "auto" if declared == "auto" else "declared",
            "k_reason": choice.get("reason") or f"declared eval.n_samples={evaluation.get('n_samples')}",
            "allocation": allocation.get("kind", "uniform"),
            "allocation_reason": allocation.get("reason"),
            "samples_min": min(sizes, default=math.nan), "samples_max": max(sizes, default=math.nan)}


def rollout_cap_frac(steps: list[dict]) -> float:
    """The share of training rollouts cut at rollout.max_new_tokens: the mean over steps of the trainer's per-step
    `rollout_cap_frac`; nan when no step logged it (a simulated run, a run that never trained)."""
    values = [s["rollout_cap_frac"] for s in steps if _is_number(s.get("rollout_cap_frac"))]
    return float(np.mean(values)) if values else math.nan


def eval_cap_frac(evaluation: dict, max_new_tokens: int | None) -> float:
    """The share of eval.json's samples cut at the length cap: finish_reason 'length' (the evaluator's mark of a
    sample that stopped for length, not at EOS), or, for a sample without a finish_reason, n_tokens >=
    max_new_tokens (eval.max_new_tokens); nan when no sample says either."""
    cut = [_was_cut(s, max_new_tokens) for p in evaluation.get("problems") or [] for s in p.get("samples") or []]
    cut = [c for c in cut if c is not None]
    return sum(cut) / len(cut) if cut else math.nan


def _was_cut(sample: dict, max_new_tokens: int | None) -> bool | None:
    if sample.get("finish_reason") is not None:
        return sample["finish_reason"] == "length"
    if _is_number(sample.get("n_tokens")) and _is_number(max_new_tokens):
        return sample["n_tokens"] >= max_new_tokens
    return None


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def cap_columns(config: dict, steps: list[dict], evaluation: dict | None) -> dict:
    """runs.csv's length-cap columns: the share of training rollouts and of eval samples cut at their cap
    (rollout_cap_frac, eval_cap_frac; nan where the run has none), each beside its cap and its thinking switch,
    which the summary's cap warning names (summarize.caps)."""
    train, rollout, evaluate = (config.get(name) if isinstance(config.get(name), dict) else {}
                                for name in ("train", "rollout", "eval"))
    return {"rollout_cap_frac": rollout_cap_frac(steps), "rollout_max_new_tokens": rollout.get("max_new_tokens"),
            "student_thinking": train.get("student_thinking"),
            "eval_cap_frac": eval_cap_frac(evaluation, evaluate.get("max_new_tokens")) if evaluation else math.nan,
            "eval_max_new_tokens": evaluate.get("max_new_tokens"), "eval_thinking": evaluate.get("thinking")}


def read_run(record: RunRecord, run_id: str) -> tuple[dict, list[tuple]]:
    """One run record -> (row, sample rows), both under `run_id` (unique_run_id): samples only of a run that
    counts (RunRecord.counts), so a known-wrong or unfinished evaluation enters no statistic, plot or table.
    Raises UnreadableRun."""
    row = {"run_id": run_id, "run_dir": str(record.path), "source": str(record.path.parent),
           "external": False, "simulated": record.simulated, "state": record.state, "counts": record.counts,
           "left_out": record.left_out}
    row |= {f"cfg.{k}": v for k, v in flatten(record.config).items()}
    inputs = record.inputs or {name: UNRECORDED for name in input_names(record.config, record.kind)}
    row |= {f"{IDENTITY}{name}": identity for name, identity in inputs.items()}
    row |= record.gpu_hours | {"ended_at": record.status.get("ended_at")}
    row |= training_diagnostics(record.steps) | collapse_columns(record.collapse)
    row["rollout_backend"] = last_metrics_value(record.steps, "rollout_backend")
    samples: list[tuple] = []
    if record.evaluation is not None:
        row |= eval_metrics(record.evaluation)
        row["eval_backend"] = record.evaluation.get("backend")
        row["problem_set"], row["problem_words"] = problem_set(record.evaluation)
        row["eval_problem"] = record.eval_problem
        row["grader"], row["grader_problem"] = grader_of(record.evaluation), record.grader_problem
        try:
            run_samples = sample_rows(run_id, record.evaluation)
        except (KeyError, TypeError, AttributeError) as err:
            raise UnreadableRun(f"eval.json problems/samples malformed ({err!r})") from err
        row["eval_var"] = eval_variance_points(run_samples)
        row |= sampling_columns(record.config, record.evaluation)
        samples = run_samples if record.counts else []
    row |= cap_columns(record.config, record.steps, record.evaluation)  # after its samples proved readable
    row |= drift_columns(record.run_dir.eval_dir, record.evaluation)
    return row, samples


IDENTITY = "id."  # columns of the recorded identity of each input: id.data, id.eval, id.eval.suite.<name>, ...
UNRECORDED = "unrecorded"  # written before records, its inputs not provably unchanged


def input_names(config: dict, kind: str | None) -> list[str]:
    """The inputs a run's results depend on, by name (run.keys: a cycle's or a standalone evaluation's)."""
    suite = [f"eval.suite.{name}" for name in ((config.get("eval") or {}).get("suite") or {})]
    return ["model", "eval", *suite, "checkpoint" if kind == EVAL_ONLY else "data"]


# --- external results ----------------------------------------------------------------------------

def read_external(path: str, metric_hint: str = "avg_at_n") -> pd.DataFrame:
    """A CSV of per-run results from elsewhere: columns `config` (label), `run_id`, metric columns.

    Optional columns: `seed` (copied to cfg.seed), any cfg.* column and text columns (a `reference`). Rows are
    marked external. A metric column is one named as an eval.json metric (avg_at_n, pass_at_4, ..., optionally
    `<benchmark>.`-prefixed) or one whose values are mostly numbers; each of its cells must be a number or empty.
    Raises ValueError naming the file, the line and column, and the fix, for a file that cannot be read, a
    missing column or a metric cell that is not a number.
    """
    form = f"it needs `config` (a label), `run_id` and metric columns such as `{metric_hint}`"
    try:
        frame = pd.read_csv(path)
    except FileNotFoundError:
        raise ValueError(f"external CSV {path} does not exist; give --external the path of a CSV file ({form}), "
                         "e.g. analysis/external/published_opsd_aime24.csv") from None
    except (OSError, ValueError) as err:  # a directory, no permission, not a CSV (pandas' errors are ValueErrors)
        raise ValueError(f"external CSV {path} cannot be read as a CSV ({err}); {form}") from None
    missing = [c for c in ("config", "run_id") if c not in frame.columns]
    if missing:
        raise ValueError(f"external CSV {path}: missing column(s) {missing}; {form}")
    names = {"avg_at_n", "format_rate", "truncation_rate", "mean_tokens", "pooled", metric_hint, *K_DEPENDENT}
    bad = []
    for column in frame.columns.drop(["config", "run_id"]):
        if column == "seed" or column.startswith("cfg."):
            continue
        given = frame[column].notna()
        numbers = pd.to_numeric(frame[column], errors="coerce")
        name = column.rsplit(".", 1)[-1]
        if name in names or PASS_AT.fullmatch(name) or numbers[given].notna().sum() * 2 > given.sum():
            bad += [(index, column, frame.at[index, column]) for index in frame.index[given & numbers.isna()]]
            frame[column] = numbers
    if bad:  # line: the CSV's line number (its header is line 1)
        cells = "; ".join(f"line {index + 2} (run_id {frame.at[index, 'run_id']!r}), column {column!r}: {value!r}"
                          for index, column, value in bad[:5])
        more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
        raise ValueError(f"external CSV {path}: metric values that are not numbers: {cells}{more}; write each score "
                         "as a number (e.g. 54.2), or leave the cell empty for a run without that metric")
    frame = frame.rename(columns={"config": "label"})
    if "seed" in frame.columns:
        frame = frame.rename(columns={"seed": "cfg.seed"})
    frame["run_id"] = frame["run_id"].astype(str)
    frame["label"] = frame["label"].astype(str) + " [external]"
    return frame.assign(source=str(path), external=True, simulated=False, state="done", counts=True, run_dir=None)


# --- labels and varying columns ------------------------------------------------------------------

def _semantic(column: str) -> bool:
    parts = column.removeprefix("cfg.").split(".")
    if parts[0] in NON_SEMANTIC_FIELDS:
        return False
    return not (len(parts) > 1 and parts[1] in NON_SEMANTIC_SUBFIELDS.get(parts[0], ()))


def varying_columns(runs: pd.DataFrame, exclude: tuple[str, ...] = ("cfg.seed",)) -> list[str]:
    """Semantic config columns whose value differs between run-dir runs (the sweep's axes), seed excluded."""
    own = runs[~runs["external"].astype(bool)] if "external" in runs else runs
    columns = [c for c in runs.columns if c.startswith("cfg.") and c not in exclude and _semantic(c)]
    return [c for c in columns if own[c].astype(str).nunique(dropna=False) > 1]


def _format_value(value) -> str:
    if isinstance(value, float):
        return "none" if math.isnan(value) else f"{value:g}"
    return str(value)


def short_names(columns: list[str]) -> dict[str, str]:
    """cfg.train.lora.r -> 'r' when unambiguous, else the shortest unique dotted suffix; a key of SHORT_NAMES by
    its name there (learning_rate -> lr, rollout.max_new_tokens -> rollout_max_tokens)."""
    names = {}
    for column in columns:
        parts = column.removeprefix("cfg.").split(".")
        for depth in range(1, len(parts) + 1):
            name = ".".join(parts[-depth:])
            if sum(c.removeprefix("cfg.").endswith(name) for c in columns) == 1:
                break
        names[column] = SHORT_NAMES.get(column.removeprefix("cfg."), name)
    return names


def varying_identities(runs: pd.DataFrame) -> list[str]:
    """The id.* columns (recorded input identities) whose value differs between run-dir runs."""
    own = runs[~runs["external"].astype(bool)] if "external" in runs else runs
    return [c for c in runs.columns if c.startswith(IDENTITY) and own[c].astype(str).nunique(dropna=False) > 1]


def identity_label(row: pd.Series, column: str) -> str:
    """'data=F.jsonl#1a2b3c4d': the input by file name and a digest of its identity (an input edited in
    place keeps its name and gets another digest)."""
    name = column.removeprefix(IDENTITY)
    path = row.get(f"cfg.{name}.path", row.get("cfg.eval.checkpoint") if name == "checkpoint" else None)
    identity = str(row[column])
    digest = identity if identity == UNRECORDED else hashlib.sha256(identity.encode()).hexdigest()[:8]
    return f"{name}={Path(str(path)).name if path else identity}#{digest}"


def inputs_to_name(runs: pd.DataFrame, labels: pd.Series, identities: list[str]) -> dict:
    """Per run, the id.* columns its label must name: those whose identity differs between runs that would
    otherwise share its label (e.g. seeds of one config run before and after an input was edited in place).
    An input that differs only between runs of different labels (a standalone evaluation has no data) is
    not named."""
    own = ~runs["external"].astype(bool) if "external" in runs else pd.Series(True, index=runs.index)
    named: dict = {index: [] for index in runs.index}
    for _, group in runs[own].groupby(labels[own], sort=False):
        for column in identities:
            if group[column].astype(str).nunique(dropna=False) > 1:
                for index in group.index:
                    named[index].append(column)
    return named


def label_runs(runs: pd.DataFrame, axes: list[str], named_inputs: dict | None = None) -> pd.Series:
    """A short human label per run from its varying columns, e.g. 'lr=5e-06 clip=0.05 [simulated]', and the
    inputs `named_inputs` gives it (inputs_to_name; identity_label); an untrained run (train.max_steps=0) is
    'base model' whatever its training knobs say."""
    names = short_names(axes)
    labels = []
    for index, row in runs.iterrows():
        if row.get("external"):
            labels.append(row["label"])
            continue
        untrained = row.get("cfg.train.max_steps") == 0
        parts = [BASE_MODEL_LABEL] if untrained else []
        parts += [f"{names[c]}={_format_value(row[c])}" for c in axes
                  if not (untrained and c.startswith(TRAINING_KNOBS))]
        parts += [identity_label(row, c) for c in (named_inputs or {}).get(index, [])
                  if not (untrained and c == f"{IDENTITY}data")]
        label = " ".join(parts) or "all runs"
        labels.append(f"{label} [simulated]" if row.get("simulated") else label)
    return pd.Series(labels, index=runs.index, dtype=object)


# --- the scan ------------------------------------------------------------------------------------

def collect(roots: list[str], external: list[str] = (), progress=None) -> Collection:
    """Read every run dir under `roots` and every external CSV into a Collection.

    Args:
        roots: results roots or globs.
        external: paths of external result CSVs (see `read_external`).
        progress: optional callable wrapping an iterable (e.g. tqdm) to show progress.
    """
    run_dirs = distinct_run_dirs(find_run_dirs(roots))
    rows, samples, skipped, taken = [], [], [], set()
    for run_dir in (progress(run_dirs) if progress else run_dirs):
        try:
            record = RunRecord.read(run_dir)
            row, run_samples = read_run(record, unique_run_id(record, taken))
        except UnreadableRun as err:
            skipped.append({"path": str(run_dir.path), "state": "unreadable", "reason": str(err)})
            continue
        taken.add(row["run_id"])
        rows.append(row)
        samples.extend(run_samples)
        if row["left_out"]:
            skipped.append({"path": str(run_dir.path), "state": row["state"], "reason": row["left_out"]})
    runs = pd.DataFrame(rows)
    if not runs.empty:
        runs, repeated = count_each_run_once(runs)
        skipped += repeated
        kept = set(runs["run_id"])
        samples = [sample for sample in samples if sample[0] in kept]  # a repeated copy's samples go with it
    fixed, anchors = {}, []
    if not runs.empty:
        # a failed or unfinished run never decides the anchor (it may have been configured with another)
        anchors = configured_anchors(runs[runs["counts"].astype(bool)])
        axes = varying_columns(runs)
        fixed = {c: runs[c].iloc[0] for c in runs.columns if c.startswith("cfg.") and c not in axes
                 and c != "cfg.seed" and _semantic(c)}
        # nothing swept: name runs by the learning rate, so they read well beside external results
        identities = varying_identities(runs)
        # the [simulated] mark says the executor; an input whose identity varies is named by its identity
        named = [c for c in axes if c != "cfg.executor"
                 and not any(c.startswith(f"cfg.{i.removeprefix(IDENTITY)}.path") for i in identities)]
        named = named or [c for c in ("cfg.learning_rate",) if c in runs]
        runs["label"] = label_runs(runs, named, inputs_to_name(runs, label_runs(runs, named), identities))
        keep = [c for c in runs.columns if not c.startswith("cfg.") or c in axes or c == "cfg.seed"]
        runs = runs[keep].copy()
    frames = [runs] + [read_external(path) for path in external]
    runs = pd.concat([f for f in frames if not f.empty], ignore_index=True) if any(not f.empty for f in frames) \
        else pd.DataFrame(columns=["run_id", "label", "state", "external", "simulated"])
    samples_frame = pd.DataFrame(samples, columns=SAMPLE_COLUMNS)
    return Collection(runs=_order_columns(runs), samples=samples_frame,
                      skipped=pd.DataFrame(skipped, columns=["path", "state", "reason"]), fixed=fixed,
                      anchors=anchors)


def distinct_run_dirs(run_dirs: list[RunDir]) -> list[RunDir]:
    """Each dir once, however many roots or globs reach it (a nested root, a link to a root): by its resolved
    path, under the first path it was found at."""
    seen: set[Path] = set()
    distinct = []
    for run_dir in run_dirs:
        if (real := run_dir.path.resolve()) not in seen:
            seen.add(real)
            distinct.append(run_dir)
    return distinct


def unique_run_id(record: RunRecord, taken: set[str]) -> str:
    """The run's id in the runs and samples tables: its run key, or '<parent folder>/<key>' when another dir
    took the key first, in scan order (the key leaves the group out, so one config and seed run in two groups
    share it), or its resolved path when even that is taken (a third dir of the key in one folder, or two
    roots with a folder of one name). Distinct dirs never share an id, so their rows and samples never mix;
    count_each_run_once then decides which copy counts."""
    key = record.run_id
    qualified = f"{record.path.parent.name}/{key}"
    return next((c for c in (key, qualified) if c not in taken), str(record.path.resolve()))


def count_each_run_once(runs: pd.DataFrame) -> tuple[pd.DataFrame, list[dict]]:
    """Finished runs of one config, input identities and seed in two dirs (another group, or one written
    before a change of the run key) are one run, not two seeds: the last finished one is kept, the others
    are left out and listed. A copy that does not count (failed, unfinished) stays, listed with its state."""
    done = runs[runs["counts"].astype(bool)]
    same_run = [c for c in runs.columns if (c.startswith("cfg.") and _semantic(c)) or c.startswith(IDENTITY)]
    identity = [json.dumps(r, sort_keys=True, default=str) for r in done[same_run].to_dict("records")]
    order = done.assign(same_as=identity).sort_values("ended_at", na_position="first", kind="stable")
    kept = order.drop_duplicates("same_as", keep="last")
    left = order[~order.index.isin(kept.index)]
    twin = dict(zip(kept["same_as"], kept["run_dir"]))
    listed = [{"path": row.run_dir, "state": "repeated",
               "reason": f"the same config and seed as {twin[row.same_as]}, which finished later: counted once"}
              for row in left.itertuples()]
    return runs.drop(index=left.index), listed


def configured_anchors(runs: pd.DataFrame) -> list[dict]:
    """The distinct published anchors (config section `anchor`; `baseline` in run dirs written before the
    rename, read as `anchor`: run/added.py) that the runs were configured with."""
    columns = [c for c in runs.columns if c.startswith("cfg.anchor.")]
    if not columns:
        return []
    distinct = runs[columns].dropna(how="all").drop_duplicates()
    return [{c.removeprefix("cfg.anchor."): v for c, v in row.items()} for row in distinct.to_dict("records")]


def left_out_line(skipped: pd.DataFrame, report: Path) -> str:
    """One console line: how many run dirs the statistics left out, by state, and where they are listed."""
    counts = skipped["state"].value_counts()
    kinds = ", ".join(f"{count} {state}" for state, count in counts.items())
    return (f"{len(skipped)} run dirs left out of the statistics ({kinds}): only finished runs with eval results "
            f"count; each is listed with its reason in {report}")


def _order_columns(runs: pd.DataFrame) -> pd.DataFrame:
    head = [c for c in ("run_id", "label", "cfg.seed", "state", "counts", "left_out", "external", "simulated")
            if c in runs]
    cfg = sorted(c for c in runs.columns if c.startswith("cfg.") and c not in head)
    rest = [c for c in runs.columns if c not in head and c not in cfg]
    return runs[head + cfg + rest]
