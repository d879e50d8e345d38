"""The summary's speedup (issue 12): from the cost model's probes over a window of rounds, not
from the header's one-off baseline; a value above K + 1 flagged, never reported as fact; the
header's figure only for a trace without probes, labelled as such. `run`, the trace's
summary line and `inspect` all say the same."""

from __future__ import annotations

import dataclasses
import json

import pytest

from specviz.cli.main import main
from specviz.cli.session.run import format_summary
from specviz.core.metrics.costmodel import figures
from specviz.core.metrics.running import WINDOW, summary
from specviz.core.trace.files import save
from specviz.core.trace.rounds import with_extras
from specviz.core.trace.session import Session
from tests.fixtures import synthetic_session

OLD_KEYS = {
    "rounds", "tokens", "drafted", "judged", "accepted", "acceptance_rate", "draft_efficiency",
    "alpha", "acceptance_by_position", "mean_accepted", "tokens_per_forward", "ms_per_token",
    "baseline_ms_per_token", "cost_ratio", "speedup_measured", "speedup_predicted",
}  # fmt: skip


def probe(t1: float = 2.0, draft: float = 0.5, context_len: int = 8) -> dict:
    """One probe record: T_t(n) = t1 + 0.2 (n - 1) for n = 1..5, T_d(1) = draft."""
    target = [[n, t1 + 0.2 * (n - 1)] for n in range(1, 6)]
    return {"context_len": context_len, "target_ms": target, "draft_ms": draft}


def probed(session: Session, baseline: float | None, **probe_args) -> Session:
    """The session with a probe after every round and this header baseline."""
    header = dataclasses.replace(session.header, baseline_ms_per_token=baseline)
    rounds = [with_extras(r, probes=probe(**probe_args)) for r in session.rounds]
    return Session(header, rounds)


def test_absurd_header_baseline_sane_probes_reports_the_probe_speedup():
    """The header says the target takes 5000 ms a token (a busy machine at session start);
    the probes say 2 ms. The speedup comes from the probes, over the last WINDOW rounds."""
    session = probed(synthetic_session(n_rounds=80, k=4), baseline=5000.0, t1=2.0)
    s = summary(session)
    window = session.rounds[-WINDOW:]
    ms = sum(r.draft_ms + r.verify_ms for r in window)
    emitted = sum(r.n_emitted for r in window)
    assert s["speedup_basis"] == "probes"
    assert s["baseline_ms_per_token"] == pytest.approx(2.0)
    assert s["speedup_measured"] == pytest.approx(figures(session.rounds).speedup_measured)
    assert s["speedup_measured"] == pytest.approx(2.0 * emitted / ms, rel=0.2)  # slow ones capped
    assert not s["speedup_impossible"] and s["max_tokens_per_round"] == 5
    assert s["window"]["first_round"] == 80 - WINDOW and s["window"]["last_round"] == 79
    assert s["window"]["probes"] > 0
    assert s["cost_ratio"] == pytest.approx(0.25)
    assert s["speedup_refined"] is not None and s["speedup_predicted"] is not None
    assert OLD_KEYS <= set(s)
    text = format_summary(s)
    assert "decoding steps timed by" in text and f"rounds {80 - WINDOW}-79" in text
    assert s["speedup_status"] == "ok" and s["speedup_ci"][0] <= s["speedup_measured"]
    assert "refined" in text and "Leviathan" in text


def test_impossible_speedup_is_flagged_not_reported():
    """Probes that say the target takes 500 ms a token against rounds of a few ms: a speedup
    far above K + 1 = 5 is impossible; it is kept aside (raw) and flagged."""
    s = summary(probed(synthetic_session(n_rounds=20, k=4), baseline=10.0, t1=500.0))
    assert s["speedup_measured_raw"] > 5
    assert s["speedup_impossible"] and s["speedup_measured"] is None
    text = format_summary(s)
    assert "IMPOSSIBLE" in text and "tokens per target pass" in text


def test_header_fallback_for_a_trace_without_probes_is_labelled_and_checked():
    session = synthetic_session(n_rounds=10, k=4)  # schema 1.0's figures: no probes
    ms = sum(r.draft_ms + r.verify_ms for r in session.rounds)
    emitted = sum(r.n_emitted for r in session.rounds)
    header = dataclasses.replace(session.header, baseline_ms_per_token=1.2 * ms / emitted)
    session = Session(header, session.rounds)  # a calibration that says 1.2x
    s = summary(session)
    assert s["speedup_basis"] == "header" and s["cost_model"] is None
    assert s["speedup_status"] == "calibration" and s["speedup_ci"] is None
    assert s["speedup_measured"] == pytest.approx(1.2)
    assert "measured once at session start" in format_summary(s)
    assert "no interval" in format_summary(s)
    header = dataclasses.replace(session.header, baseline_ms_per_token=9000.0)
    s = summary(Session(header, session.rounds))  # the 9.16x at K = 4 of issue 12, worse
    assert s["speedup_impossible"] and s["speedup_measured"] is None


def test_trace_summary_line_and_inspect_report_the_cost_model(tmp_path, capsys):
    session = probed(synthetic_session(n_rounds=12, k=4), baseline=5000.0, t1=2.0)
    path = tmp_path / "t.jsonl"
    save(session, path, summary(session))
    line = json.loads(path.read_text().splitlines()[-1])
    assert line["type"] == "summary" and OLD_KEYS <= set(line)
    assert line["speedup_basis"] == "probes" and line["baseline_ms_per_token"] == 2.0
    assert line["speedup_measured"] == pytest.approx(summary(session)["speedup_measured"])
    assert main(["inspect", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["speedup_basis"] == "probes"
    assert report["speedup_measured"] == pytest.approx(line["speedup_measured"])
    assert [w["k"] for w in report["whatif"]] == [1, 2, 3]
    assert all(w["estimate"] for w in report["whatif"])
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "ESTIMATE for a smaller K'" in out and "K'=1:" in out
    assert "decoding steps timed by" in out and "refined" in out and "Leviathan" in out


@pytest.mark.parametrize(
    "bad,field",
    [
        ({"target_ms": "abc"}, "probes.target_ms"),
        ({"target_ms": [[1, "x"]]}, "probes.target_ms[0]"),
        ({"target_ms": [[0, 1.0]]}, "probes.target_ms[0]"),
        ({"target_ms": [[10**6, 1.0]]}, "probes.target_ms[0]"),
        ({"target_ms": [[1, 1.0], [1, 2.0]]}, "probes.target_ms[1]"),
        ({"target_ms": [[n, 1.0] for n in range(1, 200)]}, "probes.target_ms"),
        ({"target_ms": [[1, 10**400]]}, "probes.target_ms[0]"),
        ({"target_ms": [[1, -1.0]]}, "probes.target_ms[0]"),
        ({"draft_ms": "fast"}, "probes.draft_ms"),
        ({"context_len": -3}, "probes.context_len"),
    ],
)
def test_broken_probes_are_refused_with_the_field(tmp_path, capsys, bad, field):
    """The summary folds every probe into the cost model: a probe record it cannot fold is a
    clear exit 2 naming the field, never a traceback."""
    session = probed(synthetic_session(n_rounds=3, k=4), baseline=10.0)
    path = tmp_path / "t.jsonl"
    save(session, path)
    lines = path.read_text().splitlines()
    obj = json.loads(lines[1])
    obj["probes"] = {**obj["probes"], **bad}
    lines[1] = json.dumps(obj)
    path.write_text("\n".join(lines) + "\n")
    assert main(["inspect", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"'{field}'" in err and "Traceback" not in err
