"""Per-round statistics as CSV: one row per round, the same numbers as RunningStats."""

from __future__ import annotations

import csv

import pytest

from specviz.core.metrics.csv_export import COLUMNS, write_stats_csv
from specviz.core.metrics.running import summary
from specviz.core.trace import files as tracefile
from specviz.core.trace.rounds import with_extras
from tests.fixtures import synthetic_session


def read(path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames) == COLUMNS
        return list(reader)


def with_probes(session):
    """Every round with a probe: T_t(1) steps near 2 ms, T_t(n) = 2 + 0.2 (n - 1)."""
    rounds = [
        with_extras(
            r,
            probes={
                "context_len": 8,
                "target_ms": [[n, 2.0 + 0.2 * (n - 1)] for n in range(1, 6)],
                "draft_ms": 0.5,
                "t1_ms": [2.0 + 0.01 * (r.index % 3), 2.0, 1.99],
            },
        )
        for r in session.rounds
    ]
    return type(session)(session.header, rounds)


def test_one_row_per_round_with_the_running_figures(tmp_path):
    session = with_probes(synthetic_session(25, seed=2))
    path = tmp_path / "stats.csv"
    write_stats_csv(session, path)
    rows = read(path)
    assert len(rows) == len(session.rounds)
    assert [int(r["round"]) for r in rows] == list(range(25))
    for row, rnd in zip(rows, session.rounds, strict=True):
        assert int(row["drafted"]) == rnd.n_drafted
        assert int(row["accepted"]) == rnd.n_accepted
        assert int(row["emitted"]) == rnd.n_emitted
        assert float(row["draft_ms"]) == rnd.draft_ms  # full precision
        assert float(row["verify_ms"]) == rnd.verify_ms
        assert 0 <= float(row["alpha"]) <= 1
    s = summary(session)
    assert float(rows[-1]["acceptance_running"]) == pytest.approx(s["acceptance_rate"])
    # the window's figures, the same as the summary's: one trace, one speedup
    assert rows[-1]["speedup_status"] == s["speedup_status"]
    assert s["speedup_status"] in ("ok", "noisy")  # the synthetic rounds' times vary widely
    measured = rows[-1]["speedup_measured"]
    assert (float(measured) if measured else None) == pytest.approx(s["speedup_measured"])
    low, high = float(rows[-1]["speedup_low"]), float(rows[-1]["speedup_high"])
    assert [low, high] == pytest.approx(s["speedup_ci"])
    assert float(rows[-1]["speedup_predicted"]) == pytest.approx(s["speedup_predicted"])
    assert float(rows[-1]["speedup_refined"]) == pytest.approx(s["speedup_refined"])
    assert rows[0]["speedup_status"] == "measuring"  # one probe's steps are too few


def test_undefined_figures_are_empty_cells(tmp_path):
    session = synthetic_session(3)
    header = session.header.__class__(
        **{**session.header.__dict__, "baseline_ms_per_token": None, "draft_ms_per_token": None}
    )
    session = type(session)(header, session.rounds)
    path = tmp_path / "stats.csv"
    write_stats_csv(session, path)
    rows = read(path)
    assert {r["speedup_measured"] for r in rows} == {""}
    assert {r["speedup_predicted"] for r in rows} == {""}


def test_empty_session_gives_the_header_row_only(tmp_path):
    session = synthetic_session(0)
    path = tmp_path / "stats.csv"
    write_stats_csv(session, path)
    assert read(path) == []


def test_written_atomically(tmp_path, monkeypatch):
    path = tmp_path / "stats.csv"
    path.write_text("old\n")

    def failing_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tracefile.os, "replace", failing_replace)
    with pytest.raises(OSError):
        write_stats_csv(synthetic_session(5), path)
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["stats.csv"]
