"""`python -m opsd_sweep.confirm RESULTS_DIR [flags] [-- hydra overrides]` (= `make confirm`): the locked
confirmation of a sweep's chosen config.

Takes the config the sweep chose (--config, else the winner a race in the folder declared, else the best mean
among the configs that are not the baseline; refused without --config when the folder's races declare different
winners or a race declared its baseline the winner: nothing beat it) and the in-sweep baseline (--baseline,
auto as the summary), runs fresh seeds of both (above every seed the sweep used; --seeds, default the seeds advice
for the paired test (seeds.py), refused when it is larger than confirm launches unasked, else 3) through the sweep
machinery, each run scored on the sweep's tuning benchmark and on a locked one (--locked, default eval=aime25),
and writes confirm.md and confirm.json to RESULTS_DIR: config - baseline paired by seed with its interval per benchmark, the sweep's own
(selected, optimistic) estimate, and one verdict line. A benchmark the sweep already evaluated is named as not
locked. Overrides after `--` go to every run's Hydra command (e.g. hydra/launcher=slurm_4gpu). A rerun of the
same command skips finished runs and resumes the rest. --report-only runs nothing and reports what finished;
before any run finished it gives no verdict and says how to run them; with some runs missing its verdict is
marked INTERIM. Each completed look is recorded in confirm.json; a later look at more seeds is tested at
alpha / looks (looks.py). Exit code 1 when the confirmation is not complete (a launch failed, or a run of either
arm did not finish), else 0.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from opsd_sweep.cli import check_overrides
from opsd_sweep.confirm import looks, plan, report, seeds as seeds_advice
from opsd_sweep.confirm.verdict import Difference, paired_difference, verdict, verdict_line
from opsd_sweep.summarize.collect import collect
from opsd_sweep.summarize.config_stats import Analysis, analyse
from opsd_sweep.summarize.races import declared_baseline_labels, find_race_logs, read_race
from opsd_sweep import summary

EXAMPLES = """examples:
  python -m opsd_sweep.confirm results/lr_grid                                  # best config vs base model, on AIME25
  python -m opsd_sweep.confirm results/tiny-demo --locked eval=tiny_locked --seeds 3
  python -m opsd_sweep.confirm results/lr_grid --config lr=2e-05 --baseline lr=1.4e-05 -- hydra/launcher=slurm_4gpu
