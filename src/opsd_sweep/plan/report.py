"""The planner's printout: what it priced, the table of designs, and the sentence a researcher needs before the
sweep (whether the budget resolves the gain asked for)."""

from __future__ import annotations

import math
from typing import Optional

from opsd_sweep.plan.designs import Row, Scenario
from opsd_sweep.summarize.report import markdown_table


def _hours(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:,.0f}" if x >= 10 else f"{x:.2f}"


def _points(x: Optional[float]) -> str:
    return "-" if x is None else f"+{x:.1f}"


def table(rows: list[Row], effect: float, budget: float) -> str:
    header = ["design", "how it runs", "run SD", "GPU-h a run", f"seeds/arm for +{effect:g}",
              f"GPU-hours for +{effect:g}", f"seeds/arm in {budget:g} GPU-h", "smallest gain resolved"]
    body = [[r.design, r.how, f"{r.sd:.2f}", f"{r.run_h:.2f}", "-" if r.seeds is None else str(r.seeds),
             _hours(r.gpu_hours), "-" if r.budget_seeds is None else str(r.budget_seeds), _points(r.mde)]
            for r in rows]
    return markdown_table(header, body)


def sentence(rows: list[Row], effect: float, budget: float, s: Scenario) -> str:
    """Whether the budget resolves +effect, in one plain sentence naming the cheapest design and the best gain."""
    def named(r: Row) -> str:
        return f"the {r.design} design" + (f", at rho {s.rho:g} assumed" if r.design == "paired" else "")

    priced = [r for r in rows if r.gpu_hours is not None]
    resolved = [r for r in rows if r.mde is not None]
    cheapest = min(priced, key=lambda r: r.gpu_hours) if priced else None
    finest = min(resolved, key=lambda r: r.mde) if resolved else None
    if cheapest is not None and cheapest.gpu_hours <= budget:
        return (f"+{effect:g} fits the budget: {named(cheapest)} finds it with ~{_hours(cheapest.gpu_hours)} "
                f"of your {budget:g} GPU-hours ({cheapest.seeds} seeds per arm, {s.power:.0%} power, FW <= {s.fw:g}).")
    needs = (f"+{effect:g} needs ~{_hours(cheapest.gpu_hours)} GPU-hours ({named(cheapest)})"
             if cheapest is not None else f"+{effect:g} is out of reach of every design priced here")
    if finest is None:
        least = min((s.arms * 2 * r.run_h for r in rows if r.budget_seeds is not None), default=None)
        if least is None:
            return f"{needs}."
        return (f"{needs}; your budget of {budget:g} GPU-hours buys fewer than 2 seeds per arm of any design, so it "
                f"resolves nothing (a test needs >= {least:,.1f} GPU-hours).")
    return (f"{needs}; your budget of {budget:g} GPU-hours resolves >= {finest.mde:.1f} points "
            f"({named(finest)}).")


def header(grid_words: str, noise_words: str, cost_words: list[str], s: Scenario) -> list[str]:
    return [f"grid: {grid_words}",
            f"tests: {s.comparisons} comparison{'s' if s.comparisons != 1 else ''} with the baseline, each two-sided at "
            f"{s.alpha:.4g} (FW <= {s.fw:g}, Bonferroni), {s.power:.0%} power",
            f"run SD: {noise_words}; eval sampling {math.sqrt(min(s.noise.eval_var, s.noise.sd ** 2)):.2f} of it, "
            f"the training seed {math.sqrt(s.noise.train_var):.2f}",
            *cost_words]
