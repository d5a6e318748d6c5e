"""`python -m opsd_sweep.summary [RESULTS_ROOT ...] [--flags]` (= `make summary`): tables, verdicts, plots.

Writes runs.csv, samples.parquet, summary.csv, summary.md and plots/*.png to --out (default: the first
root) and prints the verdict table; with an in-sweep baseline also transitions.csv and plots/transitions.png
(per-problem transitions vs the baseline). Each race.jsonl of a racing sweep (in a root or one folder below)
adds a "## Race" section, plots/race_progress.png and a printed outcome line. Runs that scored different sets
of problems (a sweep's and its confirmation's under one results root) are no one quantity: each set is
summarised apart, in the folder of its runs (refused, writing nothing, when two sets share a folder). Defaults
come from conf/summary.yaml; every key is a flag here.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
from dataclasses import replace
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from opsd_sweep.summarize.checkpoints import write_checkpoint_report
from opsd_sweep.summarize.caps import console_line as cap_warnings
from opsd_sweep.summarize.collapses import console_line
from opsd_sweep.summarize.collect import Collection, collect, left_out_line
from opsd_sweep.summarize.config_stats import analyse
from opsd_sweep.summarize.graders import statement as grader_statement
from opsd_sweep.summarize.metric_scope import check_one_problem_set, folders_apart, problem_sets
from opsd_sweep.summarize.plots import write_plots, write_race_plots
from opsd_sweep.summarize.races import (declared_baseline_labels, find_race_logs, outcome_line, read_race,
                                       simulated_run_dirs)
from opsd_sweep.summarize.report import metric_display, print_table, write_markdown
from opsd_sweep.summarize.settings import AUTO, PAIRINGS, POOL_OPT_INS, SummarySettings, load_anchor, load_settings
from opsd_sweep.summarize.transitions import transitions
from opsd_sweep.console import quiet_on_closed_pipe, table_console


EXAMPLES = """examples:
  python -m opsd_sweep.summary results/lr_grid --baseline lr_scheduler=constant   # vs the in-sweep baseline
  python -m opsd_sweep.summary 'results/*' --metric pass_at_4 --pool-sd            # all groups, another metric
  python -m opsd_sweep.summary results --anchor none --target-effect 3             # no published anchor
  python -m opsd_sweep.summary results/lr_grid --pairing seed                       # paired by training seed