"""


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    passthrough = argv[argv.index("--") + 1:] if "--" in argv else []
    own = argv[:argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(prog="python -m opsd_sweep.confirm", description=__doc__, epilog=EXAMPLES,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results_dir", help="the sweep's results (a group folder, e.g. results/tiny-demo)")
    parser.add_argument("--config", help="the config to confirm, in the --baseline selector syntax (default: the "
                        "winner of a race in the folder, else the best mean among the configs that are not the "
                        "baseline; needed when races disagree on the winner or a race's baseline won)")
    parser.add_argument("--baseline", default="auto", help="the in-sweep baseline, as the summary's --baseline "
                        "(default auto: the untrained base model)")
    parser.add_argument("--seeds", type=int, help="fresh seeds per arm, at least 2 (left out: the seeds advice for "
                        f"the paired test, refused above {seeds_advice.MAX_ADVISED_SEEDS}, else 3)")
    parser.add_argument("--locked", default="eval=aime25", help="overrides naming the locked benchmark: an eval "
                        "group, e.g. 'eval=aime25' (its dataset; the sweep's sampling protocol stays)")
    parser.add_argument("--metric", help="score column, as the summary's --metric (default conf/summary.yaml)")
    parser.add_argument("--level", type=float, help="interval coverage (default conf/summary.yaml)")
    parser.add_argument("--collapsed-score", type=float, help="the score a run stopped at its collapse "
                        "(train.stop_on_collapse) counts with, e.g. 0, as the summary's; without it a confirmation "
                        "with such a run gets no verdict (judged on its other seeds, an arm is judged on its survivors)")
    parser.add_argument("--report-only", action="store_true", help="run nothing: report the confirmation runs "
                        "that exist")
    return parser.parse_args(own), passthrough


def main(argv: list[str] | None = None) -> int:
    args, passthrough = parse_args(sys.argv[1:] if argv is None else argv)
    # the overrides go to python -m opsd_sweep[.evaluate] (and compose --locked): a typo'd key is refused first
    check_overrides([*passthrough, *args.locked.split()], "opsd_sweep", prefix="confirm: ")
    try:
        return confirm(args, passthrough)
    except (plan.ConfirmError, ValueError) as err:  # SeedsAdviceError is a ValueError
        raise SystemExit(f"confirm: {err}") from None


@dataclass
class Plan:
    """What a confirmation tests, chosen before any run: the two arms, their fresh seeds, the benchmarks each run
    is scored on, and which look at this hypothesis it is (with the level that look is tested at)."""

    results_dir: Path
    roots: list[str]
    settings: argparse.Namespace  # the summary's settings (metric, level, collapsed_score)
    analysis: Analysis
    chosen: str
    baseline: str
    chosen_how: str
    arms: dict[str, plan.Arm]
    advice: seeds_advice.SeedsAdvice | None
    seeds: list[int]
    seeds_how: str
    largest: int  # the sweep's largest seed
    locked: dict  # the locked benchmark's dataset fields
    locked_name: str
    seen: list[str]  # runs of the sweep that evaluated the locked benchmark
    tuning: dict[str, dict]
    suite: dict[str, dict]
    tested: dict  # the hypothesis, as looks.py records it
    history: list[dict]  # the earlier looks of confirm.json
    look: int
    level: float


@dataclass
class Scores:
    """The arms' runs as they stand: each benchmark's paired difference and what is missing, stopped or failed."""

    benchmarks: list[dict]
    diffs: list[Difference]  # tuning, locked
    missing: list[tuple[str, int, str]]  # (role, seed, benchmark)
    stopped: dict[str, set[int]]  # seeds that stopped at their collapse, per arm
    unfinished: list[str]
    failed_runs: list[str]
    unscored: list[str]  # collapsed runs with no score to count (no --collapsed-score)


def confirm(args: argparse.Namespace, passthrough: list[str]) -> int:
    chosen = choose(args)
    announce(chosen, args.locked)
    folders, failed = run_arms(chosen, args.report_only, passthrough)
    scores = score(chosen, folders)
    word, line, history = decide(chosen, scores, failed, args.report_only)
    result = record(chosen, scores, word, line, history, args, folders, failed, passthrough)
    report_to_console(chosen, scores, result, args.report_only)
    # 1: the confirmation is not complete (as a failed launch), or a collapse with no score withholds its verdict
    return 1 if failed or scores.unfinished or scores.unscored else 0


def choose(args: argparse.Namespace) -> Plan:
    """Read the sweep and choose: the config and the baseline, fresh seeds, the tuning and locked benchmarks, the
    look. Raises ConfirmError before any run when the sweep does not allow a confirmation."""
    if args.seeds is not None:  # a declared count is refused before the sweep is read, not read as "the advice"
        plan.check_seed_count(args.seeds)
    results_dir = Path(args.results_dir)
    roots = plan.sweep_roots(results_dir)
    flags = ["--baseline", args.baseline, "--anchor", "none", "--no-plots"]
    flags += (["--metric", args.metric] if args.metric else []) + (["--level", str(args.level)] if args.level else [])
    flags += ["--collapsed-score", str(args.collapsed_score)] if args.collapsed_score is not None else []
    settings = summary.parse_args([*roots, *flags])
    collection = collect(roots)
    if collection.runs.empty:
        raise plan.ConfirmError(f"no readable run directories under {results_dir}; run a sweep first (make demo)")
    races = [race for race in map(read_race, find_race_logs([str(results_dir)])) if race is not None]
    # --baseline auto as the summary reads it: the untrained base model, else the baseline a race declared
    analysis = analyse(collection.runs, settings, None, declared_baseline_labels(races, collection.runs))
    chosen, baseline, chosen_how = plan.choose_arms(analysis, args.config, races)
    print(f"[confirm] config {chosen!r} ({chosen_how}) vs baseline {baseline!r} ({analysis.baseline_how})")
    arms = {role: plan.make_arm(role, label, analysis) for role, label in (("config", chosen), ("baseline", baseline))}
    plan.check_real_runs(arms)
    advice = seeds_advice.advise(analysis, chosen, settings.metric, settings.level)
    count, seeds_how = ((args.seeds, "declared with --seeds") if args.seeds is not None
                        else seeds_advice.default_seed_count(advice))
    largest = plan.largest_seed(collection)
    seeds = plan.fresh_seeds(largest, count)

    locked = plan.locked_benchmark(args.locked.split(), arms["config"].config)
    tuning = plan.tuning_benchmarks(arms["config"].config)
    if set(plan.tuning_benchmarks(arms["baseline"].config)) != set(tuning):
        raise plan.ConfirmError(f"the config {chosen!r} and the baseline {baseline!r} were evaluated on different "
                                "benchmarks; confirm compares configs of one sweep (one eval)")
    suite, locked_name = plan.suite_of(tuning, locked)
    tested = looks.hypothesis(chosen, baseline, plan.identity(locked), settings.metric)
    history = looks.earlier_looks(results_dir / "confirm.json")
    look = looks.look_number(history, tested, seeds)
    return Plan(results_dir, roots, settings, analysis, chosen, baseline, chosen_how, arms, advice, seeds, seeds_how,
                largest, locked, locked_name, plan.runs_that_saw(locked, roots), tuning, suite, tested, history, look,
                level=looks.split_level(settings.level, look))  # the nominal level at a first look


def announce(chosen: Plan, locked_overrides: str) -> None:
    """The seeds, whether the locked benchmark is locked, and which look this is."""
    seeds = chosen.seeds
    shown = f"{seeds[0]}..{seeds[-1]}" if len(seeds) > 6 else str(seeds)
    print(f"[confirm] fresh seeds {shown} per arm ({chosen.seeds_how}); the sweep's seeds go up to {chosen.largest}")
    if chosen.seen:
        print(f"[confirm] {locked_overrides} is not locked: {len(chosen.seen)} run(s) of this sweep evaluated "
              f"{chosen.locked['name']}; running it anyway, the verdict will say it is not from a locked benchmark")
    else:
        print(f"[confirm] {locked_overrides} ({chosen.locked['name']}) is locked: no run of the sweep evaluated it")
    if chosen.look > 1:
        print(looks.look_line(chosen.history, chosen.tested, seeds, chosen.look, chosen.settings.level, chosen.level))


def run_arms(chosen: Plan, report_only: bool, passthrough: list[str]) -> tuple[dict[str, str], list[str]]:
    """Run each arm's fresh seeds as a sweep (--report-only: none, and nothing is written beside the runs); the
    folder of each arm's runs, and the arms whose launch failed."""
    folders, failed = {}, []
    for role, arm in chosen.arms.items():
        if not report_only:
            plan.ensure_world(arm.config)
        config, group = plan.overlay(arm, chosen.suite)
        folders[role] = str(Path(config["results_root"]) / group)
        config_dir = Path(config["results_root"]) / (Path(group).parent.as_posix()) / ".conf"
        name = f"confirm-{Path(group).name}"
        if not report_only:
            plan.write_overlay(config, config_dir, name)
            if plan.run_arm(plan.arm_command(arm, config_dir, name, chosen.seeds, passthrough)) != 0:
                failed.append(role)
    return folders, failed


