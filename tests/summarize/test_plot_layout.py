"""The race plot's final-row labels: near their marks, never printed over each other."""

from __future__ import annotations

import pytest

from opsd_sweep.summarize.plots import spread


def test_close_labels_are_pushed_apart_around_their_marks_and_lone_ones_stay():
    values = [54.2, 53.8, 53.4, 49.8]
    placed = spread(values, 0.5)
    ordered = sorted(placed[:3])
    assert all(b - a >= 0.5 - 1e-9 for a, b in zip(ordered, ordered[1:]))
    assert sum(placed[:3]) / 3 == pytest.approx(sum(values[:3]) / 3)  # the block stays centred on its marks
    assert placed[3] == 49.8
    assert [placed.index(y) for y in sorted(placed)] == [3, 2, 1, 0]  # the order of the marks is kept
