"""What an evaluator equivalence check costs before it is run: `evaluate compare --plan --margin M A B`.

A and B are pilot evaluations of one checkpoint under two evaluators (a few samples a problem each, the same
seed). Their paired samples estimate the noise of B - A (inference.equivalence_plan.paired_noise); the plan is
the samples a problem per arm, K, at which TOST at +-margin shows equivalence with the stated power if B has no
effect, and the GPU-minutes of evaluating both arms at K. Each arm is priced from its own pilot's token counts
(length model: the pilot's own lengths) by the eval step model (evaluate/sampling_plan.sample_gpu_seconds, one
H200), an FP8 KV cache's KV reads at half (BENCHMARKS.md: fp8 KV ~0.5x the bf16 eval). A plan whose two arms
cost more than --budget-gpu-min is refused, naming the budget, the cost and the margin the budget can show.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from opsd_sweep.evaluate.sampling_plan import sample_gpu_seconds
from opsd_sweep.inference.equivalence_plan import (PUBLISHED_K, PairedNoise, check_plan_inputs, margin_shown,
                                                   paired_noise, samples_needed)

FP8_KV_FACTOR = 0.5  # an FP8 KV cache reads half the bytes of bf16 (BENCHMARKS.md: 37.4 vs 70.8 min, H100)
COST_MODEL = "the H200 eval step model (evaluate/sampling_plan.py)"


@dataclass(frozen=True)
class ArmCost:
    """GPU-seconds of one sample of every problem under one evaluator (None: the pilot recorded no token counts)."""

    seconds_per_k: float | None
    mean_tokens: float | None
    kv_cache: str  # the evaluator's KV cache dtype (eval.json's evaluator record; auto = the model's)


def arm_cost(result: dict, ids: list[str]) -> ArmCost:
    """Each problem's mean GPU-seconds a sample over the arm's pilot samples, summed over `ids`."""
    kv_cache = str((result.get("evaluator") or {}).get("kv_cache", "auto"))
    factor = FP8_KV_FACTOR if kv_cache.startswith("fp8") else 1.0
    by_id = {p["id"]: p["samples"] for p in result["problems"]}
    tokens = [[s.get("n_tokens") for s in by_id[i]] for i in ids]
    if not all(isinstance(t, (int, float)) for row in tokens for t in row):
        return ArmCost(None, None, kv_cache)
    per_problem = [float(np.mean(sample_gpu_seconds(row, factor))) for row in tokens]
    return ArmCost(float(np.sum(per_problem)), float(np.mean([t for row in tokens for t in row])), kv_cache)


def paired_samples(ra: dict, rb: dict, ids: list[str]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per problem, A's and B's outcomes on the samples both drew (the first min(n_A, n_B): the same seeds)."""
    by_a, by_b = ({p["id"]: p["samples"] for p in r["problems"]} for r in (ra, rb))
    out_a, out_b = [], []
    for i in ids:
        n = min(len(by_a[i]), len(by_b[i]))
        out_a.append(np.array([bool(s["correct"]) for s in by_a[i][:n]]))
        out_b.append(np.array([bool(s["correct"]) for s in by_b[i][:n]]))
    return out_a, out_b