def score(chosen: Plan, folders: dict[str, str]) -> Scores:
    """Each benchmark's config - baseline difference, paired by seed, from the runs that finished."""
    settings, seeds = chosen.settings, chosen.seeds
    scores = {role: collect([folders[role]]) for role in chosen.arms}
    benchmarks, diffs, missing = [], [], []
    stopped = {role: report.collapsed_seeds(c.runs, seeds) for role, c in scores.items()}  # finished, no score
    for role_name, members in (("tuning", list(chosen.tuning)), ("locked", [chosen.locked_name])):
        per_arm = {role: report.arm_scores(c.runs, c.samples, members, settings.metric, seeds,
                                           settings.collapsed_score) if not c.runs.empty
                   else {} for role, c in scores.items()}
        paired_seeds, x, y = report.paired(per_arm["config"], per_arm["baseline"])
        diff = report.bounded(paired_difference(x, y, chosen.level), settings.metric)
        diffs.append(diff)
        benchmarks.append({"name": " + ".join(members), "role": role_name, "seeds": paired_seeds,
                           "config_scores": x.tolist(), "baseline_scores": y.tolist(), "difference": diff.as_dict()})
        missing += [(role, s, " + ".join(members)) for role in chosen.arms for s in seeds
                    if s not in per_arm[role] and s not in stopped[role]]
    unscored = [f"{role} seed {s}" for role in chosen.arms for s in sorted(stopped[role])] \
        if settings.collapsed_score is None else []
    return Scores(benchmarks, diffs, missing, stopped,
                  unfinished=report.unfinished_runs(missing),  # a run is scored on every benchmark at once: count runs
                  failed_runs=[run for role, c in scores.items() for run in report.failed_runs(c.runs, role, seeds)],
                  unscored=unscored)


