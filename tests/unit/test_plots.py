"""The plots' drawing rules that a test can check without looking: order, distinct styles, wrapped titles.

Looking is still required: every PNG a change touches is opened and inspected before it is committed.
"""

from __future__ import annotations

import matplotlib.image
import numpy as np

from eosbench.console.plots import bars_png, lines_png, natural_key, series_styles, soak_timeline_png


def test_categories_sort_by_the_numbers_in_them():
    labels = ["10,000/txn, 1b", "1/txn, 1b", "100/txn, 1b", "10/txn, 3b", "10/txn, 1b"]
    assert sorted(labels, key=natural_key) == ["1/txn, 1b", "10/txn, 1b", "10/txn, 3b", "100/txn, 1b", "10,000/txn, 1b"]


def test_twenty_series_get_twenty_distinct_looks():
    styles = series_styles(f"series {i}" for i in range(20))
    looks = {(style["color"], style["marker"], style["linestyle"]) for style in styles.values()}
    assert len(looks) == 20 and len({style["color"] for style in styles.values()}) == 20


def test_a_long_title_wraps_inside_the_figure(tmp_path):
    title = "goodput against abort ratio (committed records/s over the same at r = 0), " * 3
    path = lines_png({f"sink {i}, 1 broker(s), {n}/txn": {0.0: 1.0, 0.5: 0.6, 0.9: 0.2} for i in range(3)
                      for n in (1, 10, 100, 1000, 10000)}, tmp_path / "lines.png", title, "r", "goodput",
                     facet=lambda name: name.split(",")[0])
    image = matplotlib.image.imread(path)
    assert image.shape[1] > image.shape[0] > 0
    drawn = bars_png({"10/txn": {"a": 5.0, "b": 3.0}, "1/txn": {"a": 2.0}}, tmp_path / "bars.png", title, "records/s",
                     spread={"10/txn": {"a": (4.0, 6.0)}})
    assert drawn.stat().st_size > 0


def test_the_soak_timeline_accepts_unrecovered_faults(tmp_path):
    samples = [(t * 0.5, int(t * 200 + (4000 if t > 100 else 0))) for t in range(400)]
    faults = [(30.0, "kill-driver", 12.0), (60.0, "pause-broker", None), (90.0, "kill-driver", 8.0)]
    image = matplotlib.image.imread(soak_timeline_png(samples, faults, tmp_path / "timeline.png", "soak x"))
    assert np.asarray(image).size > 0