@dataclass(frozen=True)
class ComparePlan:
    """The size and cost of showing equivalence within +-margin, from a pilot."""

    margin: float
    level: float
    power: float
    noise: PairedNoise
    k: int | None  # samples a problem per arm; None: no K can (between-problem spread alone is too wide)
    cost_a: ArmCost
    cost_b: ArmCost
    seed: int | None
    budget_gpu_min: float | None

    def gpu_min(self, cost: ArmCost, k: float | None = None) -> float | None:
        k = self.k if k is None else k
        return None if cost.seconds_per_k is None or k is None else k * cost.seconds_per_k / 60

    @property
    def total_gpu_min(self) -> float | None:
        a, b = self.gpu_min(self.cost_a), self.gpu_min(self.cost_b)
        return None if a is None or b is None else a + b

    @property
    def affordable_k(self) -> int | None:
        """The most samples a problem per arm the budget buys for both arms (None without budget or prices)."""
        if self.budget_gpu_min is None or None in (self.cost_a.seconds_per_k, self.cost_b.seconds_per_k):
            return None
        return int(self.budget_gpu_min * 60 // (self.cost_a.seconds_per_k + self.cost_b.seconds_per_k))

    @property
    def refusal(self) -> str | None:
        """Why the plan is not to be spent (over the budget, unpriced under a budget, unreachable), or None."""
        if self.k is None:
            floor = margin_shown(self.noise, math.inf, self.level, self.power)
            return (f"no number of samples shows ±{self.margin:g} on these {self.noise.n_problems} problems: B's "
                    f"effect varies between problems (SD {math.sqrt(self.noise.between_var):.2f} points in the "
                    f"pilot), which more samples do not average away; the smallest margin any K can show is "
                    f"±{floor:.2f}: pass a wider --margin, or evaluate more problems")
        if self.budget_gpu_min is None:
            return None
        if self.total_gpu_min is None:
            return (f"--budget-gpu-min {self.budget_gpu_min:g}: the plan cannot be priced, a pilot recorded no token "
                    "counts (n_tokens); run the pilots again with this version, or leave out --budget-gpu-min")
        if self.total_gpu_min <= self.budget_gpu_min:
            return None
        k = self.affordable_k
        shows = ("not one sample a problem per arm" if k < 1 else
                 f"K = {k} samples a problem per arm, which shows ±{margin_shown(self.noise, k, self.level, self.power):.2f}"
                 f" at the same level and power")
        return (f"the plan costs {self.total_gpu_min:,.0f} GPU-min, over --budget-gpu-min {self.budget_gpu_min:g}; "
                f"that budget buys {shows}: pass that --margin, or a budget of at least {self.total_gpu_min:,.0f}")

    def line(self) -> str:
        """The plan in one line, with its noise and cost sources (a refusal is said apart: `refusal`)."""
        noise = (f"{self.noise.source}; per-sample SD of B - A {math.sqrt(self.noise.per_sample_var):.1f} points, "
                 f"between problems {math.sqrt(self.noise.between_var):.2f}")
        head = (f"[compare] plan: equivalence within ±{self.margin:g} at {self.level:.0%} with power {self.power:g} "
                f"if B has no effect ({noise})")
        if self.k is None:
            return f"{head}: no number of samples a problem reaches it"
        rerun = f"eval.n_samples={self.k}" + (f" seed={self.seed}" if self.seed is not None else "")
        return (f"{head} needs K = {self.k} samples a problem per arm ({self.k / PUBLISHED_K:.1f} evals of "
                f"{PUBLISHED_K}) on {self.noise.n_problems} problems: {self._cost_text()} -> evaluate both again "
                f"with {rerun}")

    def _cost_text(self) -> str:
        a, b = self.gpu_min(self.cost_a), self.gpu_min(self.cost_b)
        if a is None or b is None:
            return "GPU-minutes unknown (a pilot recorded no token counts)"
        tokens = ", ".join(f"{name} {c.mean_tokens:,.0f}" + ("" if c.kv_cache == "auto" else f" ({c.kv_cache} KV)")
                           for name, c in (("A", self.cost_a), ("B", self.cost_b)))
        return (f"A {a:,.1f} + B {b:,.1f} = {a + b:,.1f} GPU-min (length model: the pilot's own lengths, mean tokens "
                f"a sample {tokens}; priced by {COST_MODEL}, FP8 KV reads at {FP8_KV_FACTOR:g}x)")

    def to_json(self) -> dict:
        return {"margin": self.margin, "level": self.level, "power": self.power, "samples_per_problem": self.k,
                "noise": asdict(self.noise), "gpu_min": {"a": self.gpu_min(self.cost_a), "b": self.gpu_min(self.cost_b)},
                "length_model": "the pilot's own lengths", "cost_model": COST_MODEL,
                "cost": {"a": asdict(self.cost_a), "b": asdict(self.cost_b)},
                "budget_gpu_min": self.budget_gpu_min, "refusal": self.refusal, "line": self.line()}


def check_inputs(margin: float, level: float, power: float, budget_gpu_min: float | None) -> None:
    """ValueError naming the value and the fix for a margin, level, power or budget a plan cannot use."""
    check_plan_inputs(margin, level, power)
    if budget_gpu_min is not None and not budget_gpu_min > 0:
        raise ValueError(f"--budget-gpu-min {budget_gpu_min}: a budget is > 0 GPU-minutes for both arms together "
                         "(e.g. --budget-gpu-min 600), or leave it out")


def plan_compare(ra: dict, rb: dict, ids: list[str], *, margin: float, level: float, power: float,
                 budget_gpu_min: float | None = None) -> ComparePlan:
    """The plan from pilot evaluations A and B (eval.json dicts, comparable: compare.mismatches) of problems `ids`.

    Raises ValueError for a bad margin, level, power or budget (naming the value and the fix), or a pilot without 2
    samples of some problem under both evaluators.
    """
    check_inputs(margin, level, power, budget_gpu_min)
    samples_a, samples_b = paired_samples(ra, rb, ids)
    noise = paired_noise(samples_a, samples_b, source="the pilot")
    k = samples_needed(noise, margin, level, power)
    return ComparePlan(margin, level, power, noise, k, arm_cost(ra, ids), arm_cost(rb, ids), ra.get("seed"),
                       budget_gpu_min)
