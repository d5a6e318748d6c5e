"""Issue 39, item 4: `python -m opsd_sweep.evaluate compare A B`, the evaluator equivalence check. The statistics
on hand-built cases with exact answers; then two real tiny standalone evaluations of one model under two hf
settings compared through the CLI, and refusals of evaluations that differ in more than the evaluator."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.weightstats import ttost_paired

from opsd_sweep.evaluate.compare import NotComparable, compare
from opsd_sweep.scoring.grade import grader_identity
from opsd_sweep.evaluate.standalone import evaluate_standalone, locate_eval_dir
from opsd_sweep.inference.equivalence import DIFFERENT, EQUIVALENT, INCONCLUSIVE, paired_equivalence
from opsd_sweep.run.rundir import read_json
from tests.evaluate.conftest import eval_run, evaluate_cli

# --- the statistics ------------------------------------------------------------------------------


def test_identical_evaluations_are_equivalent_with_no_difference():
    rates = np.array([0.0, 25.0, 50.0, 100.0, 75.0])
    test = paired_equivalence(rates, rates.copy(), margin=1.0, level=0.95)
    assert test.verdict == EQUIVALENT
    assert (test.difference, test.se, test.low, test.high, test.tost_low, test.tost_high, test.tost_p) == (
        0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


def test_hand_computed_case_with_two_degrees_of_freedom():
    """d = (1, 2, 3): mean 2, SD 1, se 1/sqrt(3). With df = 2 the t distribution has a closed form:
    F(t) = 1/2 + t / (2 sqrt(2 + t^2)), quantile (2q - 1) / sqrt(2 q (1 - q))."""
    a = np.array([10.0, 20.0, 30.0])
    test = paired_equivalence(a, a + [1.0, 2.0, 3.0], margin=5.0, level=0.95)
    se = 1 / math.sqrt(3)
    quantile = lambda q: (2 * q - 1) / math.sqrt(2 * q * (1 - q))  # noqa: E731
    assert (test.difference, test.df) == (2.0, 2) and test.se == pytest.approx(se)
    assert (test.low, test.high) == pytest.approx((2 - quantile(0.975) * se, 2 + quantile(0.975) * se))
    assert (test.tost_low, test.tost_high) == pytest.approx((2 - quantile(0.95) * se, 2 + quantile(0.95) * se))
    t_upper = (2 - 5) / se  # the binding one-sided test: mean < +5
    assert test.tost_p == pytest.approx(0.5 + t_upper / (2 * math.sqrt(2 + t_upper ** 2)))  # 0.01755
    assert test.verdict == EQUIVALENT  # p 0.018 <= 0.05; the 90% interval [0.31, 3.69] lies inside +-5


def test_a_shifted_evaluator_is_different_and_matches_scipy_and_statsmodels():
    rng = np.random.default_rng(0)
    a = rng.uniform(0, 100, size=30)
    b = a + 10 + rng.normal(0, 2, size=30)
    test = paired_equivalence(a, b, margin=1.0, level=0.95)
    assert test.verdict == DIFFERENT and test.low > 1
    d = b - a
    half = sps.t.ppf(0.975, 29) * d.std(ddof=1) / math.sqrt(30)
    assert (test.difference, test.low, test.high) == pytest.approx((d.mean(), d.mean() - half, d.mean() + half))
    assert test.tost_p == pytest.approx(ttost_paired(b, a, -1.0, 1.0)[0])
    assert sps.ttest_rel(b, a).pvalue < 0.05  # the level's interval excludes 0, as the paired t-test says
    lower = paired_equivalence(b, a, margin=1.0, level=0.95)  # A and B swapped: the sign flips, nothing else
    assert (lower.verdict, lower.difference, lower.low) == pytest.approx((DIFFERENT, -test.difference, -test.high))


def test_few_noisy_problems_are_inconclusive():
    test = paired_equivalence(np.array([0.0, 50.0, 100.0, 50.0]), np.array([50.0, 0.0, 100.0, 100.0]),
                              margin=1.0, level=0.95)
    assert test.verdict == INCONCLUSIVE and test.low < 0 < test.high and test.tost_p > 0.05


def test_a_small_significant_difference_inside_the_margin_is_equivalent():
    rng = np.random.default_rng(1)
    a = rng.uniform(0, 100, size=200)
    test = paired_equivalence(a, a + 0.3 + rng.normal(0, 0.5, size=200), margin=1.0, level=0.95)
    assert test.low > 0 and test.verdict == EQUIVALENT  # TOST passes first: the 90% interval is inside +-1


def test_a_constant_difference_on_the_margin_is_not_equivalent():
    a = np.array([10.0, 20.0, 30.0])
    test = paired_equivalence(a, a + 1.0, margin=1.0, level=0.95)
    assert (test.se, test.tost_p, test.verdict) == (0.0, 1.0, DIFFERENT)


@pytest.mark.parametrize("a, b, margin, level, named", [
    ([1.0], [1.0], 1.0, 0.95, "at least 2 problems"),
    ([1.0, 2.0], [1.0], 1.0, 0.95, "shapes (2,) and (1,)"),
    ([1.0, 2.0], [1.0, 2.0], 0.0, 0.95, "margin=0.0"),
    ([1.0, 2.0], [1.0, 2.0], 1.0, 0.3, "level=0.3"),
])
def test_bad_inputs_are_named(a, b, margin, level, named):
    with pytest.raises(ValueError, match=named.replace("(", r"\(").replace(")", r"\)")):
        paired_equivalence(np.array(a), np.array(b), margin=margin, level=level)


# --- real evaluations on the tiny world ----------------------------------------------------------


@pytest.fixture(scope="module")
def two_settings(tiny_world, tmp_path_factory):
    """The tiny base model evaluated twice, eval.hf_cache=dynamic (group exact) and static (group static):
    hf_cache is outside the run key, so the group keeps the two run dirs apart. Returns (results, A, B)."""
    import torch

    results = tmp_path_factory.mktemp("compare")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the suite's autouse fixture does per test
    try:
        dirs = []
        for group, cache in (("exact", "dynamic"), ("static", "static")):
            run = eval_run(tiny_world, results, f"group={group}", f"eval.hf_cache={cache}")
            evaluate_standalone(run)
            dirs.append(locate_eval_dir(run)[1])
    finally:
        torch.set_num_threads(threads)
    return results, dirs[0], dirs[1]


def test_compare_cli_on_two_hf_settings_prints_one_line_and_records_the_verdict(two_settings):
    _, a, b = two_settings
    proc = evaluate_cli(["compare", str(a.path), str(b.path)])
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out[-3000:]
    record_path = b.eval_dir / f"compare_exact_{a.path.name}.json"
    record = read_json(record_path)
    # the same per-sample seeds and the same logits: every sample is drawn alike, B - A is exactly 0
    assert (record["verdict"], record["difference"], record["ci"], record["tost_p"]) == (EQUIVALENT, 0.0,
                                                                                       [0.0, 0.0], 0.0)
    assert (record["n_problems"], record["n_samples"], record["margin"], record["level"]) == (8, 2, 1.0, 0.95)
    assert record["samples_same_correctness"] == record["samples"] == 16
    assert record["settings_differ"] == {"eval.hf_cache": ["dynamic", "static"]}
    for side, run_dir in (("a", a), ("b", b)):
        assert record[side]["evaluator"] == read_json(run_dir.eval_json)["evaluator"]
        assert record[side]["path"] == str(run_dir.path)
    assert record["a"]["evaluator"] == {"backend": "hf", "serving": "base model", "version": 1,
                                        "grader": grader_identity()}
    lines = [line for line in out.splitlines() if line.startswith("[compare]")]
    assert lines == [record["line"]]
    assert "B - A = +0.00 points over 8 problems x 2 samples" in lines[0]
    assert "eval.hf_cache dynamic -> static" in lines[0] and "equivalent within ±1" in lines[0]
    assert str(record_path) in lines[0]


def test_compare_refuses_another_checkpoint_naming_it_and_the_fix(two_settings, tiny_world):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    results, a, _ = two_settings
    adapter = results / "weights" / "adapter"  # not under the group dir: its evaluation would change it
    run = eval_run(tiny_world, results, "group=adapter", f"eval.checkpoint={adapter}")
    torch.manual_seed(0)
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    get_peft_model(AutoModelForCausalLM.from_pretrained(run.model.path), lora).save_pretrained(adapter)
    evaluate_standalone(run)
    with pytest.raises(NotComparable) as refused:
        compare(a.path, locate_eval_dir(run)[1].eval_dir)  # an eval dir is accepted as well as a run dir
    message = str(refused.value)
    assert f"checkpoint: A scored the base model, B scored {adapter} (dir:" in message
    assert "evaluate the same eval.checkpoint (the same weights) under both settings" in message
    assert "n_samples" not in message and "seed" not in message  # only what differs is named


def test_compare_cli_refuses_other_n_samples_and_seed_naming_values_and_fixes(two_settings, tiny_world):
    results, a, _ = two_settings
    run = eval_run(tiny_world, results, "group=fewer", "eval.n_samples=1", "seed=2")
    evaluate_standalone(run)
    b = locate_eval_dir(run)[1]
    proc = evaluate_cli(["compare", str(a.path), str(b.eval_json)])
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 1, out[-3000:]
    assert "Traceback" not in out
    assert "n_samples: A drew 2 samples per problem, B 1: evaluate both with the same eval.n_samples" in out
    assert "eval.n_samples=2 for the one with fewer" in out
    assert "seed: A 1, B 2" in out and "seed=1 for B" in out
    assert not list(b.eval_dir.glob("compare_*.json"))  # a refusal writes no record
