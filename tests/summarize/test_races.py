"""Races in the summary: a real simulated race summarised end to end, and races.py on a hand-built log."""

from __future__ import annotations

import contextlib
import io
import json

import pandas as pd
import pytest

from opsd_sweep.summarize.races import find_race_logs, outcome_line, race_from_records, read_race
from opsd_sweep.summarize.report import race_section as report_race_section
from opsd_sweep.race import RaceSettings, RaceSpec, RaceState, RunResult, decide
from opsd_sweep.race.log import RaceLog
from opsd_sweep.summary import main
from tests.conftest import run_sweep

# 1e-05 truly 3.5 points above the baseline (so it wins and gets confirmed), 2e-05 truly 8 below (so it
# is eliminated): the race has every part the section reports, whatever the simulator's draws.
RACE = ["-m", "hydra/sweeper=race", "executor=simulate", "group=lr", "learning_rate=2e-6,5e-6,1e-5,2e-5",
        "simulate.lr_curvature=6",
        "simulate.offsets=[{key:learning_rate,value:1e-05,points:4.0},{key:learning_rate,value:2e-05,points:-6.0}]",
        "hydra.sweeper.baseline='learning_rate=5e-6'", "hydra.sweeper.max_seeds=8"]


@pytest.fixture(scope="module")
def summarised(tmp_path_factory, cache_dir):
    """One real race (Hydra sweeper, simulated runs), then `python -m opsd_sweep.summary` on its root."""
    results = tmp_path_factory.mktemp("race_results")
    proc = run_sweep(RACE, results, cache_dir, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = tmp_path_factory.mktemp("race_summary")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        main([str(results), "--out", str(out)])
    log = results / "lr" / "race.jsonl"
    records = [json.loads(line) for line in log.read_text().splitlines()]
    return log, records, (out / "summary.md").read_text(), printed.getvalue(), out


def race_section(report: str) -> str:
    start = report.index("## Race: ")
    end = report.find("\n## ", start + 1)
    return report[start:end if end > 0 else None]


def table_rows(section: str, first_header: str, second_header: str) -> dict[str, list[str]]:
    """Rows of the markdown table whose header starts with these two cells, by the first cell."""
    lines = section.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} | {second_header} |"))
    rows = {}
    for line in lines[head + 2:]:
        if not line.startswith("| "):
            break
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        rows[cells[0].split(" ")[0]] = cells
    return rows


@pytest.mark.slow
def test_the_summary_tests_against_the_baseline_the_race_declared(summarised):
    """`make summary` after a race: no --baseline, the race's in-sweep baseline is the summary's too."""
    _, _, report, _, out = summarised
    summary = pd.read_csv(out / "summary.csv").set_index("label")
    assert summary.loc["lr=5e-06 [simulated]", "verdict"] == "baseline"
    assert summary["verdict_vs"].eq("in-sweep baseline").all()
    assert "auto: the in-sweep baseline the race declared" in report


@pytest.mark.slow  # one real race per module (~12 s)
def test_the_race_section_states_where_the_log_is_why_it_stopped_and_the_winner(summarised):
    log, records, report, printed, _ = summarised
    stop = [r for r in records if r["type"] == "stop"][-1]
    section = race_section(report)
    assert section.startswith(f"## Race: {log}")
    assert f"**Stopped after round {stop['round']}**: {stop['reason']}." in section
    assert f"**Winner: {stop['winner']}" in section
    final_winner = next(r for r in records if r["type"] == "decision" and r["phase"] == "final" and r["winner"])
    assert f"Confirmation on {final_winner['confirm_n']} fresh seeds: mean {final_winner['confirm_mean']:.2f}" in section
    assert "SIMULATED DATA" in section
    runs = {(r["config"], r["seed"], r["phase"]): r for r in records if r["type"] == "run"}
    gpu_hours = sum(r["gpu_hours"] for r in runs.values())
    assert f"Spent: {len(runs)} runs" in section and f"{gpu_hours:.1f} GPU-hours" in section
    line = next(x for x in printed.splitlines() if x.startswith(f"race {log}"))
    assert stop["reason"] in line and f"winner {stop['winner']}" in line and f"final verdict: {final_winner['action']}" in line


