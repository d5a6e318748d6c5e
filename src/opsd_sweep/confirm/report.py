"""Scores of a confirmation's runs per benchmark, and the report: confirm.md, confirm.json, console lines."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd

from opsd_sweep.confirm.verdict import Difference
from opsd_sweep.inference import stats

PER_PROBLEM = ("avg_at_n", "pooled")


def arm_scores(runs: pd.DataFrame, samples: pd.DataFrame, members: list[str], metric: str,
               seeds: list[int], collapsed_score: float | None = None) -> dict[int, float]:
    """{seed: score} of an arm's finished runs (collect's tables of its folder) on the suite members `members`.

    One member: its own column `<member>.<metric>`. Several (a sweep tuned on a suite): avg@n over the union
    of their problems, from the per-sample records (only for avg_at_n / pooled). A run stopped at its collapse
    (train.stop_on_collapse) has no eval: it enters at `collapsed_score` when declared, on every benchmark."""
    floor = {s: float(collapsed_score) for s in collapsed_seeds(runs, seeds)} if collapsed_score is not None else {}
    return _scored(runs, samples, members, metric, seeds) | floor


def collapsed_seeds(runs: pd.DataFrame, seeds: list[int]) -> set[int]:
    """The planned seeds whose run stopped at its collapse (state collapsed): finished, with no score."""
    if runs.empty:
        return set()
    return {int(s) for s in runs.loc[(runs["state"] == "collapsed") & runs["cfg.seed"].isin(seeds), "cfg.seed"]}


def collapsed_line(unscored: list[str], benchmark: str) -> str:
    """The line in place of a verdict when a confirmation run stopped at its collapse and no score is declared."""
    return (f"NO VERDICT on {benchmark}: {len(unscored)} confirmation run(s) stopped at a collapse "
            f"(train.stop_on_collapse) with no score ({', '.join(unscored)}); judged on the seeds that did not "
            "collapse, an arm would be judged on its survivors. Declare the score they count with, e.g. "
            "--collapsed-score 0 (a collapse is a finding about the config)")


def _scored(runs: pd.DataFrame, samples: pd.DataFrame, members: list[str], metric: str,
            seeds: list[int]) -> dict[int, float]:
    """{seed: score} of the runs that count (see arm_scores)."""
    runs = runs[runs["counts"].astype(bool) & runs["cfg.seed"].isin(seeds)]
    if len(members) == 1:
        column = f"{members[0]}.{metric}"
        if column not in runs:
            return {}
        return {int(r["cfg.seed"]): float(r[column]) for _, r in runs.iterrows() if r[column] == r[column]}
    if metric not in PER_PROBLEM:
        raise ValueError(f"metric {metric!r} over the suite members {members}: only avg_at_n (pooled) is defined "
                         "over several benchmarks; use --metric avg_at_n or <member>.<metric>")
    prefixes = tuple(f"{m}/" for m in members)
    out = {}
    for _, r in runs.iterrows():
        own = samples[(samples["run_id"] == r["run_id"]) & samples["problem"].str.startswith(prefixes)]
        if len(own):
            out[int(r["cfg.seed"])] = 100.0 * float(own.groupby("problem")["correct"].mean().mean())
    return out


def paired(config: dict[int, float], baseline: dict[int, float]) -> tuple[list[int], np.ndarray, np.ndarray]:
    """The seeds both arms finished, and their scores in seed order."""
    seeds = sorted(set(config) & set(baseline))
    return seeds, np.array([config[s] for s in seeds]), np.array([baseline[s] for s in seeds])


def unfinished_runs(missing: list[tuple[str, int, str]]) -> list[str]:
    """The runs ("config seed 4") that lack a score on some benchmark, from (role, seed, benchmark) triples: one
    run scores every benchmark of the suite, so a run missing on two benchmarks is one unfinished run."""
    return [f"{role} seed {seed}" for role, seed in sorted({(role, seed) for role, seed, _ in missing})]


def failed_runs(runs: pd.DataFrame, role: str, seeds: list[int]) -> list[str]:
    """The runs ("config seed 4") of an arm's planned seeds whose last attempt failed, from collect's runs table of
    its folder."""
    if runs.empty:
        return []
    failed = runs[(runs["state"] == "failed") & runs["cfg.seed"].isin(seeds)]
    return [f"{role} seed {int(seed)}" for seed in sorted(failed["cfg.seed"].unique())]


def how_to_finish(report_only: bool, failed: list[str]) -> str:
    """What finishes the confirmation: running (or rerunning) the command, and for a failed run rerun_failed=true:
    a rerun skips a run whose last attempt failed (conf/config.yaml rerun_failed: false)."""
    how = ("run the same command without --report-only to run them" if report_only
           else "rerun the same command to finish them (finished runs are skipped)")
    if failed:
        how += (f"; {len(failed)} failed ({', '.join(failed)}) and a rerun skips a failed run: add "
                "'rerun_failed=true' after '--' to retry them")
    return how


def no_verdict_line(unfinished: int, planned: int, report_only: bool, benchmark: str, locked: bool,
                    seen_runs: int, failed: list[str] = ()) -> str:
    """The line in place of a verdict when no seed has a score from both arms on the locked benchmark."""
    runs = f"{planned} confirmation runs ({planned // 2} fresh seeds x 2 arms)"
    what = (f"none of the {runs} has finished" if unfinished == planned else
            f"{unfinished} of the {runs} did not finish, and no seed has a score of both arms")
    line = f"NO VERDICT YET on {benchmark}: {what}; {how_to_finish(report_only, list(failed))}"
    if not locked:
        line += (f"; NOT from a locked benchmark: {seen_runs} run(s) of the sweep evaluated {benchmark}, "
                 "so it would be no locked confirmation")
    return line


INTERIM = "INTERIM"  # the mark of a verdict on part of the planned seeds


def interim(word: str, line: str, pairs: int, planned: int) -> tuple[str, str]:
    """(word, line) of a verdict on `pairs` of the `planned` seed pairs while runs are missing or failed: an interim
    look, marked in the word and at the start of the line, so no one reads it as the confirmation's verdict."""
    return f"{INTERIM}: {word}", f"{INTERIM} ({pairs} of {planned} planned seed pairs): {line}"


