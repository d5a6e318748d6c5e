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


def test_a_knob_with_two_values_is_drawn_as_points_and_three_as_a_line(tmp_path, monkeypatch):
    """The score-vs-knob plot of a sweep over two learning rates (the demo's) joins no points: a line through
    two would draw a trend they cannot show."""
    import matplotlib.pyplot as plt
    import numpy as np

    from opsd_sweep.summarize import plots
    from opsd_sweep.summarize.collect import collect
    from opsd_sweep.summarize.config_stats import analyse
    from opsd_sweep.summary import parse_args
    from opsd_sweep.testing.rundirs import draw_correct, write_run

    drawn = {}
    monkeypatch.setattr(plots, "_save", lambda fig, path: drawn.__setitem__(path.name, fig))
    rng = np.random.default_rng(0)
    for lr in (1e-5, 2e-5, 4e-5):
        for seed in (1, 2):
            write_run(tmp_path / "g", learning_rate=lr, seed=seed, rng=rng,
                      correct=draw_correct(rng, np.zeros(10), 0.0, 4))
    for name, roots in (("two", [str(tmp_path / "g" / "lr1e-05*"), str(tmp_path / "g" / "lr2e-05*")]),
                        ("three", [str(tmp_path)])):
        settings = parse_args([*roots, "--anchor", "none", "--baseline", "none"])
        analysis = analyse(collect(settings.roots).runs, settings, None)
        plots.plot_axis(analysis, "cfg.learning_rate", "avg_at_n", "avg@4", 0.95, tmp_path / f"{name}.png")
    styles = {name: {line.get_linestyle() for line in fig.axes[0].lines if line.get_marker() == "o"}
              for name, fig in drawn.items()}
    assert styles == {"two.png": {"None"}, "three.png": {"-"}}
    plt.close("all")
