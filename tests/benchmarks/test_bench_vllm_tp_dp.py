"""The TP-vs-DP benchmark's CPU parts: length draws, the decode-schedule simulator and the projection
that extends a time-limited run of the published configuration to its end."""

from __future__ import annotations

import math
import statistics

import pytest

from benchmarks import bench_vllm_tp_dp as bench
from opsd_sweep.costs import length_model as lengths


def test_the_short_probe_is_reproducible_clipped_and_averages_near_5000():
    short = lengths.short()
    draws = short.draw(1, 200_000, seed=0)
    assert draws[:360] == short.draw(30, 12, seed=0) != short.draw(30, 12, seed=1)
    assert min(draws) == 64 and max(draws) == 38912
    # lognormal mean 5,000 before the clip; the cap at 38,912 trims about 2%
    assert 4850 < statistics.fmean(draws) < 4950


def test_schedule_matches_a_hand_computed_one_with_a_waiting_queue():
    # request 0 has 1 of 3 tokens; 1 (1 token) and 2 (2 tokens) wait for the 2 slots
    contexts = bench.simulate_decode([10, 10, 10], [3, 1, 2], [1, 0, 0], max_num_seqs=2)
    # step 1: r0 at 2 tokens + r1 at 1; step 2: r0 at 3 + r2 (admitted when r1 ended) at 1; step 3: r2 at 2
    assert contexts == [12 + 11, 13 + 11, 12]
    assert bench.simulate_decode([10], [4], [4], max_num_seqs=2) == []  # finished requests cost nothing


def test_projection_sums_the_fitted_cost_over_the_remaining_steps():
    c0, c1 = 0.02, 0.001
    measured = [100, 200, 300, 400]
    projection = bench.project_remaining(measured, [c0 + c1 * x for x in measured], [10, 10, 10], [3, 1, 2],
                                         [1, 0, 0], max_num_seqs=2)
    assert projection["remaining_steps"] == 3
    assert projection["remaining_s"] == pytest.approx(3 * c0 + c1 * (23 + 24 + 12))
    assert projection["r2"] == pytest.approx(1.0)


def test_a_cut_timeline_is_projected_back_to_its_true_total():
    """A synthetic run with known step costs (plus +-2 ms jitter), cut after 300 steps with 24 of 40
    requests waiting for slots: the fit recovers c0 and c1 and the projected rest matches the truth."""
    c0, c1 = 0.03, 2e-6
    prompts, lengths = [100] * 40, [50 + (i * 37) % 900 for i in range(40)]
    contexts = bench.simulate_decode(prompts, lengths, [0] * 40, max_num_seqs=16)
    seconds = [c0 + c1 * x + (0.002 if step % 2 else -0.002) for step, x in enumerate(contexts)]
    cut = 300
    # the state at the cut, replayed: requests start in order as slots free
    generated, slots = [0] * 40, []
    for _ in range(cut):
        while len(slots) < 16 and (waiting := [i for i in range(40) if generated[i] == 0 and i not in slots]):
            slots.append(waiting[0])
        for i in slots:
            generated[i] += 1
        slots = [i for i in slots if generated[i] < lengths[i]]
    assert any(g == 0 for g in generated) and any(g == n for g, n in zip(generated, lengths))  # waiting, done
    projection = bench.project_remaining(contexts[:cut], seconds[:cut], prompts, lengths, generated, 16)
    assert projection["c0"] == pytest.approx(c0, rel=0.05) and projection["c1"] == pytest.approx(c1, rel=0.05)
    assert projection["residual_sd_s"] == pytest.approx(0.002, rel=0.05)
    assert projection["remaining_steps"] == len(contexts) - cut
    truth = sum(c0 + c1 * x for x in contexts[cut:])
    assert math.isclose(projection["remaining_s"], truth, rel_tol=0.01)


def test_too_few_measured_steps_name_the_fix():
    with pytest.raises(ValueError, match="--time-limit"):
        bench.fit_step_cost([100, 100], [0.1, 0.1])