@pytest.mark.slow
def test_every_config_that_left_the_race_is_listed_with_its_round(summarised):
    _, records, report, _, _ = summarised
    left = {r["config"]: r for r in records
            if r["type"] == "decision" and r["action"] in ("eliminate", "futile", "drop")}
    assert left, "learning_rate=2e-05 is truly ~12 points below the best: the race must eliminate it"
    rows = table_rows(race_section(report), "config", "round")
    assert set(rows) == set(left)
    for config, record in left.items():
        assert rows[config][1] == str(record["round"])
        assert rows[config][4] == f"{record['mean']:.2f}" and rows[config][3] == str(record["n"])


@pytest.mark.slow
def test_the_final_table_equals_the_logged_final_decisions(summarised):
    _, records, report, _, _ = summarised
    final = [r for r in records if r["type"] == "decision" and r["phase"] == "final"]
    rows = table_rows(race_section(report), "config", "n")
    assert set(rows) == {r["config"] for r in final}
    for record in final:
        cells = rows[record["config"]]
        assert cells[1:4] == [str(record["n"]), f"{record['mean']:.2f}",
                              f"[{record['ci'][0]:.2f}, {record['ci'][1]:.2f}]"]
        assert cells[9] == record["action"]
        if record["p_baseline"] is not None:
            assert cells[4] == f"{record['delta_baseline']:+.2f}"
            assert cells[5] == ("<0.001" if record["p_baseline"] < 1e-3 else f"{record['p_baseline']:.3f}")
        assert ("(winner)" in cells[0]) == record["winner"]


@pytest.mark.slow
def test_the_race_progress_plot_is_written_and_shown(summarised):
    _, _, report, _, out = summarised
    plot = out / "plots" / "race_progress.png"
    assert plot.stat().st_size > 10_000
    assert "![race progress](plots/race_progress.png)" in race_section(report)


# --- races.py on a hand-built log ------------------------------------------------------------------

HEADER = {"type": "race", "configs": ["a", "b", "c", "d", "e"], "baseline": "b", "metric": "avg_at_n", "anchor": None,
          "settings": {"min_seeds": 3, "max_seeds": 5, "alpha": 0.05, "stop_alpha": 0.01, "futility_effect": 2.0}}


def decision(round_, config, mean, action, phase="race", **extra):
    return {"type": "decision", "round": round_, "phase": phase, "config": config, "n": 3 + round_, "mean": mean,
            "ci": [mean - 2, mean + 2], "baseline": config == "b", "p_best": 0.01 if action == "eliminate" else 0.5,
            "delta_best": -6.0 if action == "eliminate" else None, "action": action, **extra}


def run(config, seed, state="done", phase="race", gpu_hours=2.0):
    return {"type": "run", "config": config, "seed": seed, "phase": phase, "state": state, "score": 50.0,
            "gpu_hours": gpu_hours, "run_dir": None, "error": None}


@pytest.fixture
def small_log(tmp_path):
    log = RaceLog(tmp_path / "g" / "race.jsonl")
    for record in [HEADER, run("a", 1), run("b", 1), run("c", 1), run("e", 1), run("d", 1, "failed"),
                   run("d", 2, "failed"),
                   {"type": "decision", "round": 0, "phase": "race", "config": "d", "action": "drop",
                    "reason": "2 failed runs"},
                   decision(0, "a", 55.0, "continue"), decision(0, "b", 50.0, "continue"),
                   decision(0, "c", 49.0, "continue"), decision(0, "e", 50.2, "futile", upper_baseline=1.37),
                   decision(1, "a", 56.0, "continue"),  # a kill here; the restart assesses round 1 again:
                   {"type": "resume", "configs": HEADER["configs"], "settings": {}},
                   run("c", 1, gpu_hours=3.0),  # the same run logged again: counted once, last record
                   decision(1, "a", 57.0, "continue"), decision(1, "b", 50.5, "continue"),
                   decision(1, "c", 48.0, "eliminate"),
                   {"type": "stop", "round": 1, "reason": "decided: the best config is better than the baseline",
                    "winner": "a"},
                   run("a", 9, phase="confirm"),
                   decision(1, "a", 56.5, "better", phase="final", winner=True, confirm_n=1, confirm_mean=54.0,
                            p_baseline=0.004, delta_baseline=6.0),
                   decision(1, "b", 50.5, "baseline", phase="final", winner=False),
                   {"type": "state", "round": 1, "phase": "done"}]:
        log.append(record)
    with open(log.path, "a") as handle:
        handle.write('{"type": "decision", "round": 2, "phase": "fin')  # cut by a kill mid-line
    return log.path


