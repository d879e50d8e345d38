"""Per-round statistics as CSV, for a spreadsheet or pandas. Counts and acceptance come
from metrics.running.RunningStats, the speedups from metrics.speed_tracker.SpeedTracker:
the same numbers, round by round, that the window's plots and status bar show."""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterator

from specviz.core.metrics.running import RunningStats
from specviz.core.metrics.speed_tracker import SpeedTracker
from specviz.core.trace.files import write_atomic
from specviz.core.trace.session import Session

# round: 0-based index; drafted / accepted / emitted: tokens in that round; alpha: that
# round's mean sum_x min(p, q) over judged positions; draft_ms / verify_ms: wall time;
# acceptance_running: accepted / judged so far; speedups: over the last rounds (the
# window's), speedup_measured empty unless speedup_status is ok (or calibration for a 1.0
# trace), speedup_low / speedup_high its 95% interval; predictions: refined and Leviathan's.
COLUMNS = (
    "round",
    "drafted",
    "accepted",
    "emitted",
    "alpha",
    "draft_ms",
    "verify_ms",
    "acceptance_running",
    "speedup_measured",
    "speedup_low",
    "speedup_high",
    "speedup_status",
    "speedup_refined",
    "speedup_predicted",
)


def stats_rows(session: Session) -> Iterator[dict[str, int | float | None]]:
    """One dict per round, keyed by COLUMNS; None where a figure is not defined."""
    stats = RunningStats.for_header(session.header)
    probed = any(rnd.probes for rnd in session.rounds)
    speed = SpeedTracker(None if probed else session.header)
    for rnd in session.rounds:
        s = stats.add(rnd)
        point = speed.add(rnd)
        band = point.band or (None, None)
        yield {
            "round": rnd.index,
            "drafted": s.n_drafted,
            "accepted": s.n_accepted,
            "emitted": s.n_emitted,
            "alpha": s.alpha,
            "draft_ms": rnd.draft_ms,
            "verify_ms": rnd.verify_ms,
            "acceptance_running": s.acceptance_running,
            "speedup_measured": point.speedup.shown,
            "speedup_low": band[0],
            "speedup_high": band[1],
            "speedup_status": point.speedup.status,
            "speedup_refined": point.refined,
            "speedup_predicted": point.leviathan if probed else stats.speedup_predicted,
        }


def stats_csv_lines(session: Session) -> Iterator[str]:
    """The header row, then one row per round; an undefined figure is an empty cell."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="")

    def row(values) -> str:
        buffer.seek(0)
        buffer.truncate()
        writer.writerow(values)
        return buffer.getvalue()

    yield row(COLUMNS)
    for values in stats_rows(session):
        yield row("" if values[c] is None else values[c] for c in COLUMNS)


def write_stats_csv(session: Session, path: str | os.PathLike[str]) -> None:
    """Write the per-round statistics to path atomically (temporary file, then rename)."""
    write_atomic(path, stats_csv_lines(session))
