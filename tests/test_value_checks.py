"""Values that used to pass and go wrong later are refused before any compute, naming the key, the value and the
fix; the nearest allowed value still passes. Seeds (run and race), max_problems, a collapsed run's score (summary
and race) and confirm's --seeds."""

from __future__ import annotations

import dataclasses

import pytest

from opsd_sweep.config import ConfigError, load_run_config
from opsd_sweep.confirm import __main__ as confirm_cli
from opsd_sweep.cycle import load_cycle_config
from opsd_sweep.race import RaceSettings, RaceSpec
from opsd_sweep.summarize.settings import load_settings
from tests.conftest import compose, run_sweep
from tests.race.test_policy import SETTINGS as RACE_SETTINGS

LAST_SEED = 2**32 - 1  # numpy.random.seed and torch.manual_seed refuse anything above


def refusal(overrides: list[str]) -> str:
    with pytest.raises(ConfigError) as err:
        load_run_config(compose(overrides))
    return str(err.value)


def load_with_tiny_check(overrides: list[str]):
    """A run config loaded by the cycle's loader, which passes the tiny world's settings check in."""
    return load_cycle_config(compose(overrides))


# --- run config: seed and max_problems ------------------------------------------------------------------

@pytest.mark.parametrize("seed", [-1, LAST_SEED + 1])
def test_a_seed_numpy_and_torch_refuse_is_refused_with_the_range(seed):
    message = refusal([f"seed={seed}"])
    assert f"seed={seed} must be in [0, {LAST_SEED}]" in message and "e.g. seed=1" in message


@pytest.mark.parametrize("seed", [0, LAST_SEED])
def test_the_ends_of_the_seed_range_run(seed):
    assert load_run_config(compose([f"seed={seed}"])).seed == seed


@pytest.mark.parametrize("seed", [-1, LAST_SEED + 1])
def test_the_tiny_worlds_seed_is_held_to_the_run_seeds_range_with_the_same_message(seed):
    """tiny.seed seeds the tiny world's data split, model init and warm start (torch.manual_seed): unchecked, -1
    built a world before anything said no."""
    message = refusal(["profile=tiny", f"tiny.seed={seed}"])
    assert f"tiny.seed={seed} must be in [0, {LAST_SEED}] (numpy's and torch's seed range), e.g. tiny.seed=" in message


@pytest.mark.parametrize("seed", [0, LAST_SEED])
def test_the_ends_of_the_seed_range_build_a_tiny_world(seed):
    assert load_run_config(compose(["profile=tiny", f"tiny.seed={seed}"])).tiny.seed == seed


def test_a_bad_tiny_seed_is_refused_by_the_cli_before_any_world_is_built(tmp_path):
    results, cache = tmp_path / "results", tmp_path / "cache"
    proc = run_sweep(["profile=tiny", "tiny.seed=-1"], results, cache, timeout=120)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    assert f"tiny.seed=-1 must be in [0, {LAST_SEED}]" in output and "Nothing was run or written." in output
    assert "Traceback" not in output and not results.exists() and not cache.exists()


@pytest.mark.parametrize("key", ["eval.max_problems", "data.max_problems"])
@pytest.mark.parametrize("value", [0, -1])
def test_max_problems_below_one_is_refused_not_read_as_all_or_all_but_the_last(key, value):
    message = refusal([f"{key}={value}"])
    assert f"{key}={value} must be >= 1" in message and f"{key}=null" in message


@pytest.mark.parametrize("key", ["eval.max_problems", "data.max_problems"])
def test_one_problem_and_null_still_run(key):
    section = key.split(".")[0]
    assert getattr(load_run_config(compose([f"{key}=1"])), section).max_problems == 1
    assert getattr(load_run_config(compose([f"{key}=null"])), section).max_problems is None


# --- the summary's collapsed score ----------------------------------------------------------------------

