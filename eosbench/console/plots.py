"""PNG plots of benchmark and soak results (matplotlib, headless).

Every plot is drawn to be kept: the title wraps to the figure's width instead of running off
it, each series has its own colour *and* marker (so 15 or more stay apart, also in grey print),
many series are split into facets, categories come in numeric order, and where a figure is a
median of repeats its whiskers span the repeats.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable, Iterable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display on a benchmark box

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import LogFormatter  # noqa: E402

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")
LINE_STYLES = ("-", "--", "-.", ":")
TITLE_CHARS_PER_INCH = 11  # at the default title size; wrapping at this width keeps a title inside its figure
# The soak timeline's y axis stops at this multiple of the steady rate, so that catch-up peaks
# (a backlog drained at many times the offered rate) do not flatten the baseline into a line.
SOAK_Y_CLIP = 3.0


def natural_key(text: str) -> list:
    """Sort key that orders the numbers inside labels by value: '2/txn' before '10/txn' before '1,000/txn'."""
    plain = re.sub(r"(?<=\d),(?=\d{3})", "", str(text))
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", plain)]


def series_styles(names: Iterable[str]) -> dict[str, dict]:
    """A distinct (colour, marker, line style) for each name, stable for a given set of names."""
    names = list(names)
    palette = plt.get_cmap("tab10" if len(names) <= 10 else "tab20")
    count = 10 if len(names) <= 10 else 20
    return {name: {"color": palette(index % count), "marker": MARKERS[index % len(MARKERS)],
                   "linestyle": LINE_STYLES[(index // count) % len(LINE_STYLES)]}
            for index, name in enumerate(names)}


class PlainLogFormatter(LogFormatter):
    """Log-axis labels as plain numbers (1,000 rather than 10^3; 0.5 rather than 5x10^-1)."""

    def _num_to_string(self, x, vmin, vmax):
        return f"{x:,.0f}" if x >= 1 and float(x).is_integer() else f"{x:,g}"  # 'g' writes 1e+06 from a million


def _log_axis(axis) -> None:
    """Put an axis on a log scale with plain labels, minor ones too when it spans less than a decade or two."""
    if axis is axis.axes.xaxis:
        axis.axes.set_xscale("log")
    else:
        axis.axes.set_yscale("log")
    axis.set_major_formatter(PlainLogFormatter(labelOnlyBase=False))
    axis.set_minor_formatter(PlainLogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))


def _figure(width: float, height: float, rows: int = 1, columns: int = 1, **options):
    """A figure whose layout engine keeps titles, labels and legends inside it."""
    return plt.subplots(rows, columns, figsize=(width, height), dpi=110, layout="constrained", squeeze=False,
                        **options)


def _wrap(title: str, width_in: float, scale: float = 1.0) -> str:
    return textwrap.fill(title, max(20, int(width_in * TITLE_CHARS_PER_INCH * scale)))


def _save(fig, path: Path) -> Path:
    """Write and close a figure; return its path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def latency_cdf_png(series_ms: dict[str, np.ndarray], path: Path, title: str) -> Path:
    """Plot one latency CDF per series on a log x axis, with p50/p99 marked in the legend."""
    fig, axes = _figure(8, 5)
    ax = axes[0][0]
    names = sorted(series_ms, key=natural_key)
    styles = series_styles(names)
    for name in names:
        values = np.asarray(series_ms[name])
        if values.size == 0:
            continue
        ordered = np.sort(values)
        fraction = np.arange(1, ordered.size + 1) / ordered.size
        style = styles[name]
        ax.plot(ordered, fraction, color=style["color"], linestyle=style["linestyle"], marker=style["marker"],
                markevery=max(1, ordered.size // 8), markersize=5,
                label=f"{name}: p50 {np.percentile(values, 50):.2f} ms, p99 {np.percentile(values, 99):.2f} ms")
    _log_axis(ax.xaxis)
    ax.set_xlabel("latency (ms, log scale)")
    ax.set_ylabel("fraction at or below")
    ax.set_ylim(0, 1.01)
    ax.set_title(_wrap(title, 8))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    return _save(fig, path)


def lines_png(series: dict[str, dict[float, float]], path: Path, title: str, x_label: str, y_label: str,
              log_x: bool = False, log_y: bool = False, reference: dict[str, float] | None = None,
              facet: Callable[[str], str] | None = None,
              spread: dict[str, dict[float, tuple[float, float]]] | None = None) -> Path:
    """One line per series over its (x, y) points, with whiskers from `spread` (low, high) where given.

    `facet` maps a series name to a panel: the panels share their axes, so a dozen series read
    as a few small charts. Series named 'ideal ...' are dashed and drawn in every panel;
    `reference` adds dotted horizontal lines.
    """
    ideal = {name: points for name, points in series.items() if name.startswith("ideal")}
    drawn = {name: points for name, points in series.items() if name not in ideal}
    panels: dict[str, list[str]] = {}
    for name in sorted(drawn, key=natural_key):
        panels.setdefault(facet(name) if facet else "", []).append(name)
    panel_names = sorted(panels, key=natural_key) or [""]
    columns = min(3, len(panel_names))
    rows = -(-len(panel_names) // columns)
    width = 8 if columns == 1 else 4.2 * columns
    fig, axes = _figure(width, 5 if rows == 1 else 3.6 * rows, rows, columns, sharex=True, sharey=True)
    for index, panel in enumerate(panel_names):
        ax = axes[index // columns][index % columns]
        styles = series_styles(panels.get(panel, []))
        for name in panels.get(panel, []):
            xs = sorted(drawn[name])
            style = styles[name]
            ax.plot(xs, [drawn[name][x] for x in xs], color=style["color"], marker=style["marker"],
                    linestyle=style["linestyle"], label=name if not facet else _short(name, panel))
            whiskers = (spread or {}).get(name, {})
            inside = [x for x in xs if x in whiskers]
            if inside:
                low = [drawn[name][x] - whiskers[x][0] for x in inside]
                high = [whiskers[x][1] - drawn[name][x] for x in inside]
                ax.errorbar(inside, [drawn[name][x] for x in inside], yerr=[low, high], fmt="none",
                            ecolor=style["color"], capsize=3, alpha=0.8)
        for name, points in ideal.items():
            xs = sorted(points)
            ax.plot(xs, [points[x] for x in xs], "--", color="grey", label=name)
        for name, value in (reference or {}).items():
            ax.axhline(value, color="grey", ls=":", lw=1, label=name)
        if facet:
            ax.set_title(panel, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7 if facet else 8)
    for index in range(len(panel_names), rows * columns):
        axes[index // columns][index % columns].set_visible(False)
    for ax in axes.flat:
        if log_x:
            _log_axis(ax.xaxis)
        if log_y:
            _log_axis(ax.yaxis)
    fig.supxlabel(x_label)
    fig.supylabel(y_label)
    fig.suptitle(_wrap(title, width))
    return _save(fig, path)


def _short(name: str, panel: str) -> str:
    """A series' name without the part its panel's title already says."""
    rest = name.replace(panel, "", 1).strip(" ,")
    return rest or name


def bars_png(groups: dict[str, dict[str, float]], path: Path, title: str, y_label: str,
             spread: dict[str, dict[str, tuple[float, float]]] | None = None) -> Path:
    """Grouped bars on a log y axis: groups in the order given, each with its series' bars side by side.

    Only the series a group has get a bar (no gaps), each series keeps its colour in every group,
    and `spread[group][series]` = (low, high) draws whiskers across the repeats.
    """
    names = sorted({name for bars in groups.values() for name in bars}, key=natural_key)
    styles = series_styles(names)
    widest = max((len(bars) for bars in groups.values()), default=1)
    width = 0.8 / max(1, widest)
    fig_width = min(16, max(8, 0.55 * sum(len(bars) for bars in groups.values()) + 2))
    fig, axes = _figure(fig_width, 5)
    ax = axes[0][0]
    labelled: set[str] = set()
    for g, (group, bars) in enumerate(groups.items()):
        present = [name for name in names if name in bars]
        for i, name in enumerate(present):
            x = g + (i - (len(present) - 1) / 2) * width
            value = bars[name]
            ax.bar(x, value, width * 0.95, color=styles[name]["color"], label=None if name in labelled else name,
                   edgecolor="black", linewidth=0.4)
            labelled.add(name)
            low, high = (spread or {}).get(group, {}).get(name, (value, value))
            if high > low:
                ax.errorbar(x, value, yerr=[[value - low], [high - value]], fmt="none", ecolor="black", capsize=3)
    ax.set_xticks(range(len(groups)), list(groups), fontsize=8, rotation=0 if len(groups) <= 8 else 30,
                  ha="center" if len(groups) <= 8 else "right")
    _log_axis(ax.yaxis)
    ax.set_ylabel(y_label)
    ax.set_title(_wrap(title, fig_width))
    ax.grid(True, axis="y", which="both", alpha=0.3)
    handles = dict(zip(*reversed(ax.get_legend_handles_labels())))
    ax.legend([handles[name] for name in names], names, fontsize=8, ncols=min(len(names), 5), loc="upper center",
              bbox_to_anchor=(0.5, -0.08 if len(groups) <= 8 else -0.2))
    return _save(fig, path)


def soak_rate(samples: list[tuple[float, int]], window_s: float = 3.0) -> tuple[np.ndarray, np.ndarray]:
    """(times in s, committed offsets per second over a sliding window) from the soak's samples."""
    times = np.array([t for t, _ in samples], dtype=float)
    counts = np.array([c for _, c in samples], dtype=float)
    earlier = np.clip(np.searchsorted(times, times - window_s), 0, times.size - 1)
    span = np.maximum(times - times[earlier], 1e-9)
    rate = np.where(times - times[earlier] > window_s / 2, (counts - counts[earlier]) / span, np.nan)
    return times, rate


def soak_timeline_png(samples: list[tuple[float, int]], faults: list[tuple[float, str, float | None]], path: Path,
                      title: str, window_s: float = 3.0) -> Path:
    """Throughput over the soak above a strip with one row per fault kind.

    The rate's axis stops at SOAK_Y_CLIP times the soak's average rate, and each catch-up peak
    above it is marked at the edge with its height. In the strip each fault is a tick at its injection and
    a bar to its recovery (a cross where it did not recover).
    """
    kinds = sorted({kind for _, kind, _ in faults}, key=natural_key)
    strip_height = 0.45 + 0.28 * max(1, len(kinds))
    fig, axes = _figure(12, 3.6 + strip_height, 2, 1, sharex=True,
                        gridspec_kw={"height_ratios": [3.6, strip_height]})
    ax, strip = axes[0][0], axes[1][0]
    if len(samples) > 1:
        times, rate = soak_rate(samples, window_s)
        minutes = times / 60
        # The rate sustained over the whole soak: what a pipeline that keeps up commits on
        # average, stalls and catch-ups included (a median would count the catch-ups as steady).
        steady = (samples[-1][1] - samples[0][1]) / max(1e-9, samples[-1][0] - samples[0][0])
        top = SOAK_Y_CLIP * steady if steady > 0 else np.inf
        ax.plot(minutes, np.minimum(rate, top), lw=0.8, color="black", label="committed input offsets/s")
        if steady > 0:
            ax.axhline(steady, color="tab:blue", ls="--", lw=0.8, label=f"average over the soak {steady:,.0f}/s")
            ax.set_ylim(0, top * 1.3)  # room above the clip for the peaks' labels
            _mark_clipped_peaks(ax, minutes, rate, top)
    styles = series_styles(kinds)
    for at, kind, recovery in faults:
        row, colour = kinds.index(kind), styles[kind]["color"]
        strip.plot([at / 60], [row], marker="|", markersize=12, color=colour)
        if recovery is not None:
            strip.plot([at / 60, (at + recovery) / 60], [row, row], lw=4, color=colour, alpha=0.6,
                       solid_capstyle="butt")
        else:
            strip.plot([at / 60], [row], marker="x", markersize=8, color="red")
    strip.set_yticks(range(len(kinds)), kinds, fontsize=8)
    strip.set_ylim(-0.6, max(len(kinds), 1) - 0.4)
    strip.invert_yaxis()
    strip.grid(True, axis="x", alpha=0.3)
    strip.set_xlabel("minutes since the soak started")
    strip.set_title("faults: injection | and recovery to 90 % of the rate before it (bar)", fontsize=8, loc="left")
    ax.set_ylabel("offsets per second")
    ax.set_title(_wrap(title, 12))
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8)
    return _save(fig, path)


def _mark_clipped_peaks(ax, minutes: np.ndarray, rate: np.ndarray, top: float) -> None:
    """Put a triangle at the axis' top over each peak that goes above it, labelled with its height."""
    above = np.isfinite(rate) & (rate > top)
    if not above.any():
        return
    edges = np.flatnonzero(np.diff(np.concatenate(([0], above.astype(int), [0]))))
    peaks = [start + int(np.nanargmax(rate[start:end])) for start, end in zip(edges[::2], edges[1::2])]
    ax.plot(minutes[peaks], np.full(len(peaks), top), "^", color="tab:red", markersize=5, linestyle="none",
            label=f"catch-up peak, clipped at {SOAK_Y_CLIP:g} x the average (label: its height)")
    # Labels of neighbouring peaks would print over each other: the highest of a cluster speaks for it.
    spacing = (minutes[-1] - minutes[0]) / 80
    labelled: list[float] = []
    for index in sorted(peaks, key=lambda i: -rate[i]):
        if any(abs(minutes[index] - other) < spacing for other in labelled):
            continue
        labelled.append(minutes[index])
        ax.annotate(f"{rate[index] / 1000:.1f}k" if rate[index] >= 1000 else f"{rate[index]:.0f}",
                    (minutes[index], top), textcoords="offset points", xytext=(0, 5), ha="center",
                    va="bottom", fontsize=6, rotation=90, color="tab:red")
