"""`python -m opsd_sweep.status --json` and `--wait-for`: the versioned schema on a real tiny sweep (two seeds
of one config, a run stopped at its collapse, a standalone evaluation of the base model, then a summary) and
the exit codes of the waits on hand-built roots."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys

import pytest

from opsd_sweep.run.claims import claim_run, release_run
from opsd_sweep.run.rundir import RunDir, atomic_write_json
from opsd_sweep.status import SCHEMA_VERSION, STATES, fingerprint, main
from opsd_sweep.summary import main as summary_main
from tests.conftest import REPO, run_sweep
from tests.orchestration.conftest import TINY, sweep_env
from tests.premises import run_dir_of, start_at_band

# Every field of schema_version 1 with its JSON type(s); None stands for null.
TOP = {"schema_version": int, "root": str, "generated_at": str, "settled": bool, "counts": dict, "runs": list,
       "configs": list, "summaries": list}
RUN = {"run": str, "run_id": str, "kind": str, "state": str, "phase": (str, None), "step": (int, None),
       "max_steps": (int, None), "gpus": list, "host": (str, None), "pid": (int, None), "job_id": (str, None),
       "elapsed_s": (float, int, None), "eta_s": (float, int, None), "gpu_hours": (float, int),
       "error": (str, None), "note": str, "config": str, "label": (str, None)}
CONFIG = {"config": str, "label": (str, None), "runs": int, "done": int, "running": int, "failed": int,
          "collapsed": int, "other": int, "verdict": (str, None)}
SUMMARY = {"path": str, "written_at": str, "runs_ended_since": int, "verdicts": list}
VERDICT = {"label": str, "n": (int, None), "mean": (float, None), "ci_low": (float, None),
           "ci_high": (float, None), "verdict": (str, None), "verdict_vs": (str, None)}

CYCLE = [*TINY, "train.max_steps=2"]
# A run stopped at its collapse at step 2, under a rule of one early step and no patience. Whether a tiny run
# collapses is the CPU's (lr=0.2 broke the model at its second step on the CPUs measured), so it starts at step 1
# with its early step built (tests/premises.py): a 1-step donor's checkpoint and step, with a mean completion of
# 100 tokens, which no completion of rollout.max_new_tokens=24 is within 25% of; step 2 is trained here.
COLLAPSING = [*(a for a in CYCLE if not a.startswith("rollout.max_new_tokens")), "learning_rate=0.2",
              "seed=1", "train.stop_on_collapse=true", "train.collapse.early_steps=1",
              "train.collapse.patience=1"]


def check_fields(obj: dict, schema: dict, where: str) -> None:
    assert set(schema) <= set(obj), f"{where} lacks {sorted(set(schema) - set(obj))}"
    for name, kinds in schema.items():
        kinds = kinds if isinstance(kinds, tuple) else (kinds,)
        kinds = tuple(type(None) if k is None else k for k in kinds)
        assert isinstance(obj[name], kinds) and not (isinstance(obj[name], bool) and bool not in kinds), \
            f"{where}.{name} = {obj[name]!r} is not {kinds}"


def check_schema(out: dict) -> None:
    check_fields(out, TOP, "status")
    assert out["schema_version"] == SCHEMA_VERSION == 1
    assert set(STATES) <= set(out["counts"]) and sum(out["counts"].values()) == len(out["runs"])
    for run in out["runs"]:
        check_fields(run, RUN, f"runs[{run.get('run')}]")
        assert run["state"] in STATES and run["kind"] in ("cycle", "eval_only")
        assert run["phase"] in ("train", "evaluate", None) and all(isinstance(g, str) for g in run["gpus"])
    for config in out["configs"]:
        check_fields(config, CONFIG, f"configs[{config.get('config')}]")
        assert config["runs"] == sum(config[k] for k in ("done", "running", "failed", "collapsed", "other"))
    for summary in out["summaries"]:
        check_fields(summary, SUMMARY, f"summaries[{summary.get('path')}]")
        for verdict in summary["verdicts"]:
            check_fields(verdict, VERDICT, f"{summary['path']} verdicts")


def status_cli(*args: str, **popen) -> subprocess.Popen:
    """`python -m opsd_sweep.status ARGS` in a subprocess, stdout and stderr as text pipes."""
    return subprocess.Popen([sys.executable, "-m", "opsd_sweep.status", *args], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen)


def await_first_snapshot(proc: subprocess.Popen) -> None:
    """Read the waiter's stderr up to the line it prints once its first reading is taken."""
    seen = []
    while "first snapshot taken" not in (line := proc.stderr.readline()):
        seen.append(line)
        assert line, f"the waiter ended before its first snapshot: {''.join(seen)}"


