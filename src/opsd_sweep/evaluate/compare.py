"""`python -m opsd_sweep.evaluate compare`: may evaluator B replace evaluator A, and what does showing it cost?

    python -m opsd_sweep.evaluate compare A B [--margin M] [--level L] [--power P] [--budget-gpu-min G]
    python -m opsd_sweep.evaluate compare --plan A B [--margin M] [--level L] [--power P] [--budget-gpu-min G]

A and B are two finished evaluations of the same checkpoint (run dirs, their eval/ dirs or eval.json files),
each run with the standalone command under one evaluator setting, e.g.

    python -m opsd_sweep.evaluate eval.checkpoint=CKPT eval.backend=vllm group=exact
    python -m opsd_sweep.evaluate eval.checkpoint=CKPT eval.backend=vllm eval.kv_cache_dtype=fp8 group=fp8

They must have scored the same checkpoint (by content), model, problems, samples per problem, seed (so the
same per-sample seeds) and sampling; otherwise compare refuses and names each difference with its fix. An
allocated evaluation (eval.allocation=neyman: each problem its own count) is compared on the samples both
drew: sample s of problem p has the same seed in both, so each problem's first min(n_A, n_B) samples pair.
The paired per-problem difference B - A (points) with its intervals and the TOST verdict at +-margin
(opsd_sweep.inference.equivalence) is printed as one line and written to B's eval dir as
compare_<A's group>_<A's run dir name>.json, with both evaluator records and the settings that differ.

What showing equivalence costs (evaluate/compare_plan.py): with --plan, A and B are pilots (a few samples a
problem under each evaluator, the same seed), and compare prints the samples a problem per arm K at which TOST at
+-margin shows equivalence with --power (default 0.8) if B has no effect, and the GPU-minutes of both arms at K
(priced from each pilot's own token counts), then exits: 0 when the plan can be spent, 1 when it is refused
(over --budget-gpu-min, both arms together, naming the margin the budget can show; or no K reaches the margin).
Without --plan, a verdict that is not "equivalent" is followed by the same plan line, A and B as its pilot, and
is recorded with it (a refusal there is advice: the verdict stands and compare exits 0).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from opsd_sweep.evaluate.compare_plan import ComparePlan, check_inputs, plan_compare
from opsd_sweep.inference.equivalence import EQUIVALENT, Equivalence, paired_equivalence
from opsd_sweep.run.identity import evaluator_problem
from opsd_sweep.run.rundir import RunDir, atomic_write_json, read_json_or_none, utc_now

MARGIN = 1.0   # points: a faster evaluator may replace the exact one when B - A lies within +-1 point
LEVEL = 0.95   # coverage of the reported interval; TOST runs at alpha = 1 - LEVEL (its 90% interval)
POWER = 0.8    # a plan's chance of showing equivalence when B has no effect

COMMAND = "python -m opsd_sweep.evaluate compare"
ESTIMAND = ("mean over problems of (solve rate under B - solve rate under A), percent points; "
            "t-interval over problems (df = n_problems - 1)")


class NotComparable(ValueError):
    """The two evaluations differ in more than the evaluator (every difference is named with its fix)."""


@dataclass(frozen=True)
class Evaluation:
    """One finished evaluation as compare reads it."""

    given: str                # the path as the user gave it
    eval_json: Path
    result: dict              # eval.json
    run_dir: RunDir | None    # the run dir holding it (config.yaml), if any
    config: dict | None       # its config.yaml

    @property
    def label(self) -> str:
        """<group>_<run dir name> (the eval dir's names without a run dir), safe as a file name."""
        where = self.run_dir.path if self.run_dir else self.eval_json.parent
        return re.sub(r"[^A-Za-z0-9._-]+", "_", f"{where.parent.name}_{where.name}")

    def section(self, name: str) -> dict:
        return (self.config or {}).get(name) or {}


def read_evaluation(path: str | Path) -> Evaluation:
    """A finished evaluation from a run dir, its eval dir or an eval.json; NotComparable says what is missing."""
    given = Path(path).expanduser().absolute()
    found = [p for p in (given, given / "eval.json", given / "eval" / "eval.json") if p.is_file()]
    if not found:
        raise NotComparable(f"{given}: no eval.json there nor in its eval/; pass a finished evaluation's run dir "
                            "(python -m opsd_sweep.evaluate model=... eval=... prints it) or its eval.json")
    eval_json = found[0]
    result = read_json_or_none(eval_json)
    if not (isinstance(result, dict) and {"problems", "n_samples", "metrics"} <= result.keys()):
        raise NotComparable(f"{eval_json} does not read back as an evaluation (torn or not an eval.json); "
                            "run its evaluation again (the same command resumes it)")
    holder = next((p for p in list(eval_json.parents)[:3] if (p / "config.yaml").is_file()), None)
    run_dir = RunDir(holder) if holder else None
    try:
        config = run_dir.read_config_dict() if run_dir else None
    except (OSError, ValueError) as err:  # yaml's errors are ValueErrors
        raise NotComparable(f"{run_dir.config} does not read: {err}") from None
    state = run_dir.read_status().get("state") if run_dir else None
    if state not in (None, "done"):
        raise NotComparable(f"{run_dir.path} is {state}, not done: its eval.json may not be this evaluation's "
                            "final scores; let it finish (run its command again to resume it), then compare")
    return Evaluation(str(path), eval_json, result, run_dir, config)


# --- what must be the same -----------------------------------------------------------------------

def _checkpoint(result: dict) -> str:
    if result.get("checkpoint") is None:
        return "the base model"
    return f"{result['checkpoint']} ({result.get('checkpoint_identity')})"


def _same_checkpoint(ra: dict, rb: dict) -> bool:
    if ra.get("checkpoint") is None or rb.get("checkpoint") is None:
        return ra.get("checkpoint") is None and rb.get("checkpoint") is None
    if ra.get("checkpoint_identity") and rb.get("checkpoint_identity"):
        return ra["checkpoint_identity"] == rb["checkpoint_identity"]  # by content, wherever it lies
    return Path(ra["checkpoint"]).resolve() == Path(rb["checkpoint"]).resolve()  # records without identities


def _wrong_evaluator(name: str, e: Evaluation) -> str | None:
    checkpoint = Path(e.result["checkpoint"]) if e.result.get("checkpoint") else None
    why = evaluator_problem(e.result, checkpoint, bool(e.section("eval").get("merge_lora", False)))
    return None if why is None else (f"{name} ({e.eval_json}): {why}; evaluate it again (its standalone command "
                                     "re-evaluates it) before comparing")


def mismatches(a: Evaluation, b: Evaluation) -> list[str]:
    """Every way A and B differ besides the evaluator, each with its fix; [] when they are comparable."""
    if a.eval_json.resolve() == b.eval_json.resolve():
        return [f"A and B are the same evaluation ({a.eval_json}): evaluate the checkpoint a second time under the "
                "other setting, in another group (e.g. group=fp8), and compare the two run dirs"]
    ra, rb = a.result, b.result
    found = [why for why in (_wrong_evaluator("A", a), _wrong_evaluator("B", b)) if why]
    model_a = (ra.get("model"), (a.run_dir.read_identity() or {}).get("inputs", {}).get("model") if a.run_dir else None)
    model_b = (rb.get("model"), (b.run_dir.read_identity() or {}).get("inputs", {}).get("model") if b.run_dir else None)
    if model_a[0] != model_b[0] or (None not in (model_a[1], model_b[1]) and model_a[1] != model_b[1]):
        found.append(f"model: A scored {model_a[0]} ({model_a[1]}), B scored {model_b[0]} ({model_b[1]}): "
                     "evaluate one model= under both settings")
    if not _same_checkpoint(ra, rb):
        found.append(f"checkpoint: A scored {_checkpoint(ra)}, B scored {_checkpoint(rb)}: evaluate the same "
                     "eval.checkpoint (the same weights) under both settings")
    if ra.get("dataset") != rb.get("dataset"):
        found.append(f"dataset: A scored {ra.get('dataset')}, B scored {rb.get('dataset')}: evaluate both with "
                     "the same eval=")
    ids_a, ids_b = [p["id"] for p in ra["problems"]], [p["id"] for p in rb["problems"]]
    if set(ids_a) != set(ids_b):
        only_a, only_b = sorted(set(ids_a) - set(ids_b)), sorted(set(ids_b) - set(ids_a))
        found.append(f"problems: A has {len(ids_a)}, B has {len(ids_b)} ({len(only_a)} only in A{_some(only_a)}, "
                     f"{len(only_b)} only in B{_some(only_b)}): evaluate both with the same eval= and "
                     "eval.max_problems")
    answers_b = {p["id"]: p.get("answer") for p in rb["problems"]}
    other = [(p["id"], p.get("answer"), answers_b[p["id"]]) for p in ra["problems"]
             if p["id"] in answers_b and p.get("answer") != answers_b[p["id"]]]
    if other:
        found.append(f"answers: {len(other)} problem(s) have other reference answers (e.g. {other[0][0]}: A "
                     f"{other[0][1]!r}, B {other[0][2]!r}): the two read different eval tables; evaluate both with "
                     "the same eval.path")
    if ra["n_samples"] != rb["n_samples"] and not (allocated(ra) or allocated(rb)):
        found.append(f"n_samples: A drew {ra['n_samples']} samples per problem, B {rb['n_samples']}: evaluate "
                     f"both with the same eval.n_samples (e.g. eval.n_samples={max(ra['n_samples'], rb['n_samples'])}"
                     " for the one with fewer)")
    if ra.get("seed") != rb.get("seed"):
        found.append(f"seed: A {ra.get('seed')}, B {rb.get('seed')}: each sample's seed comes from the run seed, "
                     f"so pair them with the same seed= (e.g. seed={ra.get('seed')} for B)")
    sampling_a, sampling_b = ra.get("sampling") or {}, rb.get("sampling") or {}
    for key in sorted(set(sampling_a) | set(sampling_b)):
        if sampling_a.get(key) != sampling_b.get(key):
            setting = {"max_tokens": "max_new_tokens"}.get(key, key)
            found.append(f"sampling {key}: A {sampling_a.get(key)!r}, B {sampling_b.get(key)!r}: an evaluator "
                         f"comparison holds sampling fixed; evaluate both with the same eval.{setting}")
    prompt_a, prompt_b = a.section("eval").get("prompt"), b.section("eval").get("prompt")
    if None not in (prompt_a, prompt_b) and prompt_a != prompt_b:
        found.append(f"prompt: A {prompt_a!r}, B {prompt_b!r}: evaluate both with the same eval.prompt")
    return found


def _some(ids: list[str]) -> str:
    return f", e.g. {', '.join(ids[:3])}" if ids else ""


def settings_diff(a: Evaluation, b: Evaluation) -> dict[str, list]:
    """The model.* and eval.* settings whose values differ between A's and B's config.yaml: {key: [A, B]}
    ({} without both configs). Settings outside the run key (eval.hf_cache, eval.backend) show only here."""
    if a.config is None or b.config is None:
        return {}
    flat_a, flat_b = _flat(a.config, ("model", "eval")), _flat(b.config, ("model", "eval"))
    return {key: [flat_a.get(key), flat_b.get(key)] for key in sorted(set(flat_a) | set(flat_b))
            if flat_a.get(key) != flat_b.get(key)}


def _flat(config: dict, sections: Sequence[str]) -> dict:
    out = {}

    def walk(prefix: str, value) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                walk(f"{prefix}.{key}", inner)
        else:
            out[prefix] = value

    for name in sections:
        walk(name, config.get(name))
    return out


# --- the comparison ------------------------------------------------------------------------------

def allocated(result: dict) -> bool:
    """Whether an eval.json drew each problem its own count (eval.allocation=neyman)."""
    return bool(result.get("samples_per_problem"))


def common_samples(ra: dict, rb: dict, ids: list[str]) -> dict[str, int]:
    """Per problem, the samples both evaluations drew: the first min(n_A, n_B) (the same seeds in both)."""
    size_a = {p["id"]: len(p["samples"]) for p in ra["problems"]}
    size_b = {p["id"]: len(p["samples"]) for p in rb["problems"]}
    return {i: min(size_a[i], size_b[i]) for i in ids}


def solve_rates(result: dict, ids: list[str], samples: dict[str, int] | None = None) -> np.ndarray:
    """Per-problem solve rate in points (mean correctness over its samples, or its first samples[id]), shape
    (len(ids),), in `ids` order."""
    by_id = {p["id"]: p for p in result["problems"]}
    return np.array([100.0 * np.mean([bool(s["correct"]) for s in by_id[i]["samples"][:(samples or {}).get(i)]])
                     for i in ids])


def read_pair(a_path: str | Path, b_path: str | Path) -> tuple[Evaluation, Evaluation, list[str]]:
    """A, B and their problem ids (in A's order); NotComparable (every difference) when they differ in more than
    the evaluator."""
    a, b = read_evaluation(a_path), read_evaluation(b_path)
    problems = mismatches(a, b)
    if problems:
        raise NotComparable(f"{COMMAND}: A ({a.given}) and B ({b.given}) are not two evaluators of one evaluation:\n"
                            + "\n".join(f"  {why}" for why in problems))
    return a, b, [p["id"] for p in a.result["problems"]]


def plan(a_path: str | Path, b_path: str | Path, *, margin: float = MARGIN, level: float = LEVEL,
         power: float = POWER, budget_gpu_min: float | None = None) -> ComparePlan:
    """What showing equivalence within +-margin costs, from pilot evaluations A and B (compare_plan.py)."""
    check_inputs(margin, level, power, budget_gpu_min)
    a, b, ids = read_pair(a_path, b_path)
    return plan_compare(a.result, b.result, ids, margin=margin, level=level, power=power,
                        budget_gpu_min=budget_gpu_min)


def compare(a_path: str | Path, b_path: str | Path, *, margin: float = MARGIN, level: float = LEVEL,
            power: float = POWER, budget_gpu_min: float | None = None) -> dict:
    """Compare evaluation B against A; write the record to B's eval dir and return it. A verdict other than
    equivalent carries the plan for reaching one, A and B as its pilot (record["plan"]).

    Raises NotComparable (one message listing every difference) when A and B differ in more than the
    evaluator, and ValueError for a bad margin, level, power or budget.
    """
    check_inputs(margin, level, power, budget_gpu_min)
    a, b, ids = read_pair(a_path, b_path)
    common = common_samples(a.result, b.result, ids) if allocated(a.result) or allocated(b.result) else None
    test = paired_equivalence(solve_rates(a.result, ids, common), solve_rates(b.result, ids, common), margin=margin,
                              level=level)
    by_id_b = {p["id"]: p for p in b.result["problems"]}
    pairs = [(s["correct"], t["correct"]) for p in a.result["problems"]
             for s, t in zip(p["samples"], by_id_b[p["id"]]["samples"])]
    differ = settings_diff(a, b)
    out = b.eval_json.parent / f"compare_{a.label}.json"
    record = {
        "estimand": ESTIMAND, "verdict": test.verdict, "margin": test.margin,
        "difference": test.difference, "se": test.se, "df": test.df,
        "level": test.level, "ci": [test.low, test.high],
        "alpha": round(test.alpha, 12), "tost_ci": [test.tost_low, test.tost_high], "tost_p": test.tost_p,
        "n_problems": test.n_problems, "n_samples": a.result["n_samples"],
        **({"common_samples_per_problem": common} if common else {}),
        "samples_same_correctness": sum(x == y for x, y in pairs), "samples": len(pairs),
        "dataset": a.result.get("dataset"), "model": a.result.get("model"),
        "checkpoint": a.result.get("checkpoint"), "checkpoint_identity": a.result.get("checkpoint_identity"),
        "seed": a.result.get("seed"), "settings_differ": differ,
        "a": _side(a), "b": _side(b), "created_at": utc_now(),
    }
    drawn = (f"the samples both drew ({min(common.values())}-{max(common.values())} per problem)" if common
             else f"{record['n_samples']} samples")
    record["line"] = summary_line(test, drawn, record["samples_same_correctness"], len(pairs), differ, out)
    if test.verdict != EQUIVALENT:
        try:
            record["plan"] = plan_compare(a.result, b.result, ids, margin=margin, level=level, power=power,
                                          budget_gpu_min=budget_gpu_min).to_json()
        except ValueError as err:  # a pilot of one sample a problem measures no per-sample noise
            record["plan"] = {"refusal": str(err), "line": f"[compare] plan: none, {err}"}
    atomic_write_json(out, record)
    return record


def _side(e: Evaluation) -> dict:
    r = e.result
    return {"path": str(e.run_dir.path if e.run_dir else e.eval_json.parent), "eval_json": str(e.eval_json),
            "evaluator": r.get("evaluator"), "backend": r.get("backend"), "fingerprint": r.get("fingerprint"),
            "avg_at_n": r["metrics"].get("avg_at_n"), "created_at": r.get("created_at")}


def verdict_text(test: Equivalence) -> str:
    if test.verdict == EQUIVALENT:
        return f"equivalent within ±{test.margin:g}"
    return test.verdict


def summary_line(test: Equivalence, drawn: str, alike: int, paired: int, differ: dict[str, list], out: Path) -> str:
    """The one printed line: B - A with both intervals, TOST's p and the verdict."""
    what = ", ".join(f"{key} {va} -> {vb}" for key, (va, vb) in differ.items()) or "no setting differs"
    p = "< 0.001" if test.tost_p < 0.001 else f"{test.tost_p:.3f}"
    return (f"[compare] B - A = {test.difference:+.2f} points over {test.n_problems} problems x {drawn} "
            f"({alike}/{paired} graded alike; {what}); {test.level:.0%} CI [{test.low:+.2f}, "
            f"{test.high:+.2f}]; TOST at ±{test.margin:g}: p {p}, {1 - 2 * test.alpha:.0%} CI [{test.tost_low:+.2f}, "
            f"{test.tost_high:+.2f}] -> {verdict_text(test)} ({out})")


def main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a", metavar="A", help="the reference evaluation (run dir, eval dir or eval.json)")
    parser.add_argument("b", metavar="B", help="the candidate evaluation; the record goes to its eval dir")
    parser.add_argument("--margin", type=float, default=MARGIN,
                        help=f"equivalence margin in points (default {MARGIN:g})")
    parser.add_argument("--level", type=float, default=LEVEL,
                        help=f"coverage of the interval; TOST runs at alpha = 1 - level (default {LEVEL:g})")
    parser.add_argument("--power", type=float, default=POWER,
                        help=f"the plan's chance of showing equivalence if B has no effect (default {POWER:g})")
    parser.add_argument("--budget-gpu-min", type=float, default=None,
                        help="refuse a plan whose two arms cost more GPU-minutes than this")
    parser.add_argument("--plan", action="store_true",
                        help="A and B are pilots: print the samples a problem and GPU-minutes that showing "
                             "equivalence needs, and exit 1 when that plan is refused")
    args = parser.parse_args(argv)
    try:
        if args.plan:
            planned = plan(args.a, args.b, margin=args.margin, level=args.level, power=args.power,
                           budget_gpu_min=args.budget_gpu_min)
        else:
            record = compare(args.a, args.b, margin=args.margin, level=args.level, power=args.power,
                             budget_gpu_min=args.budget_gpu_min)
    except ValueError as err:  # NotComparable, or a bad margin / level / power / budget: the message names the fix
        raise SystemExit(str(err)) from None
    if args.plan:
        print(planned.line(), flush=True)
        if planned.refusal:
            raise SystemExit(f"[compare] plan refused: {planned.refusal}")
        return
    print(record["line"], flush=True)
    if "plan" in record:
        print(record["plan"]["line"], flush=True)
        if record["plan"].get("refusal") and "samples_per_problem" in record["plan"]:
            print(f"[compare] plan refused: {record['plan']['refusal']}", flush=True)
