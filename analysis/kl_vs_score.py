"""Final training kl_true against the score, one mark per run, across a sweep (descriptive).

    python analysis/kl_vs_score.py results/lr_sweep [--metric avg_at_n] [--out DIR]

Writes kl_vs_score.png (the summary's plot: a least-squares line only over >= 3 configs, labelled
descriptive) and kl_vs_score.csv (run_id, label, seed, kl_true over the last 10% of steps, the score).
"""

from __future__ import annotations

from opsd_sweep.summarize import scripts
from opsd_sweep.summarize.plots import KL_COLUMN, plot_kl


def main(argv: list[str] | None = None) -> None:
    parser = scripts.parser(__doc__)
    parser.add_argument("--metric", default="avg_at_n", help="score column of runs.csv, e.g. avg_at_n, pass_at_4")
    args = parser.parse_args(argv)
    _, runs = scripts.finished_runs(args)
    missing = [c for c in (KL_COLUMN, args.metric) if c not in runs]
    if missing:
        raise SystemExit(f"the finished runs under {args.results} have no {missing}: kl_true comes from "
                         "train/metrics.jsonl, the score from eval/eval.json (--metric)")
    png, csv = scripts.output(args, "kl_vs_score")
    if not plot_kl(runs, args.metric, args.metric, KL_COLUMN, png):
        raise SystemExit("fewer than 2 runs with both kl_true and the score, or one kl_true value: nothing to plot")
    runs[["run_id", "label", "cfg.seed", KL_COLUMN, args.metric]].dropna().to_csv(csv, index=False)
    scripts.written(png, csv)


if __name__ == "__main__":
    main()
