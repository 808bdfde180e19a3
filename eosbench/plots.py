"""PNG plots of benchmark results (matplotlib, headless)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display on a benchmark box

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


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
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def soak_timeline_png(samples: list[tuple[float, int]], faults: list[tuple[float, str]], path: Path, title: str,
                      window_s: float = 3.0) -> Path:
    """Plot throughput (offsets committed per second over a sliding window) with each fault as a coloured line."""
    fig, ax = plt.subplots(figsize=(12, 4.5), dpi=110)
    if len(samples) > 1:
        times = np.array([t for t, _ in samples])
        counts = np.array([c for _, c in samples], dtype=float)
        earlier = np.clip(np.searchsorted(times, times - window_s), 0, times.size - 1)
        span = np.maximum(times - times[earlier], 1e-9)
        rate = np.where(times - times[earlier] > window_s / 2, (counts - counts[earlier]) / span, np.nan)
        ax.plot(times / 60, rate, lw=0.8, color="black", label="committed input offsets/s")
    colours = plt.get_cmap("tab10")
    kinds = sorted({kind for _, kind in faults})
    for at, kind in faults:
        ax.axvline(at / 60, color=colours(kinds.index(kind)), lw=1.2, alpha=0.8,
                   label=kind if kind not in ax.get_legend_handles_labels()[1] else None)
    ax.set_xlabel("minutes since the soak started")
    ax.set_ylabel("offsets per second")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper right", fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