def test_tables_of_a_hand_built_log(small_log):
    race = read_race(small_log)
    assert race.finished and race.winner == "a" and race.resumes == 1
    assert race.final[["config", "n", "mean", "action", "winner"]].values.tolist() == [
        ["a", 4, 56.5, "better", True], ["b", 4, 50.5, "baseline", False]]
    assert race.final.loc[0, "confirm_n"] == 1 and race.final.loc[0, "confirm_mean"] == 54.0
    gone = race.eliminations
    assert gone[["config", "round", "action"]].values.tolist() == [["d", 0, "drop"], ["e", 0, "futile"],
                                                                   ["c", 1, "eliminate"]]
    assert gone.loc[2, "p_best"] == 0.01 and gone.loc[0, "reason"] == "2 failed runs"
    assert gone.loc[1, "reason"] == "cannot beat the baseline by futility_effect (upper bound of Δ vs baseline +1.37)"
    # round 1 of a was logged twice: the restart's assessment counts
    assert race.timeline[["round", "config", "mean"]].values.tolist() == [
        [0, "a", 55.0], [0, "b", 50.0], [0, "c", 49.0], [0, "e", 50.2], [1, "a", 57.0], [1, "b", 50.5],
        [1, "c", 48.0]]
    assert race.totals == {"runs": 7, "done": 5, "collapsed": 0, "failed": 2, "confirm_runs": 1, "gpu_hours": 15.0,
                           "simulated": 0, "grid_runs": 25,
                           "by_config": {"a": {"runs": 2, "gpu_hours": 4.0}, "b": {"runs": 1, "gpu_hours": 2.0},
                                         "c": {"runs": 1, "gpu_hours": 3.0}, "e": {"runs": 1, "gpu_hours": 2.0},
                                         "d": {"runs": 2, "gpu_hours": 4.0}}}
    line = outcome_line(race)
    assert "stopped after round 1 (decided" in line and "winner a (confirmation: 1 fresh seeds, mean 54.00)" in line
    assert "final verdict: better; 3 left the race; 7 runs (2 failed), 15.0 GPU-hours" in line
    section = "\n".join(report_race_section(race, None))
    assert "cannot beat the baseline by futility_effect = 2.0 points" in section
    spent = table_rows(section, "config", "runs")  # GPU-hours per config beside its runs, failed ones included
    assert spent["a"] == ["a", "2", "4.00"] and spent["d"] == ["d", "2", "4.00"] and spent["total"] == ["total", "7",
                                                                                                          "15.00"]
    left = table_rows(section, "config", "round")
    assert left["e"][:3] == ["e", "0", "futile"] and left["c"][2] == "eliminated" and left["d"][2] == "dropped"


def test_an_unfinished_race_and_a_file_without_a_race(small_log):
    records = RaceLog(small_log).records()
    cut = next(i for i, r in enumerate(records) if r["type"] == "stop")
    race = race_from_records(small_log, records[:cut])
    assert race.stop is None and race.final.empty and not race.finished
    assert "not finished (after round 1; rerun the sweep command to resume)" in outcome_line(race)
    assert race_from_records(small_log, records[1:]) is None


def test_race_logs_are_found_in_a_root_and_one_folder_below(tmp_path):
    for folder in ("own", "own/group", "own/group/deeper", "other/x"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "race.jsonl").write_text(json.dumps(HEADER) + "\n")
    found = find_race_logs([str(tmp_path / "own"), str(tmp_path / "oth*")])
    assert found == [tmp_path / "other" / "x" / "race.jsonl", tmp_path / "own" / "group" / "race.jsonl",
                     tmp_path / "own" / "race.jsonl"]
    assert find_race_logs([str(tmp_path / "missing")]) == []


# --- a confirmation ended by failed runs, in summary.md as on the console ----------------------------

CONFIRM_SETTINGS = dict(min_seeds=3, max_seeds=8, seeds_per_round=1, alpha=0.05, stop_alpha=0.02, eliminate_alpha=0.05,
                        anchor_alpha=0.01, target_half_width=0.0, budget_gpu_hours=None, confirm_seeds=2,
                        first_seed=1, max_failures=2)
CONFIRM_RACE = {"base": {1: 50.0, 2: 51.0, 3: 50.5}, "a": {1: 40.0, 2: 41.0, 3: 40.5}, "b": {1: 60.0, 2: 61.0, 3: 62.0}}


