"""How many samples of each problem a run's evaluation draws, fixed before it draws any: the sampling plan.

- eval.n_samples=K, eval.allocation=uniform (the default): K samples of every problem; no plan file.
- eval.n_samples=auto: the run's K comes from the sweep's pool (the other finished runs of its group dir that
  count and scored the same problems with the same sampling): while fewer than eval.auto_k.min_runs of them
  measured GPU-hours per phase, K = eval.auto_k.first; after, the cost-optimal K (inference.design.choose_k)
  from their training and per-sample eval GPU-hours and their variance components.
- eval.allocation=neyman: per-problem counts from a pilot that is not the run itself (the same pool): the pooled
  solve rates (design.shrunk_rates) and per-sample GPU-seconds from the pilot's token counts, allocated by
  design.neyman_allocation at the GPU cost of K samples of every problem; the score is then design's
  stratified score (scoring/metrics.py). Without a pilot: K of every problem, and the reason says so.

The plan is written once to the run dir (sampling_plan.json) and reused on resume; the run key holds the
declared settings (eval.n_samples=auto, eval.auto_k, eval.allocation, eval.allocation_floor), never what they
resolved to, so a resumed run is the same run. eval.json records the plan (k_choice, allocation,
samples_per_problem) beside n_samples = K.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import numpy as np

from opsd_sweep.config import AUTO, RunConfig, to_dict
from opsd_sweep.run.keys import NON_SEMANTIC_FIELDS, NON_SEMANTIC_SUBFIELDS, input_identities
from opsd_sweep.run.record import SAMPLING_PLAN, RunRecord, UnreadableRun
from opsd_sweep.run.rundir import RunDir, atomic_write_json, find_run_dirs, read_json_or_none, utc_now

PLAN_KEYS = ("n_samples", "auto_k", "allocation", "allocation_floor")  # what the plan decides, not the eval
# eval keys that say which checkpoints are scored or how many samples, not which problems under which sampling
NOT_THE_EVAL = (*PLAN_KEYS, "checkpoints", "checkpoint_race", "average_last", "checkpoint", "path")

# --- what one sample costs -------------------------------------------------------------------------------
# The eval step model measured on one H200 (BENCHMARKS.md, the eval step model): a decode step of ~64 concurrent
# sequences takes 5.56 ms + 27.0 ms per million KV tokens read. A sequence's share of a step at position t is
# 5.56 ms / 64 plus its own t KV tokens' reads, so a sample of n tokens costs about a n + b n^2 GPU-seconds with
# a = 5.56e-3 / 64 and b = 27.0e-9 / 2 (the sum of t over 1..n): KV reads grow with the square of the length.
STEP_SECONDS = 5.56e-3
KV_TOKEN_SECONDS = 27.0e-3 / 1e6
CONCURRENT = 64


def sample_gpu_seconds(n_tokens, kv_factor: float = 1.0) -> np.ndarray:
    """GPU-seconds of samples of `n_tokens` generated tokens each (array-like), by the eval step model above;
    kv_factor scales the KV reads (0.5: an FP8 KV cache reads half the bytes, eval.kv_cache_dtype=fp8)."""
    n = np.asarray(n_tokens, dtype=float)
    return STEP_SECONDS / CONCURRENT * n + kv_factor * KV_TOKEN_SECONDS * n * (n + 1) / 2


# --- the plan ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SamplingPlan:
    """K (eval.json's n_samples) and, with an allocation, each problem's own count (by problem id)."""

    k: int
    counts: dict[str, int] | None = None  # None: k samples of every problem
    k_choice: dict | None = None  # eval.n_samples=auto: {k, reason, pool_runs, source}
    allocation: dict | None = None  # eval.allocation=neyman: {kind, source, floor, budget, reason}

    def samples_of(self, problem_ids: list[str]) -> list[int]:
        """Each problem's count, in the order of `problem_ids`."""
        if self.counts is None:
            return [self.k] * len(problem_ids)
        missing = [i for i in problem_ids if i not in self.counts]
        if missing:
            raise ValueError(f"the sampling plan's allocation holds no count for {len(missing)} problem(s) (e.g. "
                             f"{missing[0]}): its pilot scored other problems than this evaluation; evaluate with "
                             "the problems of the sweep's other runs (eval=, eval.max_problems), or "
                             "eval.allocation=uniform")
        return [self.counts[i] for i in problem_ids]

    def eval_record(self) -> dict:
        """What eval.json records of the plan (nothing for a plain uniform K)."""
        out: dict = {}
        if self.k_choice is not None:
            out["k_choice"] = self.k_choice
        if self.allocation is not None:
            out["allocation"] = self.allocation
        return out

    def to_json(self) -> dict:
        return {"k": self.k, "counts": self.counts, "k_choice": self.k_choice, "allocation": self.allocation}

    @classmethod
    def from_json(cls, data: dict) -> "SamplingPlan":
        return cls(int(data["k"]), data.get("counts"), data.get("k_choice"), data.get("allocation"))


def needs_plan(run: RunConfig) -> bool:
    """Whether the run's samples per problem are decided per run (auto K or an allocation)."""
    return run.eval.n_samples == AUTO or run.eval.allocation != "uniform"


def plan_path(run_dir: RunDir):
    return run_dir.path / SAMPLING_PLAN


def read_plan(run_dir: RunDir) -> SamplingPlan | None:
    """The plan written in the run dir, or None (none yet, or a file that does not read back)."""
    data = read_json_or_none(plan_path(run_dir))
    try:
        return SamplingPlan.from_json(data) if isinstance(data, dict) else None
    except (KeyError, TypeError, ValueError):
        return None


def ensure_plan(run: RunConfig, run_dir: RunDir) -> SamplingPlan:
    """The run's plan: eval.n_samples of every problem, or the plan written in its dir, or (the first time, under
    the run's claim, before any sample is drawn) the one resolved from its sweep's pool now, written once."""
    if not needs_plan(run):
        return SamplingPlan(run.eval.n_samples)
    if (written := read_plan(run_dir)) is not None:
        return written
    plan = make_plan(run, run_dir, read_pool(run, run_dir))
    atomic_write_json(plan_path(run_dir), plan.to_json() | {
        "declared": {key: to_dict(run)["eval"][key] for key in PLAN_KEYS}, "created_at": utc_now()})
    print(f"[opsd_sweep] {run_dir.path.name}: eval plan {describe(plan)}", flush=True)
    return plan


def describe(plan: SamplingPlan) -> str:
    """One line: K and why, and the allocation and why."""
    parts = [f"K = {plan.k}" + (f" ({plan.k_choice['reason']})" if plan.k_choice else "")]
    if plan.allocation is not None:
        parts.append(f"allocation {plan.allocation['kind']} ({plan.allocation['reason']})")
    return "; ".join(parts)


def make_plan(run: RunConfig, run_dir: RunDir, pool: list["PoolRun"]) -> SamplingPlan:
    """Resolve K (eval.n_samples=auto) and the allocation (eval.allocation=neyman) from `pool` (read_pool)."""
    e = run.eval
    k_choice = choose_k(pool, e.auto_k) if e.n_samples == AUTO else None
    k = k_choice["k"] if k_choice else int(e.n_samples)
    if e.allocation == "uniform":
        return SamplingPlan(k, None, k_choice)
    counts, allocation = allocate(pool, k, e.allocation_floor)
    return SamplingPlan(k, counts, k_choice, allocation)


# --- the pool: the sweep's other finished runs of the same evaluation ----------------------------------------

@dataclass(frozen=True)
class PoolRun:
    """What the plan reads of one finished run of the sweep."""

    run_id: str
    config: str  # its config without the seed and the plan (runs of one config share it)
    k: int  # its K (eval.json n_samples; with an allocation the budget's K)
    ids: tuple[str, ...]
    correct: np.ndarray  # (P,) correct samples per problem
    samples: np.ndarray  # (P,) samples drawn per problem
    cost: np.ndarray | None  # (P,) summed GPU-seconds of its samples per problem (None: no token counts)
    train_h: float
    eval_h: float
    ended_at: str = field(default="")

    @property
    def score(self):
        """design.StratifiedScore: the run's score (fraction) and its eval-sampling variance."""
        from opsd_sweep.inference import design  # statsmodels: see choose_k

        return design.stratified_score(self.correct, self.samples)


def _without(config: dict, dropped_eval: tuple[str, ...]) -> dict:
    """The config's semantic part (run.keys) without the seed and the given eval keys."""
    out = {k: v for k, v in config.items() if k not in (*NON_SEMANTIC_FIELDS, "seed")}
    for section, keys in NON_SEMANTIC_SUBFIELDS.items():
        if isinstance(out.get(section), dict):
            out[section] = {k: v for k, v in out[section].items() if k not in keys}
    if isinstance(out.get("eval"), dict):
        out["eval"] = {k: v for k, v in out["eval"].items() if k not in dropped_eval}
    if out.get("executor") != "simulate":
        out.pop("simulate", None)
    return out


def same_eval(config: dict, inputs: dict) -> str:
    """What makes two runs' scores samples of one evaluation: model, eval problems (by identity) and sampling,
    and for simulated runs the simulated benchmark."""
    simulate = config.get("simulate") or {}
    return json.dumps({"executor": config.get("executor"), "model": (config.get("model") or {}).get("name"),
                       "eval": _without(config, NOT_THE_EVAL).get("eval"),
                       "inputs": {k: v for k, v in inputs.items() if k == "model" or k.startswith("eval")},
                       "problems": [simulate.get(k) for k in ("n_problems", "difficulty_sd", "problem_seed")]
                       if config.get("executor") == "simulate" else None}, sort_keys=True, default=str)


def config_of(config: dict, inputs: dict) -> str:
    """A run's config without its seed and its sampling plan: the unit run-to-run variance is pooled within."""
    return json.dumps([_without(config, PLAN_KEYS), inputs], sort_keys=True, default=str)


def read_pool(run: RunConfig, run_dir: RunDir) -> list[PoolRun]:
    """The finished runs of the run's group dir that count (run.record) and scored the same evaluation, oldest
    first; the run itself is never in its own pool."""
    inputs = input_identities(run)
    mine = same_eval(to_dict(run), inputs)
    pool = []
    for other in find_run_dirs([run_dir.path.parent]):
        if other.path.resolve() == run_dir.path.resolve():
            continue
        try:
            record = RunRecord.read(other)
        except (UnreadableRun, OSError):
            continue
        if not record.counts or record.inputs is None or same_eval(record.config, record.inputs) != mine:
            continue
        if (found := pool_run(record)) is not None:
            pool.append(found)
    return sorted(pool, key=lambda r: r.ended_at)


def pool_run(record: RunRecord) -> PoolRun | None:
    """A counted run's measurements, or None when its eval.json holds no per-sample records."""
    problems = record.evaluation.get("problems") or []
    if not problems or not all(p.get("samples") for p in problems):
        return None
    tokens = [[s.get("n_tokens") for s in p["samples"]] for p in problems]
    known = all(isinstance(t, (int, float)) for row in tokens for t in row)
    hours = record.gpu_hours
    return PoolRun(record.run_id, config_of(record.config, record.inputs), int(record.evaluation.get("n_samples") or 0),
                   tuple(str(p.get("id")) for p in problems),
                   np.array([sum(bool(s["correct"]) for s in p["samples"]) for p in problems]),
                   np.array([len(p["samples"]) for p in problems]),
                   np.array([sample_gpu_seconds(row).sum() for row in tokens]) if known else None,
                   float(hours.get("gpu_hours.train", 0.0)), float(hours.get("gpu_hours.evaluate", 0.0)),
                   str(record.status.get("ended_at") or ""))


# --- eval.n_samples=auto ----------------------------------------------------------------------------------

def choose_k(pool: list[PoolRun], auto) -> dict:
    """eval.json's k_choice: {k, reason, pool_runs, source}. K = auto.first until auto.min_runs pool runs measured
    GPU-hours per phase and one config of them has two runs; then design.choose_k on the pool's measurements: its
    run-to-run variance pooled within configs, each run's eval-sampling variance at its own K, its mean training
    GPU-hours and eval GPU-hours per sample of every problem, all at the pool's median K."""
    # here, not at import: every eval phase imports this module, and statsmodels / scipy take ~1 s to load
    from opsd_sweep.inference import design, stats

    priced = [r for r in pool if r.train_h > 0 and r.eval_h > 0 and r.k >= 1]

    def first(why: str) -> dict:
        return {"k": auto.first, "reason": f"eval.auto_k.first = {auto.first}: {why}", "pool_runs": len(priced),
                "source": [r.run_id for r in priced]}

    if len(priced) < auto.min_runs:
        unpriced = len(pool) - len(priced)
        without = (f"; {unpriced} more finished without GPU-hours per phase (CPU runs, or simulated runs with "
                   "simulate.train_gpu_hours=null): no GPU-hours measured") if unpriced else ""
        return first(f"{len(priced)} of eval.auto_k.min_runs = {auto.min_runs} pool runs with GPU-hours per phase "
                     f"so far{without}")
    by_config: dict[str, list[PoolRun]] = {}
    for r in priced:
        by_config.setdefault(r.config, []).append(r)
    repeated = [runs for runs in by_config.values() if len(runs) >= 2]
    if not repeated:
        return first(f"no config among the {len(priced)} priced pool runs has two runs yet: no run-to-run variance")
    measured = [r for runs in repeated for r in runs]
    eval_vars = np.array([r.score.eval_var for r in measured])
    if not np.isfinite(eval_vars).all():
        return first("a pool run has a problem with one sample: its eval-sampling variance is not estimable")
    sd, _ = stats.pooled_sd([np.array([r.score.score for r in runs]) for runs in repeated])
    train_var = sd**2 - float(eval_vars.mean())  # each run's eval-sampling variance at its own K
    k_ref = int(np.median([r.k for r in priced]))
    eval_var = float(np.mean([r.score.eval_var * r.k for r in measured])) / k_ref
    train_h = float(np.mean([r.train_h for r in priced]))
    eval_h = float(np.mean([r.eval_h / r.k for r in priced])) * k_ref
    chosen = design.choose_k(eval_var, k_ref, train_var, train_h, eval_h, (auto.low, auto.high))
    return {"k": chosen.k, "reason": f"{chosen.reason}; from {len(priced)} pool runs",
            "pool_runs": len(priced), "source": [r.run_id for r in priced],
            "optimum": None if chosen.optimum is None else round(chosen.optimum, 3)}


# --- eval.allocation=neyman -------------------------------------------------------------------------------

def allocate(pool: list[PoolRun], k: int, floor: int) -> tuple[dict[str, int] | None, dict]:
    """(counts by problem id or None, eval.json's allocation record). The pilot is the pool's runs that scored the
    problems of its newest run; rates and per-sample costs are pooled over them; the budget is the GPU cost of k
    samples of every problem. Without a pilot: None (k of every problem) and the reason."""
    from opsd_sweep.inference import design  # statsmodels: see choose_k

    record = {"kind": "neyman", "floor": floor, "k": k}
    if not pool:
        return None, record | {"kind": "uniform", "source": [], "budget": None,
                               "reason": f"no pilot yet (no finished run of this sweep scored these problems): "
                                         f"K = {k} samples of every problem"}
    ids = pool[-1].ids
    pilot = [r for r in pool if set(r.ids) == set(ids)]
    order = [{i: n for n, i in enumerate(r.ids)} for r in pilot]
    correct = np.sum([r.correct[[o[i] for i in ids]] for r, o in zip(pilot, order)], axis=0)
    samples = np.sum([r.samples[[o[i] for i in ids]] for r, o in zip(pilot, order)], axis=0)
    if all(r.cost is not None for r in pilot):
        cost = np.sum([r.cost[[o[i] for i in ids]] for r, o in zip(pilot, order)], axis=0) / samples
        costed = "per-sample GPU-seconds from the pilot's token counts"
    else:
        cost = np.full(len(ids), 60.0)  # a GPU-minute each: only their ratios matter
        costed = "equal costs (a pilot run recorded no token counts; GPU-minutes below are nominal)"
    budget = k * float(cost.sum())
    counts = design.neyman_allocation(design.shrunk_rates(correct, samples), cost, budget, floor)
    spent = float((counts * cost).sum())
    return ({i: int(n) for i, n in zip(ids, counts)},
            record | {"source": [r.run_id for r in pilot], "budget": round(budget, 3), "spent": round(spent, 3),
                      "reason": f"from {len(pilot)} pilot run(s), {int(samples.sum())} samples, {costed}: "
                                f"{int(counts.min())}-{int(counts.max())} samples per problem (floor {floor}) for "
                                f"the GPU cost of K = {k} of every problem ({_minutes(spent)} of "
                                f"{_minutes(budget)} GPU-min)"})


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f}" if math.isfinite(seconds) else "nan"
