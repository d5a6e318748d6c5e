"""`python -m opsd_sweep.evaluate regrade RESULTS...`: grade stored completions again with today's grader, on CPU.

RESULTS is a results root, a group dir or a run dir (anything the summary reads). Every eval.json of each run
(eval/eval.json and, with eval.checkpoints=all or race, eval/checkpoint-*/eval.json) whose evaluator record names
another grader than today's, or none (run.identity.grader_problem), is graded again from the completions.jsonl
beside it: each sample's pred, correct and formatted, the metrics (scoring/metrics.py, as the evaluator computes
them) and the grader in its evaluator record. Nothing is generated and no GPU is used.

The old scores are kept in the same file, under `regraded_from` (a list, oldest first): the grader they came from,
its metrics (and an eval suite's per-benchmark metrics), when they were replaced, and the old grade of every sample
whose grade changed, so the old eval.json can be rebuilt. Each eval.json is replaced atomically
(run.rundir.atomic_write_json): a kill leaves the old file or the new one. A file that cannot be graded again (no
completions.jsonl, a sample without its text) is named with its fix, and the command exits 1.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from opsd_sweep.scoring.grade import grade_many, grader_identity
from opsd_sweep.scoring.metrics import score_fields
from opsd_sweep.run.identity import grader_label, grader_problem, recorded_grader
from opsd_sweep.run.rundir import RunDir, atomic_write_json, find_run_dirs, read_json, utc_now

COMMAND = "python -m opsd_sweep.evaluate regrade"
GRADE_FIELDS = ("pred", "correct", "formatted")  # what grading decides of a sample; the rest is generation's


class CannotRegrade(ValueError):
    """An eval.json whose samples cannot be graded again; the message names the file and the fix."""


def eval_files(run_dir: RunDir) -> list[Path]:
    """A run's eval.json files: the final evaluation's and each earlier checkpoint's (eval.checkpoints=all, race)."""
    return [path for path in (run_dir.eval_json, *sorted(run_dir.eval_dir.glob("checkpoint-*/eval.json")))
            if path.is_file()]


def stored_texts(eval_json: Path) -> dict[tuple[str, int], str]:
    """completions.jsonl beside `eval_json`: (problem id, sample index) -> the sample's text."""
    path = eval_json.parent / "completions.jsonl"
    if not path.is_file():
        raise CannotRegrade(f"{eval_json}: no completions.jsonl beside it (written before completions were stored), "
                            "so there is nothing to grade again; evaluate it again (a rerun of its sweep, after "
                            "deleting this eval.json)")
    texts = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        try:
            row = json.loads(line)
            texts[str(row["id"]), int(row["sample"])] = str(row["text"])
        except (ValueError, KeyError, TypeError) as err:
            raise CannotRegrade(f"{path}: line {number} is not a completion record ({err!r}); evaluate it again "
                                "(a rerun of its sweep, after deleting the eval.json beside it)") from None
    return texts


def regraded(evaluation: dict, texts: dict[tuple[str, int], str], timeout: int, workers: int,
             where: Path) -> dict:
    """`evaluation` with every sample graded again by today's grader, today's metrics and grader, and the old
    scores appended to `regraded_from`."""
    problems = evaluation["problems"]
    keyed = [((str(p["id"]), s), str(p["answer"])) for p in problems for s in range(len(p["samples"]))]
    if missing := [key for key, _ in keyed if key not in texts]:
        raise CannotRegrade(f"{where}: completions.jsonl lacks the text of {len(missing)} of its {len(keyed)} samples "
                            f"(first: problem {missing[0][0]} sample {missing[0][1]}); evaluate it again")
    grades = iter(grade_many([(texts[key], answer) for key, answer in keyed], timeout, workers, progress=False))
    changed, new_problems = [], []
    for problem in problems:
        samples = []
        for index, sample in enumerate(problem["samples"]):
            grade = next(grades)
            now = {"pred": grade.pred, "correct": grade.correct, "formatted": grade.formatted}
            was = {field: sample.get(field) for field in GRADE_FIELDS}
            if was != now:
                changed.append({"id": problem["id"], "sample": index, "was": was})
            samples.append(sample | now)
        new_problems.append(problem | {"samples": samples})
    old = {"grader": recorded_grader(evaluation), "metrics": evaluation.get("metrics"), "replaced_at": utc_now(),
           "changed_samples": changed}
    if "benchmarks" in evaluation:
        old["benchmarks"] = evaluation["benchmarks"]
    record = evaluation.get("evaluator") if isinstance(evaluation.get("evaluator"), dict) else {}
    return (evaluation | {"problems": new_problems}
            | score_fields(new_problems, suite="benchmarks" in evaluation)
            | {"evaluator": record | {"grader": grader_identity()},
               "regraded_from": [*evaluation.get("regraded_from", []), old]})