def race_log_of_decide(confirm_runs: list[RunResult], pairing: str | None = None) -> list[dict]:
    """The records a race logs, made by policy.decide: b wins the race, then these confirmation runs finish it."""
    settings = dict(CONFIRM_SETTINGS, pairing=pairing) if pairing else CONFIRM_SETTINGS
    spec = RaceSpec(("base", "a", "b"), "base", None, RaceSettings(**settings))
    results = [RunResult(c, seed, "race", "done", score, 1.0) for c, runs in CONFIRM_RACE.items()
               for seed, score in runs.items()]
    first = decide(results, RaceState(), spec)
    assert first.state.phase == "confirm" and first.state.winner == "b", first.state
    last = decide(results + confirm_runs, first.state, spec)
    assert last.state.phase == "done", last.state
    records = [{"type": "race", "configs": list(spec.configs), "baseline": "base", "metric": "avg_at_n",
                "anchor": None, "settings": settings}]
    records += [r.to_record() for r in results + confirm_runs]
    return records + first.records + [{"type": "stop", "round": first.state.round, "reason": first.state.stop_reason,
                                       "winner": "b"}] + last.records + [{"type": "state", "phase": "done"}]


def test_summary_md_says_the_winners_confirmation_ended_after_failed_runs_as_the_console_does(tmp_path):
    confirm = [RunResult("b", 4, "confirm", "failed", error="OOM"), RunResult("b", 5, "confirm", "done", 61.5, 1.0),
               RunResult("b", 6, "confirm", "failed", error="OOM")]
    race = race_from_records(tmp_path / "race.jsonl", race_log_of_decide(confirm))
    said = "1 of 2 fresh seeds, ended after 2 failed runs"
    assert f"confirmation: {said}, mean 61.50" in outcome_line(race)
    section = "\n".join(report_race_section(race, None))
    assert f"Confirmation on {said}: mean 61.50" in section
    assert table_rows(section, "config", "n")["b"][10] == f"{said}, mean 61.50"


def test_summary_md_says_when_every_confirmation_run_failed(tmp_path):
    confirm = [RunResult("b", 4, "confirm", "failed", error="OOM"), RunResult("b", 5, "confirm", "failed", error="OOM")]
    race = race_from_records(tmp_path / "race.jsonl", race_log_of_decide(confirm))
    section = "\n".join(report_race_section(race, None))
    assert "Confirmation on 0 of 2 fresh seeds, ended after 2 failed runs: no unbiased score" in section
    assert table_rows(section, "config", "n")["b"][10] == "0 of 2 fresh seeds, ended after 2 failed runs"


def test_summary_md_says_the_paired_baselines_confirmation_ended_after_failed_runs(tmp_path):
    """Under pairing=seed the baseline runs the confirmation seeds too; its failures end its own confirmation."""
    confirm = [RunResult("b", 4, "confirm", "done", 61.5, 1.0), RunResult("b", 5, "confirm", "done", 62.5, 1.0),
               RunResult("base", 4, "confirm", "done", 50.5, 1.0),
               RunResult("base", 5, "confirm", "failed", error="OOM"),
               RunResult("base", 6, "confirm", "failed", error="OOM")]
    race = race_from_records(tmp_path / "race.jsonl", race_log_of_decide(confirm, pairing="seed"))
    rows = table_rows("\n".join(report_race_section(race, None)), "config", "n")
    assert rows["base"][10] == "1 of 2 fresh seeds, ended after 2 failed runs"
    assert rows["b"][10] == "2 fresh seeds, mean 62.00"


def test_failed_confirmation_runs_that_were_replaced_are_counted_as_retried(tmp_path):
    confirm = [RunResult("b", 4, "confirm", "failed", error="OOM"), RunResult("b", 5, "confirm", "done", 61.5, 1.0),
               RunResult("b", 6, "confirm", "done", 62.5, 1.0)]
    race = race_from_records(tmp_path / "race.jsonl", race_log_of_decide(confirm))
    section = "\n".join(report_race_section(race, None))
    assert "Confirmation on 2 of 2 fresh seeds, 1 failed runs retried: mean 62.00" in section
    assert "confirmation: 2 of 2 fresh seeds, 1 failed runs retried, mean 62.00" in outcome_line(race)