def decide(chosen: Plan, scores: Scores, failed: list[str], report_only: bool) -> tuple[str | None, str, list[dict]]:
    """The verdict word (None: none can be given), its line, and the looks with this one recorded when it is
    complete."""
    locked, seen, settings = scores.diffs[1], chosen.seen, chosen.settings
    if scores.unscored:  # finished with no score: the pairs left would judge an arm on the seeds that did not collapse
        word, line = None, report.collapsed_line(scores.unscored, chosen.locked_name)
    elif locked.n == 0:  # no pair on the locked benchmark: no difference, so no verdict word
        word, line = None, report.no_verdict_line(len(scores.unfinished), 2 * len(chosen.seeds), report_only,
                                                  chosen.locked_name, not seen, len(seen), scores.failed_runs)
    else:
        word = verdict(locked.paired_low, locked.paired_high)  # the locked benchmark's
        line = verdict_line(word, chosen.locked_name, locked, not seen, len(seen), settings.metric)
    complete = not (failed or scores.unfinished)
    history, look = chosen.history, chosen.look
    if word is not None and look > 1:
        line += f"; look {look} at this confirmation, so a Bonferroni level (alpha {1 - settings.level:.3g} / {look})"
    if word is not None and complete:  # a verdict on every planned seed: a look the next one must count
        history = looks.recorded(history, chosen.tested, chosen.seeds, word, chosen.level, settings.level)
    if word is not None and not complete:  # pairs from part of the planned seeds: a look, not the verdict
        word, line = report.interim(word, line, locked.n, len(chosen.seeds))
    return word, line, history


def record(chosen: Plan, scores: Scores, word: str | None, line: str, history: list[dict], args: argparse.Namespace,
           folders: dict[str, str], failed: list[str], passthrough: list[str]) -> dict:
    """confirm.json's content (confirm.md is written from it)."""
    arms, seen = chosen.arms, chosen.seen
    return {"verdict": word, "verdict_line": line, "complete": not (failed or scores.unfinished),
            "from_locked_benchmark": not seen, "metric": chosen.settings.metric,
            "level": chosen.level, "nominal_level": chosen.settings.level, "look": chosen.look, "looks": history,
            "plan": {"results_dir": str(chosen.results_dir), "config": chosen.chosen, "baseline": chosen.baseline,
                     "chosen_how": chosen.chosen_how,
                     "baseline_how": chosen.analysis.baseline_how, "seeds": chosen.seeds, "seeds_how": chosen.seeds_how,
                     "seeds_advice": chosen.advice.as_dict() if chosen.advice else None,
                     "largest_sweep_seed": chosen.largest, "folders": folders, "failed_launches": failed,
                     "passthrough": passthrough},
            "locked": {"overrides": args.locked, "name": chosen.locked_name, "identity": plan.identity(chosen.locked),
                       "locked": not seen, "seen_runs": len(seen), "examples": seen[:3]},
            "sweep_estimate": {**arms["config"].sweep_estimate, "selected": True,
                               "note": "selected from the sweep's configs: optimistic (winner's curse)"},
            "benchmarks": scores.benchmarks, "unfinished_runs": scores.unfinished, "failed_runs": scores.failed_runs,
            "collapsed_runs": [f"{role} seed {s}" for role in arms for s in sorted(scores.stopped[role])],
            "collapsed_score": chosen.settings.collapsed_score,
            "missing": sorted({f"{role} seed {seed} on {bench}" for role, seed, bench in scores.missing})}


def report_to_console(chosen: Plan, scores: Scores, result: dict, report_only: bool) -> None:
    """Write confirm.md and confirm.json, and say each benchmark's difference and the verdict line."""
    md, js = report.write(result, chosen.results_dir)
    for bench in (b for b in scores.benchmarks if b["difference"]["n"]):  # a benchmark with no pair: nothing to show
        d = bench["difference"]
        print(f"[confirm] {bench['role']:6s} {bench['name']}: config - baseline = {report.figure(d['delta'])} "
              f"paired [{report.figure(d['paired_low'])}, {report.figure(d['paired_high'])}], Welch "
              f"[{report.figure(d['welch_low'])}, {report.figure(d['welch_high'])}] over {d['n']} seed pair(s)")
    est = chosen.arms["config"].sweep_estimate
    print(f"[confirm] the sweep's own estimate (selected, optimistic): {report.figure(est.get('delta_baseline'))} vs "
          f"the baseline over {est.get('n')} seeds")
    if scores.unfinished and result["verdict"] is not None:
        print(f"[confirm] {len(scores.unfinished)} of {2 * len(chosen.seeds)} run(s) did not finish: "
              f"{report.how_to_finish(report_only, scores.failed_runs)}")
    print(result["verdict_line"])
    print(f"wrote {md}, {js}")


if __name__ == "__main__":
    sys.exit(main())
