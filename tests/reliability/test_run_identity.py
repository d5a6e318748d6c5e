"""Issue 16, item 1: every value that changes what is trained or evaluated enters the run key, and a grid
whose points would share one run dir is refused before any compute."""

from __future__ import annotations

import shutil

from opsd_sweep.config import load_run_config
from opsd_sweep.run.keys import semantic_dict
from opsd_sweep.preflight import preflight_problems
from opsd_sweep.run.keys import run_key
from tests.conftest import compose, run_sweep

SIM = ["executor=simulate", "group=ident"]


def key(*overrides: str) -> str:
    return run_key(semantic_dict(load_run_config(compose([*SIM, *overrides]))))


def write_table(path, answers: list[int]) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f'{{"problem": "p{i}", "solution": "{a}", "answer": "{a}"}}\n'
                            for i, a in enumerate(answers)))
    return str(path)


def test_paths_enter_the_key_by_what_they_hold(tmp_path):
    a, b = write_table(tmp_path / "a.jsonl", [1, 2]), write_table(tmp_path / "b.jsonl", [1, 3])
    moved = tmp_path / "elsewhere" / "a.jsonl"
    moved.parent.mkdir()
    shutil.copy(a, moved)
    assert key(f"data.path={a}") != key(f"data.path={b}")
    assert key(f"eval.path={a}") != key(f"eval.path={b}")
    assert key(f"data.path={a}") == key(f"data.path={moved}")  # same bytes elsewhere: same run
    assert key("model.path=Qwen/Qwen3-1.7B") != key("model.path=Qwen/Qwen3-4B")  # a hub id is its identity
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"vocab_size": 10}')
    before = key(f"model.path={model}")
    (model / "config.json").write_text('{"vocab_size": 11}')
    assert key(f"model.path={model}") != before


def test_grid_points_with_different_data_are_different_runs(tmp_path, cache_dir):
    a, b = write_table(tmp_path / "a.jsonl", [1, 2]), write_table(tmp_path / "b.jsonl", [1, 3])
    proc = run_sweep(["-m", *SIM, f"data.path={a},{b}", "seed=1"], tmp_path / "results", cache_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "already done" not in proc.stdout + proc.stderr
    assert len(list((tmp_path / "results" / "ident").glob("lr*"))) == 2


def test_a_grid_whose_points_collide_is_refused_before_compute(tmp_path, cache_dir):
    a = write_table(tmp_path / "a.jsonl", [1, 2])
    copy = tmp_path / "copy.jsonl"
    shutil.copy(a, copy)
    proc = run_sweep(["-m", *SIM, f"data.path={a},{copy}", "eval.batch_size=4", "seed=1"], tmp_path / "results",
                     cache_dir)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "would all be the one run" in output, output[-3000:]
    assert f"#0 data.path={a}," in output and f"#1 data.path={copy}:" in output
    assert not list((tmp_path / "results" / "ident").glob("lr*"))


def test_each_table_of_an_eval_suite_enters_the_key_and_the_preflight(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    table = tmp_path / "aime25.jsonl"
    table.write_text('{"problem": "1+1?", "answer": "2"}\n')
    before = run_key(semantic_dict(load_run_config(compose(["eval=math_suite", f"eval.suite.aime25.path={table}"]))))
    table.write_text('{"problem": "1+22?", "answer": "23"}\n')  # same path, other problems
    after = run_key(semantic_dict(load_run_config(compose(["eval=math_suite", f"eval.suite.aime25.path={table}"]))))
    assert before != after
    missing = load_run_config(compose(["eval=math_suite", f"eval.suite.aime25.path={tmp_path}/gone.jsonl"]))
    problems = preflight_problems(missing, train=False)
    assert any(p.startswith(f"eval.suite.aime25.path={tmp_path}/gone.jsonl does not exist") for p in problems), problems
