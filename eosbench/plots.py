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
