"""The tiny world's parts: the task, the tokenizer, and the cached, rebuilt-on-change, concurrency-safe assets."""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from opsd_sweep.config import load_run_config
from opsd_sweep.tiny import (
    arithmetic_facts,
    build_tokenizer,
    check_numbers_are_single_tokens,
    ensure_tiny_assets,
    make_datasets,
    tiny_vocab_size,
    tokenizer_corpus,
    worked_solution,
)
from tests.conftest import compose


def test_solutions_compute_what_they_claim_and_the_slip_never_lands_on_the_answer():
    train, held_out = make_datasets(112, 32, seed=0)
    for row in train + held_out:
        a, b, c = map(int, re.fullmatch(r"(\d+)\+(\d+)\*(\d+)=\?", row["problem"]).groups())
        assert int(row["answer"]) == a + b * c
        assert row["solution"].endswith(f"\\boxed{{{a + b * c}}}")
        assert row["slip_solution"].endswith(f"\\boxed{{{(a + b) * c}}}") and (a + b) * c != a + b * c
        for x, op, y, result in re.findall(r"(\d+)([+*])(\d+)=(\d+)", row["solution"] + row["slip_solution"]):
            assert int(result) == (int(x) + int(y) if op == "+" else int(x) * int(y))  # every step is true


def test_held_out_problems_never_appear_in_training_and_the_split_is_reproducible():
    train, held_out = make_datasets(112, 32, seed=0)
    assert len(train) == 112 and len(held_out) == 32
    assert not {r["problem"] for r in train} & {r["problem"] for r in held_out}
    assert make_datasets(112, 32, seed=0) == (train, held_out)
    assert make_datasets(112, 32, seed=1)[1] != held_out


def test_too_many_problems_is_a_clear_error():
    with pytest.raises(ValueError, match=r"tiny.n_train=200 \+ tiny.n_eval=32 exceeds the 144 distinct"):
        make_datasets(200, 32, seed=0)


def test_the_arithmetic_facts_are_true_and_include_both_methods_steps():
    facts = arithmetic_facts()
    for fact in facts:
        x, op, y, result = re.fullmatch(r"(\d+)([+*])(\d+)=(\d+)", fact).groups()
        assert int(result) == (int(x) + int(y) if op == "+" else int(x) * int(y)), fact
    assert {"5*5=25", "3+25=28", "3+5=8", "8*5=40"} <= set(facts)  # 3+5*5: both methods' steps


def test_every_number_is_one_token_so_every_solution_has_one_length():
    cfg = load_run_config(compose(["profile=tiny"])).tiny
    train, held_out = make_datasets(cfg.n_train, cfg.n_eval, cfg.seed)
    tokenizer = build_tokenizer(tokenizer_corpus(train + held_out, cfg.warm_start), cfg.vocab_size)
    check_numbers_are_single_tokens(tokenizer, train + held_out)
    ids = tokenizer(worked_solution(3, 5, 5, precedence=True)[0], add_special_tokens=False)["input_ids"]
    assert tokenizer.convert_ids_to_tokens(ids)[:5] == ["5", "*", "5", "=", "25"]
    starved = build_tokenizer(tokenizer_corpus(train + held_out, cfg.warm_start), 300)
    with pytest.raises(ValueError, match="raise tiny.vocab_size"):
        check_numbers_are_single_tokens(starved, train + held_out)


def quick_world(tmp_path, *extra: str):
    """The tiny profile with a 2-step warm start: the same build path in a few seconds."""
    return load_run_config(compose(["profile=tiny", f"cache_dir={tmp_path}", "tiny.warm_start.steps=2", *extra])).tiny


def test_assets_are_cached_and_rebuilt_when_a_warm_start_setting_changes(tmp_path, capsys):
    cfg = quick_world(tmp_path)
    root = ensure_tiny_assets(cfg)
    assert {"model", "train.jsonl", "eval.jsonl", "warm_start.json", "settings.json"} <= {p.name for p in root.iterdir()}
    report = json.loads((root / "warm_start.json").read_text())
    assert set(report["heldout_reference_probability"]) == {"teacher", "student"}
    ensure_tiny_assets(cfg)
    assert capsys.readouterr().out.count("tiny warm start:") == 1  # the second call found the cache
    ensure_tiny_assets(quick_world(tmp_path, "tiny.warm_start.slip_rate=0.25"))
    assert capsys.readouterr().out.count("tiny warm start:") == 1  # a changed setting rebuilds
    assert '"slip_rate": 0.25' in (root / "settings.json").read_text()


def test_concurrent_builders_build_once(tmp_path, capsys):
    cfg = quick_world(tmp_path)
    with ThreadPoolExecutor(2) as pool:  # flock also excludes a second open() of the lock file in one process
        roots = [f.result() for f in [pool.submit(ensure_tiny_assets, cfg) for _ in range(2)]]
    assert roots[0] == roots[1] and (roots[0] / "model/config.json").exists()
    assert capsys.readouterr().out.count("tiny warm start:") == 1


def test_the_vocabulary_known_before_the_build_is_the_built_models(tmp_path):
    """The pre-flight and the inert-settings check read the tiny model's vocabulary before any world exists: the
    tokenizer trained alone must give what the build saves (and far less than tiny.vocab_size, its upper bound)."""
    cfg = quick_world(tmp_path)
    before = tiny_vocab_size(cfg)
    assert not (tmp_path / "tiny").exists()  # asking built nothing
    root = ensure_tiny_assets(cfg)
    assert json.loads((root / "model" / "config.json").read_text())["vocab_size"] == before < cfg.vocab_size
    assert tiny_vocab_size(cfg) == before  # now read from the world on disk
