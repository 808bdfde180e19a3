"""PNG plots of benchmark results (matplotlib, headless); the soak draws its timeline in eosbench/soak/report.py."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display on a benchmark box

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def _save(fig, path: Path) -> Path:
    """Lay out, write and close a figure; return its path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def latency_cdf_png(series_ms: dict[str, np.ndarray], path: Path, title: str) -> Path:
    """Plot one latency CDF per series on a log x axis, with p50/p99 marked in the legend."""
    fig, ax = plt.subplots(figsize=(8, 5), dpi=110)
    for name, values in series_ms.items():
        ordered = np.sort(values)
        fraction = np.arange(1, ordered.size + 1) / ordered.size
        ax.plot(ordered, fraction, label=f"{name}: p50 {np.percentile(values, 50):.2f} ms,"
                                         f" p99 {np.percentile(values, 99):.2f} ms")
    ax.set_xscale("log")
    ax.set_xlabel("latency per iteration (ms, log scale)")
    ax.set_ylabel("fraction of iterations")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right")
    return _save(fig, path)


def lines_png(series: dict[str, dict[float, float]], path: Path, title: str, x_label: str, y_label: str,
              log_x: bool = False, log_y: bool = False, reference: dict[str, float] | None = None) -> Path:
    """One line per series over its (x, y) points; dashed horizontal reference lines if given."""
    fig, ax = plt.subplots(figsize=(8, 5), dpi=110)
    for name, points in series.items():
        xs = sorted(points)
        style = "--" if name.startswith("ideal") else "-"
        ax.plot(xs, [points[x] for x in xs], style, marker="o" if style == "-" else None, label=name)
    for name, value in (reference or {}).items():
        ax.axhline(value, color="grey", ls=":", lw=1, label=name)
    if log_x:
        ax.set_xscale("log")
    if log_y:
        ax.set_yscale("log")
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def bars_png(groups: dict[str, dict[str, float]], path: Path, title: str, y_label: str) -> Path:
    """Grouped bars: one group per key, one bar per series inside it (log y)."""
    names = sorted({name for bars in groups.values() for name in bars})
    fig, ax = plt.subplots(figsize=(max(8, 1.2 * len(groups) * max(1, len(names)) / 2), 5), dpi=110)
    width = 0.8 / max(1, len(names))
    for i, name in enumerate(names):
        xs = [g + i * width for g in range(len(groups))]
        ax.bar(xs, [bars.get(name, 0) for bars in groups.values()], width, label=name)
    ax.set_xticks([g + 0.4 - width / 2 for g in range(len(groups))], list(groups), fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel(y_label)
    ax.set_title(title, fontsize=10)
    ax.grid(True, axis="y", which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)