def figure(value, fmt: str = "+.2f") -> str:
    """A number as the report shows it; n/a for a missing one (None or nan)."""
    return "n/a" if value is None or value != value else format(value, fmt)


def as_given(path: str, results_dir: str) -> str:
    """`path` spelled from RESULTS_DIR as the user gave it, as summary.md spells its paths from the roots it was
    given: results/tiny-demo gives results/tiny-demo-confirm/<arm> for the confirmation folder beside it. An
    absolute RESULTS_DIR, or a path outside the folders the relative one names, leaves `path` as it is."""
    given = Path(results_dir)
    if given.is_absolute():
        return path
    target, here = Path(path).resolve(), given.resolve()
    for up, folder in enumerate([here, *here.parents][:len(given.parts) + 1]):
        if target.is_relative_to(folder):
            return os.path.normpath(given.joinpath(*[".."] * up, target.relative_to(folder)))
    return path


def markdown(result: dict) -> str:
    """confirm.md: what ran, the locked check, per benchmark the paired and Welch intervals, the verdict."""
    plan, level = result["plan"], result["level"]
    folders = {role: as_given(folder, plan["results_dir"]) for role, folder in plan["folders"].items()}
    pct = f"{100 * level:.4g}%"  # 97.5% at a second look
    est = result["sweep_estimate"]
    lines = [f"# Confirmation of {plan['config']!r} against {plan['baseline']!r}", "",
             f"**{result['verdict_line']}**", "",
             f"- Sweep: {plan['results_dir']} (metric {result['metric']}); config chosen as {plan['chosen_how']}; "
             f"baseline: {plan['baseline_how']}.",
             f"- Fresh seeds {plan['seeds']} for both arms (seed count: {plan['seeds_how']}); the sweep's seeds go "
             f"up to {plan['largest_sweep_seed']}, so none is reused.",
             f"- Runs: {folders['config']} and {folders['baseline']} (rerun the same command to "
             "finish or resume them; finished runs are skipped).", ""]
    locked = result["locked"]
    if locked["locked"]:
        lines.append(f"Locked benchmark {locked['name']} ({locked['overrides']}): no run of the sweep evaluated it.")
    else:
        lines.append(f"**{locked['overrides']} is not locked: {locked['seen_runs']} run(s) of this sweep evaluated "
                     f"{locked['name']}** (e.g. {locked['examples'][0]}); the verdict is not from a locked benchmark.")
    lines += ["", f"## config - baseline, paired by seed ({pct} intervals)", "",
              "| benchmark | role | pairs | config mean | baseline mean | difference | paired CI | p (paired) | "
              "Welch CI | p (Welch) | seed correlation |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for bench in result["benchmarks"]:
        d = bench["difference"]
        lines.append(f"| {bench['name']} | {bench['role']} | {d['n']} | {figure(d['config_mean'], '.2f')} | "
                     f"{figure(d['baseline_mean'], '.2f')} | {figure(d['delta'])} | [{figure(d['paired_low'])}, "
                     f"{figure(d['paired_high'])}] | {figure(d['paired_p'], '.3g')} | [{figure(d['welch_low'])}, "
                     f"{figure(d['welch_high'])}] | {figure(d['welch_p'], '.3g')} | {figure(d['correlation'], '.2f')} |")
    lines += ["", "## The sweep's own estimate (selected: optimistic)", "",
              f"In the sweep, {plan['config']!r} scored {figure(est.get('mean'), '.2f')} over {est.get('n')} seeds "
              f"[{figure(est.get('ci_low'), '.2f')}, {figure(est.get('ci_high'), '.2f')}], "
              f"{figure(est.get('delta_baseline'))} vs the baseline [{figure(est.get('baseline_low'))}, "
              f"{figure(est.get('baseline_high'))}]. It was **selected** ({plan['chosen_how']}): the maximum of noisy "
              "estimates sits above its true value (winner's curse), so this number is optimistic; the fresh seeds "
              "above took no part in the choice.", "",
              "## How the verdict is read", "",
              f"On the locked benchmark, the paired {pct} interval of config - baseline over the fresh seeds: "
              "**confirmed** when its lower bound is > 0; **not confirmed** when its upper bound is <= 0 (no "
              "improvement is compatible with the data); **inconclusive** otherwise (the interval holds 0 and a "
              "gain), or with fewer than 2 paired seeds. More seeds (--seeds) narrow it. The Welch interval ignores "
              "the pairing: when it is much wider, the seed shares noise between the arms and pairing helps. With no "
              "seed scored by both arms there is no verdict yet; with some runs missing or failed, the verdict on "
              "the pairs so far is an INTERIM look, not the confirmation's verdict. Each completed look is kept in "
              "confirm.json; a look at other seeds of the same config, baseline and benchmark is tested at alpha / "
              "(number of looks) (Bonferroni): over K looks the false-confirmation rate is at most alpha x (1 + 1/2 + "
              "... + 1/K), not K x alpha, but above alpha, since the first look spent alpha in full; choose the seeds "
              "once, up front, to keep it at alpha."]
    if result.get("collapsed_runs"):
        score = result.get("collapsed_score")
        how = (f"each enters both benchmarks at the declared score {score:g} (--collapsed-score)" if score is not None
               else "with no declared score (--collapsed-score) there is no verdict")
        lines += ["", f"Runs stopped at a collapse (train.stop_on_collapse; finished, no eval): "
                  f"{'; '.join(result['collapsed_runs'])}: {how}."]
    if result.get("unfinished_runs"):
        lines += ["", f"Runs that did not finish ({len(result['unfinished_runs'])} of {2 * len(plan['seeds'])}; "
                  f"{how_to_finish(False, result.get('failed_runs') or [])}): " + "; ".join(result["unfinished_runs"])]
    return "\n".join(lines) + "\n"


def write(result: dict, out: Path) -> tuple[Path, Path]:
    md, js = out / "confirm.md", out / "confirm.json"
    md.write_text(markdown(result))
    js.write_text(json.dumps(result, indent=2, default=str) + "\n")
    return md, js


def bounded(diff: Difference, metric: str) -> Difference:
    """The intervals of a percent score's difference cut at -100 and +100."""
    if not stats.is_percent_score(metric):
        return diff
    from dataclasses import replace
    pl, ph = stats.bounded(diff.paired_low, diff.paired_high, stats.DIFFERENCE_BOUNDS)
    wl, wh = stats.bounded(diff.welch_low, diff.welch_high, stats.DIFFERENCE_BOUNDS)
    return replace(diff, paired_low=pl, paired_high=ph, welch_low=wl, welch_high=wh)
