"""Issue 21, item 1: a run dir records the identities of its inputs, and a dir is reused or taken over
only when they are today's. An input edited in place is a new experiment; a dir written before records
existed is taken over only when provably unchanged, else left as it is and listed as stale."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from opsd_sweep.config import load_run_config
from opsd_sweep.cycle import locate, run_cycle
from opsd_sweep.status import main as status_main
from tests.conftest import compose, run_sweep
from tests.reliability.test_read_only_checks import snapshot

SIM = ["executor=simulate", "group=g", "seed=1", "data=local"]


def write_table(path: Path, answers: list[int]) -> Path:
    path.write_text("".join(f'{{"problem": "p{i}", "solution": "{a}", "answer": "{a}"}}\n'
                            for i, a in enumerate(answers)))
    return path


def cycle(results: Path, data: Path, cache_dir: Path) -> dict:
    return run_cycle(load_run_config(compose([*SIM, f"data.path={data}", f"results_root={results}",
                                              f"cache_dir={cache_dir}"])))


def run_dirs(results: Path) -> list[Path]:
    return sorted(p for p in (results / "g").iterdir() if not p.name.startswith("."))


def test_a_rerun_after_the_data_file_was_edited_in_place_is_a_new_run(tmp_path, cache_dir):
    results, data = tmp_path / "results", write_table(tmp_path / "F.jsonl", [1, 2])
    args = ["-m", *SIM, f"data.path={data}"]
    first = run_sweep(args, results, cache_dir)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    [old] = run_dirs(results)
    recorded = json.loads((old / "identity.json").read_text())["inputs"]["data"]
    before = snapshot(old)
    write_table(data, [1, 3])  # same path, other problems
    second = run_sweep(args, results, cache_dir)
    output = second.stdout + second.stderr
    assert second.returncode == 0, output[-3000:]
    assert "already done" not in output and "results kept" not in output, output[-3000:]
    assert f"{old.name}: its recorded identity of data differs from today's" in output
    new = [p for p in run_dirs(results) if p != old]
    assert len(new) == 1 and json.loads((new[0] / "status.json").read_text())["state"] == "done"
    assert json.loads((new[0] / "identity.json").read_text())["inputs"]["data"] != recorded
    assert snapshot(old) == before  # the run of the earlier data is left as it was


def unrecorded_earlier_dir(run_dir: Path) -> Path:
    """The dir as a release before identity records (and with another run key) would have left it."""
    earlier = run_dir.with_name(run_dir.name[:-8] + "0123abcd")
    run_dir.rename(earlier)
    (earlier / "identity.json").unlink()
    return earlier


def test_an_unrecorded_dir_whose_input_changed_after_it_started_is_stale_and_left_untouched(tmp_path, cache_dir,
                                                                                            capsys):
    results, data = tmp_path / "results", write_table(tmp_path / "F.jsonl", [1, 2])
    first = cycle(results, data, cache_dir)
    assert first["state"] == "done"
    earlier = unrecorded_earlier_dir(Path(first["run_dir"]))
    write_table(data, [1, 3])
    started = json.loads((earlier / "status.json").read_text())["started_at"]
    os.utime(data, (os.stat(data).st_atime, os.stat(data).st_mtime + 5))  # edited after the run started
    before = snapshot(results)
    cfg = compose([*SIM, f"data.path={data}", f"results_root={results}", f"cache_dir={cache_dir}"])
    assert locate(load_run_config(cfg)).earlier is None and snapshot(results) == before
    capsys.readouterr()
    second = run_cycle(load_run_config(cfg))
    out = capsys.readouterr().out
    assert second["state"] == "done" and second["run_dir"] != str(earlier)
    assert f"{earlier.name}: stale: written before identities were recorded, and data ({data}) was modified" in out
    assert started[:19] in out
    assert snapshot(earlier) == {k.removeprefix(f"g/{earlier.name}/"): v for k, v in before.items()
                                 if k.startswith(f"g/{earlier.name}/")}
    status_main([str(results)])
    shown = " ".join(capsys.readouterr().out.split())
    assert "stale" in shown and "modified" in shown, shown


def test_an_unrecorded_dir_whose_inputs_predate_its_start_is_taken_over_with_its_results(tmp_path, cache_dir,
                                                                                        capsys):
    results, data = tmp_path / "results", write_table(tmp_path / "F.jsonl", [1, 2])
    os.utime(data, (1_000_000_000, 1_000_000_000))  # written long before the run
    first = cycle(results, data, cache_dir)
    target = Path(first["run_dir"])
    scores = json.loads((target / "eval" / "eval.json").read_text())["metrics"]
    earlier = unrecorded_earlier_dir(target)
    capsys.readouterr()
    second = cycle(results, data, cache_dir)
    out = capsys.readouterr().out
    assert f"{earlier.name} was written before a change of the run key" in out and "already done" in out
    assert second["run_dir"] == str(target) and not earlier.exists()
    assert json.loads((target / "eval" / "eval.json").read_text())["metrics"] == scores
    assert (target / "identity.json").exists()


def test_a_done_run_of_todays_key_gets_its_record_on_the_next_rerun(tmp_path, cache_dir):
    results, data = tmp_path / "results", write_table(tmp_path / "F.jsonl", [1, 2])
    run_dir = Path(cycle(results, data, cache_dir)["run_dir"])
    (run_dir / "identity.json").unlink()  # as the release before records wrote it (same key: same content)
    assert cycle(results, data, cache_dir)["reason"] == "done"
    inputs = json.loads((run_dir / "identity.json").read_text())["inputs"]
    assert inputs["data"].startswith("file:") and set(inputs) >= {"model", "data", "eval"}
    shutil.rmtree(results)