def regrade_file(eval_json: Path, timeout: int, workers: int) -> dict | None:
    """Grade one eval.json again when its grader is not today's, and write it; returns the old scores' record
    (its `regraded_from` entry), or None when it was already graded by today's grader (or never graded:
    a simulated run). Raises CannotRegrade."""
    evaluation = read_json(eval_json)
    if not isinstance(evaluation, dict) or not isinstance(evaluation.get("problems"), list):
        raise CannotRegrade(f"{eval_json}: not an eval.json with problem records; evaluate it again")
    if grader_problem(evaluation) is None:
        return None
    new = regraded(evaluation, stored_texts(eval_json), timeout, workers, eval_json)
    atomic_write_json(eval_json, new)
    return new["regraded_from"][-1]


def grading_settings(run_dir: RunDir, workers: int | None) -> tuple[int, int]:
    """(timeout, workers) of the run's own eval config (eval.grade_timeout, eval.grade_workers); `workers`, when
    given, replaces the run's."""
    settings = run_dir.read_config_dict().get("eval") or {}
    timeout = settings.get("grade_timeout")
    if not isinstance(timeout, int) or timeout < 1:
        raise CannotRegrade(f"{run_dir.config}: eval.grade_timeout={timeout!r} is not a number of seconds >= 1; "
                            "set it there (conf/eval's default is 5)")
    return timeout, workers if workers is not None else int(settings.get("grade_workers") or 0)


def regrade(roots: Sequence[str | Path], workers: int | None = None, progress: bool = True) -> dict[str, list]:
    """Grade every eval.json under `roots` that today's grader did not grade; returns {'regraded': [(path, old
    record)], 'current': [path], 'failed': [(path, why)]}."""
    from tqdm import tqdm

    run_dirs = [run_dir for run_dir in find_run_dirs(list(roots)) if run_dir.config.exists()]
    jobs = [(run_dir, path) for run_dir in run_dirs for path in eval_files(run_dir)]
    done: dict[str, list] = {"regraded": [], "current": [], "failed": []}
    for run_dir, path in tqdm(jobs, desc="regrading", unit="eval.json", disable=not progress or not jobs):
        try:
            old = regrade_file(path, *grading_settings(run_dir, workers))
        except (CannotRegrade, OSError, ValueError) as err:
            done["failed"].append((path, str(err) if isinstance(err, CannotRegrade) else f"{path}: {err!r}"))
            continue
        done["regraded" if old is not None else "current"].append((path, old) if old is not None else path)
    return done


def report_lines(done: dict[str, list]) -> list[str]:
    """What regrade did, in lines: one per file graded again (its old grader, the samples whose grade changed,
    avg@n before and after), a count of those left as they are, and each failure with its fix."""
    lines = []
    for path, old in done["regraded"]:
        after = read_json(path)["metrics"].get("avg_at_n")
        before = (old.get("metrics") or {}).get("avg_at_n")
        lines.append(f"regraded {path}: was {grader_label(old['grader'])}, {len(old['changed_samples'])} samples "
                     f"changed grade, avg_at_n {_points(before)} -> {_points(after)}")
    lines.append(f"{len(done['regraded'])} eval.json graded again by {grader_label(grader_identity())} (the old scores "
                 f"are kept under regraded_from); {len(done['current'])} left as they are (graded by it already, or "
                 f"simulated: never graded); "
                 f"{len(done['failed'])} could not be graded again")
    lines += [f"cannot regrade: {why}" for _, why in done["failed"]]
    return lines


def _points(value) -> str:
    return f"{value:.2f}" if isinstance(value, (int, float)) else "?"


def main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("roots", nargs="+", metavar="RESULTS", help="results roots, group dirs or run dirs")
    parser.add_argument("--workers", type=int, default=None,
                        help="grading processes (0 = the main thread); default: each run's eval.grade_workers")
    args = parser.parse_args(argv)
    if args.workers is not None and args.workers < 0:
        raise SystemExit(f"--workers {args.workers}: must be >= 0 (0 = grade in the main thread)")
    done = regrade(args.roots, args.workers)
    if not any(done.values()):
        raise SystemExit(f"{COMMAND}: no eval.json of a run dir under {' '.join(args.roots)}; pass a results root, a "
                         "group dir or a run dir")
    print("\n".join(report_lines(done)), flush=True)
    if done["failed"]:
        raise SystemExit(1)