@pytest.mark.parametrize("score", [150.0, -1.0, 100.5, float("nan")])
def test_summary_refuses_a_collapsed_score_no_run_could_get(score):
    with pytest.raises(ValueError) as err:
        load_settings({"metric": "avg_at_n", "collapsed_score": score})
    message = str(err.value)
    assert f"collapsed_score={score:g}" in message and "collapsed_score=0" in message
    assert "[0, 100]" in message or "finite" in message


@pytest.mark.parametrize("score", [0.0, 100.0])
def test_summary_takes_a_collapsed_score_at_either_end_of_a_percent_scale(score):
    assert load_settings({"metric": "pass_at_4", "collapsed_score": score}).collapsed_score == score


def test_summary_holds_only_percent_metrics_to_0_100():
    assert load_settings({"metric": "gpu_hours", "collapsed_score": 150.0}).collapsed_score == 150.0


# --- the race: collapsed score and first seed -----------------------------------------------------------

def race_problems(**changes) -> str:
    with pytest.raises(ValueError) as err:
        RaceSpec(("a", "b"), "a", None, RaceSettings(**RACE_SETTINGS | changes))
    return str(err.value)


def race_accepts(**changes) -> RaceSettings:
    return RaceSpec(("a", "b"), "a", None, RaceSettings(**RACE_SETTINGS | changes)).settings


@pytest.mark.parametrize("score", [150.0, -0.5])
def test_race_refuses_a_collapsed_score_outside_the_percent_scale(score):
    message = race_problems(collapsed_score=score)
    assert f"collapsed_score={score:g} is outside [0, 100]" in message and "collapsed_score=0" in message


@pytest.mark.parametrize("score", [0.0, 100.0])
def test_race_takes_a_collapsed_score_at_either_end(score):
    assert race_accepts(collapsed_score=score).collapsed_score == score


def test_race_refuses_a_first_seed_below_zero():
    message = race_problems(first_seed=-1)
    assert "first_seed=-1 must be in [0, " in message and "e.g. first_seed=1" in message


def test_race_refuses_a_first_seed_whose_later_seeds_leave_the_range():
    s = RACE_SETTINGS
    drawn = s["max_seeds"] + s["confirm_seeds"] + 2 * s["max_failures"]
    highest = LAST_SEED - drawn + 1
    assert race_accepts(first_seed=0).first_seed == 0
    assert race_accepts(first_seed=highest).first_seed == highest
    message = race_problems(first_seed=highest + 1)
    assert f"first_seed={highest + 1} must be in [0, {highest}]" in message and f"{drawn} seeds" in message
    assert "first_seed=" in race_problems(first_seed=LAST_SEED + 1)


def test_race_settings_defaults_still_pass():
    settings = race_accepts()
    assert dataclasses.asdict(settings)["collapsed_score"] is None


# --- confirm --seeds ------------------------------------------------------------------------------------

@pytest.mark.parametrize("seeds", ["0", "1", "-2"])
def test_confirm_refuses_fewer_than_two_seeds_before_reading_the_sweep(seeds, tmp_path):
    """0 used to mean "the summary's advice" (12 seeds per arm on the audited sweep) without a word; leaving
    --seeds out is how to ask for the advice."""
    with pytest.raises(SystemExit) as err:
        confirm_cli.main([str(tmp_path), "--seeds", seeds, "--report-only"])
    message = str(err.value)
    assert f"--seeds {seeds}: a paired interval needs at least 2 seeds per arm" in message
    assert "--seeds 3" in message and "leave --seeds out" in message


def test_confirm_takes_two_seeds_and_goes_on_to_read_the_sweep(tmp_path):
    with pytest.raises(SystemExit, match="no readable run directories"):  # past the seeds check: the empty folder
        confirm_cli.main([str(tmp_path), "--seeds", "2", "--report-only"])