@pytest.fixture(scope="module")
def swept(tmp_path_factory, tiny_cache):
    """A results root after a real tiny sweep, a run stopped at its collapse, a standalone evaluation of the
    base model (all of group tiny) and a summary of the root."""
    results, donors = tmp_path_factory.mktemp("results"), tmp_path_factory.mktemp("donors")
    one_step = [*(a for a in COLLAPSING if not a.startswith("train.max_steps")), "train.max_steps=1"]
    donor = run_sweep(["-m", *one_step], donors, tiny_cache)
    assert donor.returncode == 0, donor.stdout[-3000:] + donor.stderr[-3000:]
    pair = run_sweep(["-m", *CYCLE, "learning_rate=1e-3", "seed=1,2"], results, tiny_cache)
    assert pair.returncode == 0, pair.stdout[-3000:] + pair.stderr[-3000:]
    base = subprocess.Popen([sys.executable, "-m", "opsd_sweep.evaluate", *CYCLE[:-1], "train.max_steps=0",
                             "seed=1"], cwd=REPO, env=sweep_env(results, tiny_cache), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    (donor_dir,) = (donors / "tiny").glob("lr0.2-*")
    stopped = run_dir_of(COLLAPSING, results, tiny_cache)
    start_at_band(stopped, donor_dir, rollout_len=100.0)
    collapsing = run_sweep(["-m", *COLLAPSING], results, tiny_cache)
    evaluated = base.communicate(timeout=600)[0]
    assert collapsing.returncode == 0, collapsing.stdout[-3000:] + collapsing.stderr[-3000:]
    assert "checkpoint-1 at step 1" in (stopped / "logs" / "train.log").read_text()  # step 2 judged by the band
    assert base.returncode == 0, evaluated[-3000:]
    return results


@pytest.mark.slow
def test_the_json_of_a_real_tiny_sweep_follows_the_schema(swept):
    proc = status_cli(str(swept), "--json")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    status = json.loads(out)
    check_schema(status)
    assert status["settled"] is True and status["summaries"] == []  # no summary yet
    runs = {r["run"].split("/")[1].rsplit("-", 1)[0]: r for r in status["runs"]}
    assert set(runs) == {"lr0.001-noclip-s1", "lr0.001-noclip-s2", "lr0.2-noclip-s1",
                         "eval-tiny-qwen3-base-s1"}
    assert {k: v for k, v in status["counts"].items() if v} == {"done": 3, "collapsed": 1}

    trained = runs["lr0.001-noclip-s1"]
    assert (trained["kind"], trained["state"], trained["phase"], trained["step"], trained["max_steps"]) == \
        ("cycle", "done", None, 2, 2)
    assert trained["host"] == socket.gethostname() and trained["gpus"] == [] and trained["error"] is None
    assert trained["config"] == runs["lr0.001-noclip-s2"]["config"]  # two seeds, one config
    assert trained["config"].startswith("tiny/lr0.001-noclip#") and trained["label"] is None

    collapsed = runs["lr0.2-noclip-s1"]  # stopped at its collapse: not interrupted, not done
    assert (collapsed["state"], collapsed["phase"]) == ("collapsed", "train")
    assert collapsed["note"].startswith("collapsed at step 2: ")

    base = runs["eval-tiny-qwen3-base-s1"]  # a standalone evaluation says where it ran
    assert (base["kind"], base["state"], base["max_steps"]) == ("eval_only", "done", None)
    assert base["host"] == socket.gethostname() and isinstance(base["pid"], int)

    configs = {c["config"]: c for c in status["configs"]}
    assert len(configs) == 3
    assert configs[trained["config"]] | {"config": None} == {
        "config": None, "label": None, "runs": 2, "done": 2, "running": 0, "failed": 0, "collapsed": 0,
        "other": 0, "verdict": None}
    assert (configs[collapsed["config"]]["collapsed"], configs[collapsed["config"]]["done"]) == (1, 0)


@pytest.mark.slow
def test_the_json_carries_the_summary_verdicts_and_labels_once_a_summary_ran(swept, capsys):
    summary_main([str(swept), "--baseline", "max_steps=0", "--anchor", "none", "--no-plots"])
    capsys.readouterr()
    assert main([str(swept), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    check_schema(status)
    [summary] = status["summaries"]
    assert summary["path"] == "summary.csv" and summary["runs_ended_since"] == 0
    verdicts = {v["label"]: v for v in summary["verdicts"]}
    assert verdicts["base model"]["verdict"] == "baseline" and verdicts["base model"]["n"] == 1
    configs = {c["config"]: c for c in status["configs"]}
    for run in status["runs"]:  # each run is labelled as runs.csv labels it; its config gets the verdict
        assert run["label"] is not None, run
        config = configs[run["config"]]
        assert config["label"] == run["label"]
        assert config["verdict"] == (verdicts[run["label"]]["verdict"] if run["state"] == "done" else None)
    trained = [c for c in configs.values() if c["config"].startswith("tiny/lr0.001-noclip#")]
    assert trained and trained[0]["verdict"] in ("better", "worse", "inconclusive")
    assert verdicts[trained[0]["label"]]["n"] == 2


@pytest.mark.slow
def test_waiting_for_done_on_a_finished_root_returns_0_at_once(swept, capsys):
    assert main([str(swept), "--wait-for", "done", "--timeout", "60", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["settled"] is True and "every run settled" in captured.err


# --- the waits on hand-built roots ------------------------------------------------------------------

def make_run(root, name: str, status: dict) -> RunDir:
    run_dir = RunDir(root / "grp" / name)
    run_dir.train_dir.mkdir(parents=True)
    run_dir.config.write_text("train:\n  max_steps: 4\n")
    atomic_write_json(run_dir.status, status)
    return run_dir


@pytest.fixture
def live_pending(tmp_path):
    """A root of one done run and one pending run claimed by this test process (alive)."""
    make_run(tmp_path, "done-s1-0000aaaa", {"state": "done", "started_at": "2026-11-30T10:00:00.000+00:00",
                                           "ended_at": "2026-11-30T10:05:00.000+00:00"})
    pending = make_run(tmp_path, "pending-s1-0000bbbb", {})
    claim = claim_run(pending)
    pending.update_status(state="pending", host=claim.owner["host"], pid=claim.owner["pid"],
                          started_at="2026-11-30T10:00:00.000+00:00")
    yield tmp_path
    release_run(claim)


def test_waiting_for_done_times_out_while_a_live_process_holds_a_pending_run(live_pending, capsys):
    code = main([str(live_pending), "--wait-for", "done", "--timeout", "1", "--interval", "0.2", "--json"])
    assert code == 3
    captured = capsys.readouterr()
    status = json.loads(captured.out)  # the final reading is still printed
    assert status["settled"] is False and status["counts"]["pending"] == 1 and "timed out" in captured.err


def test_waiting_for_done_says_when_a_run_failed(tmp_path, capsys):
    make_run(tmp_path, "ok-s1-0000aaaa", {"state": "done"})
    error = {"message": "train phase exited with code 1\nsee logs/train.log"}
    make_run(tmp_path, "bad-s1-0000bbbb", {"state": "failed", "error": error})
    assert main([str(tmp_path), "--wait-for", "done", "--timeout", "5", "--json"]) == 4
    status = json.loads(capsys.readouterr().out)
    bad = next(r for r in status["runs"] if r["run"] == "grp/bad-s1-0000bbbb")
    assert bad["error"] == "train phase exited with code 1"
    failed = [(c["config"].split("#")[0], c["failed"]) for c in status["configs"]]
    assert failed == [("grp/bad", 1), ("grp/ok", 0)]


def test_an_empty_root_is_not_done(tmp_path, capsys):
    assert main([str(tmp_path), "--wait-for", "done", "--timeout", "0"]) == 3
    capsys.readouterr()


def test_any_change_returns_0_when_a_status_file_changes(live_pending):
    waiter = status_cli(str(live_pending), "--wait-for", "any-change", "--timeout", "300",
                        "--interval", "0.2", "--json")
    try:
        await_first_snapshot(waiter)
        RunDir(live_pending / "grp" / "done-s1-0000aaaa").update_status(state="failed",
                                                                        error={"message": "found wrong"})
        out, err = waiter.communicate(timeout=120)
    finally:
        waiter.kill()
    assert waiter.returncode == 0, err
    states = {r["run"]: r["state"] for r in json.loads(out)["runs"]}
    assert states == {"grp/done-s1-0000aaaa": "failed", "grp/pending-s1-0000bbbb": "pending"}


def test_ctrl_c_ends_a_wait_cleanly(live_pending):
    waiter = status_cli(str(live_pending), "--wait-for", "done", "--interval", "0.2", "--json")
    try:
        await_first_snapshot(waiter)
        waiter.send_signal(signal.SIGINT)
        out, err = waiter.communicate(timeout=60)
    finally:
        waiter.kill()
    assert waiter.returncode == 130 and out == "" and "Traceback" not in err, err


def test_any_change_ignores_the_clocks():
    run = {"run": "g/r", "state": "training", "elapsed_s": 10.0, "eta_s": 5.0}
    a = {"generated_at": "2026-12-01T00:00:00", "runs": [run], "settled": False}
    later = run | {"elapsed_s": 17.0, "eta_s": 1.0}
    b = {"generated_at": "2026-12-01T00:00:07", "runs": [later], "settled": False}
    assert fingerprint(a) == fingerprint(b)
    assert fingerprint(a) != fingerprint(b | {"runs": [run | {"state": "evaluating"}]})


def test_an_evaluation_that_did_not_record_its_host_shows_its_claimant(tmp_path, capsys):
    """A standalone evaluation written before it recorded host and pid in status.json: its last claim says."""
    run_dir = make_run(tmp_path, "eval-m-base-s1-0000cccc", {})
    release_run(claim_run(run_dir))
    run_dir.update_status(kind="eval_only", state="done")
    assert main([str(tmp_path), "--json"]) == 0
    [run] = json.loads(capsys.readouterr().out)["runs"]
    assert (run["kind"], run["host"], run["pid"], run["max_steps"]) == ("eval_only", socket.gethostname(),
                                                                        os.getpid(), None)
    main([str(tmp_path)])
    assert f"{socket.gethostname()}:{os.getpid()}" in capsys.readouterr().out
