"""Eval datasets: every conf/eval option composes, local files with custom fields, clear offline errors."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from opsd_sweep import CONF_DIR
from opsd_sweep.config import load_run_config
from opsd_sweep.data import DatasetUnavailableError, load_rows
from opsd_sweep.evaluate.datasets import load_problems
from tests.conftest import compose

ROWS = [{"question": "1+1?", "final": 2, "uid": "q-a"}, {"question": "2+2?", "final": "4", "uid": "q-b"},
        {"question": "3+3?", "final": "6", "uid": "q-c"}]


def local_eval(path, *extra):
    return load_run_config(compose(["eval=local", f"eval.path={path}", "eval.problem_field=question",
                                    "eval.answer_field=final", *extra])).eval


@pytest.mark.parametrize("name, hub_id, split, id_field", [
    ("aime24", "HuggingFaceH4/aime_2024", "train", "id"),
    ("aime25", "yentinglin/aime_2025", "train", None),
    ("hmmt25", "MathArena/hmmt_feb_2025", "train", "problem_idx"),
    ("math500", "HuggingFaceH4/MATH-500", "test", "unique_id"),
])
def test_benchmark_configs_name_their_datasets(name, hub_id, split, id_field):
    e = load_run_config(compose([f"eval={name}"])).eval
    assert (e.name, e.path, e.split, e.id_field) == (name, hub_id, split, id_field)
    assert (e.n_samples, e.temperature, e.top_p, e.max_new_tokens, e.thinking) == (12, 1.0, 0.95, 38912, True)


def test_every_eval_option_is_covered_here():
    assert sorted(p.stem for p in (CONF_DIR / "eval").glob("*.yaml")) == [
        "aime24", "aime25", "hmmt25", "local", "math500", "math_suite",  # math_suite: test_suite.py
        "tiny_locked"]  # tests/test_confirm.py


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".parquet"])
def test_local_files_with_configured_fields(tmp_path, suffix):
    path = tmp_path / f"test{suffix}"
    if suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    elif suffix == ".json":
        path.write_text(json.dumps(ROWS))
    else:
        pd.DataFrame(ROWS).astype({"final": str}).to_parquet(path)
    problems = load_problems(local_eval(path, "eval.id_field=uid", "eval.max_problems=2"))
    assert [(p.id, p.problem, p.answer) for p in problems] == [("q-a", "1+1?", "2"), ("q-b", "2+2?", "4")]


def test_row_position_ids_when_no_id_field(tmp_path):
    path = tmp_path / "test.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    assert [p.id for p in load_problems(local_eval(path))] == ["0", "1", "2"]


def test_missing_column_lists_the_columns_and_the_keys_to_set(tmp_path):
    path = tmp_path / "test.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    with pytest.raises(KeyError, match=r"no column\(s\) \['problem'\].*'final', 'question', 'uid'.*eval\.\*_field"):
        load_problems(local_eval(path, "eval.problem_field=problem"))


def test_duplicate_ids_are_refused(tmp_path):
    path = tmp_path / "test.jsonl"
    path.write_text("".join(json.dumps(r | {"uid": "same"}) + "\n" for r in ROWS))
    with pytest.raises(ValueError, match="id 'same' of column 'uid' is not unique; set eval.id_field"):
        load_problems(local_eval(path, "eval.id_field=uid"))


def test_missing_local_file_names_the_key(tmp_path):
    with pytest.raises(DatasetUnavailableError, match="set eval.path to an existing"):
        load_problems(local_eval(tmp_path / "nope.jsonl"))


def test_uncached_hub_dataset_offline_names_it_and_both_fixes(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DatasetUnavailableError) as err:
        load_rows("opsd-sweep-tests/no-such-dataset", "train", {"problem": "problem"}, section="eval")
    message = str(err.value)
    assert "'opsd-sweep-tests/no-such-dataset' (split 'train') could not be loaded" in message
    assert "load_dataset('opsd-sweep-tests/no-such-dataset', split='train')" in message
    assert "eval.path=/path/to/file.jsonl" in message