def test_confirm_help_says_what_leaving_seeds_out_means(capsys):
    with pytest.raises(SystemExit):
        confirm_cli.parse_args(["--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "fresh seeds per arm, at least 2 (left out: the seeds advice for the paired test, refused above 24, else 3)" in shown


# --- the tiny world's other settings ---------------------------------------------------------------------

TINY_PROBLEMS = 144  # 9 addends x 4 x 4 factors (tiny.all_problems): train and held-out are drawn disjoint from them


@pytest.mark.parametrize("overrides, said", [
    (["tiny.n_train=120", "tiny.n_eval=32"], "tiny.n_train=120 + tiny.n_eval=32 exceeds the 144 distinct tiny problems"),
    (["tiny.n_eval=0"], "tiny.n_eval=0 must be >= 1"),
    (["tiny.n_train=-1"], "tiny.n_train=-1 must be >= 1"),
    (["tiny.hidden_size=0"], "tiny.hidden_size=0 must be >= 1"),
    (["tiny.num_layers=0"], "tiny.num_layers=0 must be >= 1"),
    (["tiny.intermediate_size=0"], "tiny.intermediate_size=0 must be >= 1"),
    (["tiny.num_kv_heads=3"], "tiny.num_kv_heads=3 must divide tiny.num_heads=8"),
    (["tiny.head_dim=15"], "tiny.head_dim=15 must be even"),
    (["tiny.vocab_size=300"], "tiny.vocab_size=300 is too small"),
    (["tiny.warm_start.steps=0"], "tiny.warm_start.steps=0 must be >= 1"),
    (["tiny.warm_start.batch_size=0"], "tiny.warm_start.batch_size=0 must be >= 1"),
    (["tiny.warm_start.learning_rate=0"], "tiny.warm_start.learning_rate=0.0 must be > 0"),
    (["tiny.warm_start.slip_rate=1.5"], "tiny.warm_start.slip_rate=1.5 is a share of examples: it must be in [0, 1]"),
    (["tiny.warm_start.student_prompt='{question}'"], "tiny.warm_start.student_prompt"),
])
def test_tiny_settings_no_world_can_be_built_with_are_refused_naming_the_value(overrides, said):
    """Each of these failed inside ensure_tiny_assets, the warm start or the first forward pass, after the sweep
    had started (n_train + n_eval above the problems there are raised a ValueError from make_datasets)."""
    with pytest.raises(ConfigError) as err:
        load_with_tiny_check(["profile=tiny", *overrides])
    assert said in str(err.value)


@pytest.mark.parametrize("overrides", [
    ["tiny.n_train=143", "tiny.n_eval=1"], ["tiny.n_train=1", "tiny.n_eval=143"], ["tiny.num_kv_heads=8"],
    ["tiny.num_kv_heads=1"], ["tiny.head_dim=2"], ["tiny.warm_start.slip_rate=0"], ["tiny.warm_start.slip_rate=1"],
])
def test_the_nearest_allowed_tiny_settings_pass(overrides):
    assert load_with_tiny_check(["profile=tiny", *overrides]).tiny is not None


def test_the_limit_on_tiny_problems_is_the_generators():
    from opsd_sweep.tiny import all_problems, make_datasets
    assert len(all_problems()) == TINY_PROBLEMS
    train, held_out = make_datasets(TINY_PROBLEMS - 32, 32, seed=0)  # the refusal's limit is exactly what it makes
    assert len(train) + len(held_out) == TINY_PROBLEMS
    with pytest.raises(ValueError):
        make_datasets(TINY_PROBLEMS - 31, 32, seed=0)


def test_too_many_tiny_problems_are_refused_by_the_cli_before_any_world_is_built(tmp_path):
    results, cache = tmp_path / "results", tmp_path / "cache"
    proc = run_sweep(["profile=tiny", "tiny.n_train=200"], results, cache, timeout=120)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    assert "tiny.n_train=200 + tiny.n_eval=32 exceeds the 144 distinct tiny problems" in output
    assert "Nothing was run or written." in output
    assert "Traceback" not in output and not results.exists() and not cache.exists()
