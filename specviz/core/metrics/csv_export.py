"""Per-round statistics as CSV, for a spreadsheet or pandas. Every figure comes from
specviz.core.metrics.running.RunningStats, the same numbers the app's plots show."""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterator

from specviz.core.metrics.running import RunningStats
from specviz.core.trace.files import write_atomic
from specviz.core.trace.session import Session

# round: 0-based index; drafted / accepted / emitted: tokens in that round; alpha: that
# round's mean sum_x min(p, q) over judged positions; draft_ms / verify_ms: wall time;
# acceptance_running: accepted / judged so far; speedups: running, empty when unknown.
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
    "speedup_predicted",
)


def stats_rows(session: Session) -> Iterator[dict[str, int | float | None]]:
    """One dict per round, keyed by COLUMNS; None where a figure is not defined."""
    stats = RunningStats.for_header(session.header)
    for rnd in session.rounds:
        s = stats.add(rnd)
        yield {
            "round": rnd.index,
            "drafted": s.n_drafted,
            "accepted": s.n_accepted,
            "emitted": s.n_emitted,
            "alpha": s.alpha,
            "draft_ms": rnd.draft_ms,
            "verify_ms": rnd.verify_ms,
            "acceptance_running": s.acceptance_running,
            "speedup_measured": s.speedup_measured,
            "speedup_predicted": s.speedup_predicted,
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