"""


def parse_args(argv: list[str] | None) -> SummarySettings:
    parser = argparse.ArgumentParser(prog="python -m opsd_sweep.summary", description=__doc__, epilog=EXAMPLES,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("roots", nargs="*", help="results roots (globs allowed); default: conf/summary.yaml roots")
    parser.add_argument("--out", help="output folder (default: the first root)")
    parser.add_argument("--external", nargs="+", help="CSV(s) of external per-run results: config, run_id, metrics")
    parser.add_argument("--metric", help="score column, e.g. avg_at_n, pass_at_4, maj_at_n")
    parser.add_argument("--level", type=float, help="interval coverage, e.g. 0.95")
    parser.add_argument("--alpha", type=float, help="test level of the verdicts (Holm across configs)")
    parser.add_argument("--anchor", help="published anchor: conf/anchor/ name, YAML path, 'auto' (the one "
                             "the runs were configured with) or 'none'")
    parser.add_argument("--baseline", help="in-sweep baseline: 'auto' (the untrained base model, if any, else the "
                             "baseline a race declared), a config label, key=value terms matched by value "
                             "(lr=5e-06 max_steps=20; the race's hydra.sweeper.baseline syntax), or 'none'")
    parser.add_argument("--pool-sd", action=argparse.BooleanOptionalAction, default=None,
                        help="one run-to-run SD for all configs (assumes equal variance)")
    parser.add_argument("--pool-anchor", action=argparse.BooleanOptionalAction, default=None,
                        help="the anchor's runs come from this pipeline: its n and SD enter the pooled SD")
    parser.add_argument("--pool-include", nargs="+", choices=POOL_OPT_INS, help="runs the pooled SD (seeds needed, "
                        "MDE, --pool-sd) takes besides this pipeline's trained configs")
    parser.add_argument("--assumed-sd", type=float, help="the run-to-run SD (points), known: used by configs with "
                             "< 2 runs, and by every config unless --pool-sd (normal quantiles)")
    parser.add_argument("--target-effect", type=float, help="effect (points) for the seeds-needed advice")
    parser.add_argument("--power", type=float, help="power for the seeds-needed advice")
    parser.add_argument("--larger-k", type=int, help="show the saving of this many eval samples per problem")
    parser.add_argument("--collapsed-score", type=float, help="the score a run stopped at its collapse "
                        "(train.stop_on_collapse) counts with, e.g. 0; without it such a config gets no verdict")
    parser.add_argument("--pairing", choices=PAIRINGS, help="'seed': compare each config with the in-sweep "
                        "baseline by paired differences over the seeds both ran (declare it before looking); "
                        "'none': two independent arms")
    parser.add_argument("--transition-threshold", type=float, help="per-problem transitions vs the in-sweep "
                        "baseline: a problem is solved by an arm whose solve rate is >= this, e.g. 0.5")
    parser.add_argument("--plots", action=argparse.BooleanOptionalAction, default=None, help="write plots/*.png")
    args = vars(parser.parse_args(argv))
    args["roots"] = args["roots"] or None
    return load_settings(args)


def main(argv: list[str] | None = None) -> None:
    try:
        settings = parse_args(argv)
        # a bad anchor name fails before the scan; auto needs the runs
        anchor = None if settings.anchor == AUTO else load_anchor(settings.anchor)
    except ValueError as err:
        raise SystemExit(str(err)) from None
    collection = read_roots(settings)
    sets = problem_sets(collection.runs, settings.metric)
    if len(sets) > 1:  # one score over other problems is another quantity: each set gets a summary of its own
        summarise_apart(settings, collection, sets, anchor)
        return
    summarise(settings, collection, anchor)


def read_roots(settings: SummarySettings) -> Collection:
    """collect() of the roots, with a progress bar only while there are run dirs to read (none is drawn before the
    error of a missing or empty root); refused when nothing reads."""
    try:
        collection = collect(settings.roots, settings.external,
                             progress=lambda dirs: tqdm(dirs, desc="reading run dirs", disable=not dirs))
    except ValueError as err:  # an --external CSV that cannot be read (collect.read_external)
        raise SystemExit(str(err)) from None
    if collection.runs.empty and (missing := [r for r in settings.roots if not glob.has_magic(r)
                                              and not Path(r).expanduser().exists()]):
        raise SystemExit(f"no results root at {', '.join(missing)}: give the folder a sweep wrote (results_root, "
                         "default results/, or OPSD_RESULTS), e.g. results/<group>")
    if collection.runs.empty:
        unreadable = "".join(f"\n  {r.path}: {r.reason}" for r in collection.skipped.head(5).itertuples())
        raise SystemExit(f"no readable run directories under {', '.join(settings.roots)} "
                         f"({len(collection.skipped)} skipped){unreadable}\nrun a sweep first (make demo), or point "
                         "at its results root")
    return collection


def summarise_apart(settings: SummarySettings, collection: Collection, sets: list[tuple[str, pd.DataFrame]],
                    anchor) -> None:
    """Runs of several problem sets (a sweep's and its confirmation's, beside each other under one root): each
    set summarised in the folder of its runs (with --out, in out/<that folder under the sets' common one>), as
    if given alone; refused, writing nothing, when two sets share a folder or --external results are given
    (they name no problems)."""
    folders = None if settings.external else folders_apart(sets)
    if folders is None:  # the refusal names each set and where its runs are
        try:
            check_one_problem_set(collection.runs, settings.metric)
        except ValueError as err:
            why = (" (--external results name no problems, so they belong to no set)" if settings.external
                   else " (here two sets share a folder)")
            raise SystemExit(f"{err}{why}") from None
    common = Path(os.path.commonpath([str(f) for f in folders]))
    outs = [f if settings.out is None else Path(settings.out) / f.relative_to(common) for f in folders]
    found = f"the runs under {', '.join(settings.roots)} scored {len(sets)} different sets of problems"
    print(f"{found}: a score over other problems is another quantity, so each set is summarised apart, in the "
          "folder of its runs")
    shown = [f"{out / 'summary.md'} ({words}, {len(group)} runs)" for out, (words, group) in zip(outs, sets)]
    for i, (folder, out, (words, group)) in enumerate(zip(folders, outs, sets)):
        print(f"\n=== problem set {i + 1} of {len(sets)}: {words}, {len(group)} counted runs in {folder} ===")
        others = "; ".join(shown[:i] + shown[i + 1:])
        apart = (f"{found[0].upper()}{found[1:]}; this summary holds those in {folder} ({words}); the other "
                 f"set{'s' if len(sets) > 2 else ''}: {others}.")
        alone = replace(settings, roots=[str(folder)], out=str(out))
        summarise(alone, read_roots(alone), anchor, apart)
    inside = [Path(d) for d in collection.runs["run_dir"].dropna()] + [Path(p) for p in collection.skipped["path"]]
    elsewhere = sorted({str(d) for d in inside if not any(d.is_relative_to(f) for f in folders)})
    if elsewhere:
        print(f"\n{len(elsewhere)} run dir(s) lie in no set's folder and are in no summary: "
              + ", ".join(elsewhere[:5]) + (", ..." if len(elsewhere) > 5 else ""))
    print(f"\n{found}, summarised apart: " + "; ".join(shown))


def summarise(settings: SummarySettings, collection: Collection, anchor, apart: str | None = None) -> None:
    """The summary of one set of runs: runs.csv, samples.parquet, summary.csv, summary.md, plots to the out
    folder, the verdict table to the console. `apart`: the line saying which problem set of the roots this is."""
    out = Path(settings.out or settings.roots[0])
    if settings.anchor == AUTO:
        try:
            anchor = load_anchor(AUTO, collection.anchors)
        except ValueError as err:
            raise SystemExit(str(err)) from None
    out.mkdir(parents=True, exist_ok=True)
    collection.runs.to_csv(out / "runs.csv", index=False)
    collection.samples.to_parquet(out / "samples.parquet", index=False)
    if graders := grader_statement(collection.runs, settings.roots):  # before the analysis, which may find none
        print(graders)
    simulated = simulated_run_dirs(collection.runs)
    races = [race for race in (read_race(p, simulated) for p in find_race_logs(settings.roots)) if race is not None]
    try:
        analysis = analyse(collection.runs, settings, anchor, declared_baseline_labels(races, collection.runs))
    except ValueError as err:
        raise SystemExit(f"{err}\n(runs.csv is written to {out} for inspection)") from None
    analysis.table.to_csv(out / "summary.csv", index=False)
    if settings.collapsed_score is not None:  # runs stopped at their collapse are in the statistics, at the floor
        collection = replace(collection, skipped=collection.skipped[collection.skipped["state"] != "collapsed"])
    display = metric_display(settings.metric, analysis.usable, collection.fixed)
    changes = None if analysis.baseline is None else transitions(
        collection.samples, analysis.usable, list(analysis.table["label"]), analysis.baseline,
        settings.transition_threshold)
    if changes is not None:
        changes.table.to_csv(out / "transitions.csv", index=False)
    plots = write_plots(analysis, settings.metric, display, settings.level, out, changes) if settings.plots else []
    race_plots = write_race_plots(races, out) if settings.plots else [None] * len(races)
    write_markdown(out / "summary.md", analysis, collection, settings, display, plots, list(zip(races, race_plots)),
                   changes, apart)
    if checkpoint_files := write_checkpoint_report(collection.runs, settings.level, settings.plots, out):
        print(f"every checkpoint evaluated: see the Checkpoints section of {out / 'summary.md'}, checkpoints.csv")
        plots += [p for p in checkpoint_files if p.suffix == ".png"]
    print_table(analysis, settings, display, table_console())
    if collapses := console_line(collection.runs):
        print(collapses)
    if caps := cap_warnings(collection.runs):
        print(caps)
    if not collection.skipped.empty:
        print(left_out_line(collection.skipped, out / "summary.md"))
    for race in races:
        print(outcome_line(race))
    plots += [p for p in race_plots if p is not None]
    print(f"wrote {out / 'summary.md'}, summary.csv, runs.csv, samples.parquet"
          + (", transitions.csv" if changes is not None else "") + (f", {len(plots)} plots" if plots else ""))


if __name__ == "__main__":
    sys.exit(quiet_on_closed_pipe(main))
