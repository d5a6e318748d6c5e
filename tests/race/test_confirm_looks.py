"""Repeated looks at one confirmation: `--seeds 2` gives a verdict, then `--seeds 3` reuses those 2 runs per arm and
tests again. Each completed look is recorded in confirm.json (seeds, verdict, level), and a later look with other
seeds is tested at alpha / (number of looks) (Bonferroni: over K looks the false-confirmation rate is at most
alpha x (1 + 1/2 + ... + 1/K), not K x alpha); a rerun of a recorded look is no new look. On a real tiny confirmation (tests.test_confirm's sweep)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats as sps

from opsd_sweep.confirm import looks
from tests.test_confirm import run, swept  # noqa: F401  (swept: the fixture)

CONFIRM = ["--locked", "eval=tiny_locked"]


def read(swept_dir) -> dict:
    return json.loads((swept_dir / "confirm.json").read_text())


@pytest.mark.slow
def test_a_second_look_with_more_seeds_is_tested_at_a_bonferroni_split_level(swept, cache_dir):  # noqa: F811
    run("opsd_sweep.confirm", str(swept), *CONFIRM, "--seeds", "2", cache=cache_dir)
    first = read(swept)
    nominal = first["nominal_level"]
    assert first["level"] == nominal and first["look"] == 1
    assert [(look["seeds"], look["verdict"], look["level"]) for look in first["looks"]] == \
        [([3, 4], first["verdict"], nominal)]

    proc = run("opsd_sweep.confirm", str(swept), *CONFIRM, "--seeds", "3", cache=cache_dir)
    second = read(swept)
    split = 1 - (1 - nominal) / 2
    assert second["look"] == 2 and second["level"] == pytest.approx(split)
    assert [(look["seeds"], look["level"]) for look in second["looks"]] == [([3, 4], nominal), ([3, 4, 5], split)]
    assert second["looks"][0]["verdict"] == first["verdict"] and second["looks"][1]["verdict"] == second["verdict"]
    locked = second["benchmarks"][1]
    assert locked["seeds"] == [3, 4, 5]
    config, baseline = np.array(locked["config_scores"]), np.array(locked["baseline_scores"])
    differences = config - baseline
    if np.ptp(differences) == 0:  # 3 equal differences (SD 0): the interval is the difference itself
        low = high = differences[0]
    else:
        low, high = sps.ttest_rel(config, baseline).confidence_interval(split)
    assert (locked["difference"]["paired_low"], locked["difference"]["paired_high"]) == \
        pytest.approx((max(low, -100), min(high, 100)))
    assert "look 2 at this confirmation" in proc.stdout and "Bonferroni" in proc.stdout
    assert "look 2" in second["verdict_line"] and "look 2" in (swept / "confirm.md").read_text()

    run("opsd_sweep.confirm", str(swept), *CONFIRM, "--seeds", "3", "--report-only", cache=cache_dir)
    again = read(swept)  # the same look read again: not a third one
    assert again["look"] == 2 and len(again["looks"]) == 2 and again["level"] == pytest.approx(split)


def test_looks_count_distinct_seed_lists_of_one_hypothesis():
    tested = looks.hypothesis("lr=1e-05", "base model", "aime25", "avg_at_n")
    other = looks.hypothesis("lr=2e-05", "base model", "aime25", "avg_at_n")  # another config: another test
    history = looks.recorded([], other, [3, 4, 5], "confirmed", 0.95, 0.95)
    assert looks.look_number(history, tested, [3, 4]) == 1
    history = looks.recorded(history, tested, [3, 4], "inconclusive", 0.95, 0.95)
    assert looks.look_number(history, tested, [3, 4]) == 1  # the same look again
    assert looks.look_number(history, tested, [3, 4, 5, 6]) == 2
    assert looks.split_level(0.95, 2) == pytest.approx(0.975)
    again = looks.recorded(history, tested, [3, 4], "not confirmed", 0.95, 0.95)  # replaced, not appended
    assert len(again) == 2 and again[1]["verdict"] == "not confirmed" and again[0] == history[0]


def test_a_confirm_json_written_before_looks_were_recorded_counts_as_one_look(tmp_path):
    """confirm.json as the confirm of 3917a1f wrote it (its keys): a complete verdict is a look; an incomplete one
    (runs unfinished) is none."""
    earlier = {"verdict": "inconclusive", "metric": "avg_at_n", "level": 0.95, "unfinished_runs": [],
               "plan": {"config": "lr=1e-05", "baseline": "base model", "seeds": [3, 4, 5], "failed_launches": []},
               "locked": {"identity": "yentinglin/aime_2025"}}
    path = tmp_path / "confirm.json"
    path.write_text(json.dumps(earlier))
    tested = looks.hypothesis("lr=1e-05", "base model", "yentinglin/aime_2025", "avg_at_n")
    history = looks.earlier_looks(path)
    assert [(look["seeds"], look["verdict"], look["level"]) for look in history] == [([3, 4, 5], "inconclusive", 0.95)]
    assert looks.look_number(history, tested, [3, 4, 5, 6, 7, 8]) == 2
    path.write_text(json.dumps(earlier | {"unfinished_runs": ["config seed 5"]}))
    assert looks.earlier_looks(path) == []
