"""The soak's verdict and the three files written from it: report.json, report.md and timeline.png.

A soak of days rewrites them after every round, so that a running soak always has a current report.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from eosbench.soak.pipeline import VISIBILITY_LOG
from streaming.verify.visibility import percentiles, read_log


@dataclass
class FaultRecord:
    """What one round did and found."""

    index: int
    kind: str
    at_s: float  # seconds since the soak started
    detail: str
    recovery_s: float | None = None  # until throughput was back to 90 % of its rate before the fault
    first_commit_s: float | None = None  # until the sink group's first commit after the fault was undone
    verify_s: float = 0.0
    stable_after_s: float = 0.0  # until every transaction open after the verify had ended
    records_checked: int = 0
    # The round's verify's running counts of what retention deleted before it was judged: deliveries
    # whose input is gone, and committed input records whose delivery is gone (neither a violation).
    source_deleted: int = 0
    output_deleted: int = 0
    violations: list[str] = field(default_factory=list)
    # Per violated check, the record ids the verify quoted (its first few), to find the records by.
    samples: dict[str, list] = field(default_factory=dict)

    @property
    def survived(self) -> bool:
        """Recovered in time and verified clean."""
        return self.recovery_s is not None and not self.violations


@dataclass
class UnplannedExit:
    """A supervised process that died on its own (not by a fault), and the last line it wrote: why."""

    at_s: float  # seconds since the soak started, when the soak saw it dead
    process: str
    exit_code: int | None
    last_line: str


@dataclass
class SoakReport:
    """The soak's verdict: JSON, Markdown and a PNG timeline are written from it."""

    run_id: str
    options: dict
    started_at: float
    seconds: float = 0.0
    faults: list[FaultRecord] = field(default_factory=list)
    exits: list[UnplannedExit] = field(default_factory=list)  # each followed by a restart
    final: dict = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    timeline: list[tuple[float, int]] = field(default_factory=list)
    finished: bool = False  # False in the report rewritten after every round of a running soak
    stopped: str = ""  # why a soak ended before its drain and final verify (one line), if it did
    # Visibility latency (streaming/verify/visibility.py): over the whole soak, before the first fault, and
    # for each fault kind over the transactions committed from its injection to the next fault.
    visibility: dict = field(default_factory=dict)
    slot_launches: list[int] = field(default_factory=list)  # slot scope's G at each launch of the stream (--txn-slots)

    def time_visibility(self, samples: list[tuple[float, float]]) -> None:
        """Fill `visibility` from (commit wall time, seconds) samples, each given to the fault before its commit."""
        starts = [self.started_at + f.at_s for f in self.faults]
        periods: dict[str, list[float]] = {}
        for committed_at, seconds in samples:
            before = [f for f, start in zip(self.faults, starts) if start <= committed_at]
            periods.setdefault(before[-1].kind if before else "before the first fault", []).append(seconds)
        self.visibility = {"all": percentiles([seconds for _, seconds in samples]),
                           **{period: percentiles(seconds) for period, seconds in sorted(periods.items())}}

    @property
    def restarts(self) -> dict[str, int]:
        """Unplanned restarts per process."""
        counts: dict[str, int] = {}
        for died in self.exits:
            counts[died.process] = counts.get(died.process, 0) + 1
        return counts

    @property
    def ok(self) -> bool:
        """No violation anywhere and every fault survived (and, once finished, the final verify ran)."""
        return not self.violations and all(f.survived for f in self.faults) and (bool(self.final) or not self.finished)

    def by_kind(self) -> dict[str, dict]:
        """Faults, survivals and recovery times (median and max) for each kind."""
        kinds: dict[str, dict] = {}
        for fault in self.faults:
            entry = kinds.setdefault(fault.kind, {"injected": 0, "survived": 0, "recovery_s": [], "first_commit_s": []})
            entry["injected"] += 1
            entry["survived"] += fault.survived
            for measure in ("recovery_s", "first_commit_s"):
                if getattr(fault, measure) is not None:
                    entry[measure].append(getattr(fault, measure))
        for entry in kinds.values():
            for measure in ("recovery", "first_commit"):
                times = sorted(entry.pop(f"{measure}_s"))
                entry[f"{measure}_median_s"] = times[len(times) // 2] if times else None
                entry[f"{measure}_max_s"] = times[-1] if times else None
        return kinds

    def between_faults(self) -> dict:
        """Committed input offsets per second from each fault's recovery to the next fault (or the last sample).

        These windows are the pipeline running unhurt between faults, catch-up on a fault's backlog
        included. Their sum gives the rate over all of them; each kind's median is over the windows
        that follow its faults. A fault that never recovered opens no window.
        """
        ends = [f.at_s for f in self.faults[1:]] + [self.timeline[-1][0] if self.timeline else 0.0]
        windows = [(f.kind, f.at_s + f.recovery_s, end) for f, end in zip(self.faults, ends)
                   if f.recovery_s is not None and end > f.at_s + f.recovery_s]
        seconds = offsets = 0.0
        rates: dict[str, list[float]] = {}
        for kind, start, end in windows:
            inside = [sample for sample in self.timeline if start <= sample[0] <= end]
            if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
                continue
            span, moved = inside[-1][0] - inside[0][0], inside[-1][1] - inside[0][1]
            seconds, offsets = seconds + span, offsets + moved
            rates.setdefault(kind, []).append(moved / span)
        return {"windows": sum(len(r) for r in rates.values()), "seconds": round(seconds, 1), "offsets": int(offsets),
                "offsets_per_s": round(offsets / seconds, 1) if seconds else None,
                "median_offsets_per_s_by_kind": {kind: round(sorted(r)[len(r) // 2], 1)
                                                 for kind, r in sorted(rates.items())}}

    def to_json(self) -> str:
        """The whole report, faults first-class."""
        data = asdict(self)
        data["ok"] = self.ok
        data["restarts"] = self.restarts
        data["by_kind"] = self.by_kind()
        data["between_faults"] = self.between_faults()
        data["faults"] = [{**asdict(f), "survived": f.survived} for f in self.faults]
        return json.dumps(data, indent=2)


def write_report(report: SoakReport, output_dir: Path) -> None:
    """Write report.json, report.md and timeline.png into the output folder."""
    output_dir.mkdir(parents=True, exist_ok=True)
    report.time_visibility(read_log(output_dir / VISIBILITY_LOG))
    (output_dir / "report.json").write_text(report.to_json())
    # Imported here, not with the module: matplotlib would cost every `eosbench soak` half a second
    # before its flags are even checked.
    from eosbench.console.plots import soak_timeline_png

    soak_timeline_png(report.timeline, [(f.at_s, f.kind, f.recovery_s) for f in report.faults],
                      output_dir / "timeline.png", f"soak {report.run_id}: committed input offsets per second")
    (output_dir / "report.md").write_text(report_markdown(report))


def report_markdown(report: SoakReport) -> str:
    """The Markdown summary: verdict, faults by kind with recovery times, every violation."""
    final, between = report.final, report.between_faults()
    verdict = ("PASSED" if report.ok else "FAILED") if report.finished else "STOPPED" if report.stopped else (
        "RUNNING" if report.ok else "FAILING")
    lines = [f"# Soak {report.run_id}: {verdict}", "",
             *([f"- stopped early, before the drain and the final verify: {report.stopped}"] if report.stopped else []),
             f"- duration: {report.seconds / 60:.1f} min; options: " +
             ", ".join(f"{k}={v}" for k, v in report.options.items() if k not in ("output_dir", "state_dir")),
             f"- faults injected: {len(report.faults)}, survived: {sum(f.survived for f in report.faults)}",
             f"- records verified at the end: {final.get('input_committed', 0):,} committed input records,"
             f" {final.get('output_committed', 0):,} output records, {final.get('input_aborted', 0):,} aborted"
             f" input records hidden, {final.get('output_aborted_hidden', 0):,} aborted output records hidden",
             *([f"- deleted by retention or compaction (no violation): {final.get('source_deleted', 0):,} deliveries"
                f" whose input record is gone (source_deleted; still checked for duplicates),"
                f" {final.get('output_deleted', 0):,} committed input records whose delivery is gone (output_deleted),"
                f" {final.get('transactions_output_deleted', 0):,} transactions cut short by it"
                " (transactions_output_deleted)"] if final else []),
             *([f"- output matched to input by key (`{report.options.get('pipeline')}` writes no eos headers):"
                " the torn-transaction check does not apply, and the stream's visibility log is not kept"]
               if final.get("match_by") == "key" else []),
             *([f"- slot counts (--txn-slots) at the stream's {len(report.slot_launches)} launches: "
                + ", ".join(f"G={g} ×{n}" for g, n in sorted(Counter(report.slot_launches).items()))
                + f"; it changed at {sum(a != b for a, b in zip(report.slot_launches, report.slot_launches[1:]))} relaunches"]
               if report.slot_launches else []),
             "- unplanned restarts: " + (", ".join(f"{process} {count}" for process, count in report.restarts.items())
                                         + " (why: Unplanned exits, below)" if report.exits else "none"),
             f"- violations: {len(report.violations)}",
             f"- visibility latency (commit returned to read_committed sees it): {_visibility(report, 'all')};"
             f" before the first fault: {_visibility(report, 'before the first fault')}",
             f"- throughput between faults (from each recovery to the next fault): {_between(between)}", "",
             "First commit: from the fault to the sink group's first commit after it was undone. Recovery: to"
             " throughput back at 90 % of its rate before the fault.", "",
             "| fault | injected | survived | first commit median (s) | first commit max (s) | recovery median (s) |"
             " recovery max (s) | offsets/s from recovery to the next fault (median) | visibility until the next fault |",
             "|---|---|---|---|---|---|---|---|---|"]
    for kind, entry in sorted(report.by_kind().items()):
        rate = between["median_offsets_per_s_by_kind"].get(kind)
        lines.append(f"| {kind} | {entry['injected']} | {entry['survived']} | {entry['first_commit_median_s']} |"
                     f" {entry['first_commit_max_s']} | {entry['recovery_median_s']} |"
                     f" {entry['recovery_max_s']} | {f'{rate:,.0f}' if rate is not None else '—'} |"
                     f" {_visibility(report, kind)} |")
    lines += ["", "![timeline](timeline.png)", "", "## Rounds", "",
              "| # | at (s) | fault | what was done | first commit (s) | recovery (s) | records checked | verify |",
              "|---|---|---|---|---|---|---|---|"]
    for f in report.faults:
        verdict = "ok" if not f.violations else "; ".join(f.violations)
        lines.append(f"| {f.index + 1} | {f.at_s} | {f.kind} | {f.detail} | {f.first_commit_s} | {f.recovery_s} |"
                     f" {f.records_checked:,} |"
                     f" {verdict}{deleted_note(f.source_deleted, f.output_deleted)} |")
    if report.exits:
        lines += ["", "## Unplanned exits", "", "Each was restarted at once; the line is the last the process wrote.", "",
                  "| at (s) | process | exit code | last line |", "|---|---|---|---|"]
        lines += [f"| {died.at_s} | {died.process} | {died.exit_code} | {_cell(died.last_line)} |" for died in report.exits]
    if report.violations:
        lines += ["", "## Violations", ""] + [f"- {v}" for v in report.violations]
    return "\n".join(lines) + "\n"


def deleted_note(source_deleted: int, output_deleted: int) -> str:
    """What retention had deleted before a verify judged it, to stand beside its verdict; empty if nothing."""
    if not source_deleted and not output_deleted:
        return ""
    return f" (source_deleted {source_deleted:,}, output_deleted {output_deleted:,})"


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("|", "\\|")


def _between(figures: dict) -> str:
    """The between-faults throughput in a few words."""
    if not figures["windows"]:
        return "no window"
    return (f"{figures['offsets_per_s']:,.0f} committed input offsets/s over {figures['seconds']:,.0f} s"
            f" in {figures['windows']} windows")


def _visibility(report: SoakReport, period: str) -> str:
    """One period's visibility figures in a few words."""
    figures = report.visibility.get(period)
    if not figures or not figures["samples"]:
        return "no samples"
    return (f"p50 {figures['p50_ms']:.0f} ms, p99 {figures['p99_ms']:.0f} ms, max {figures['max_ms']:.0f} ms"
            f" ({figures['samples']:,} transactions)")
