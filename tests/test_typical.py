"""The lossy typical rule (core.decoding.typical) in the engine: the same numbers as the lab's
numpy version, greedy equal to generate (p one-hot keeps exactly the argmax drafts), its
rounds recorded and checked, and the project's end-to-end statistical test failing it (the
test that token and block pass), with the emitted tokens' distance from p."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from specviz.core.decoding.typical import typical_threshold, verify_typical
from specviz.core.decoding.verify import verify
from specviz.core.engine.speculative import SpeculativeEngine
from specviz.core.lab.sequence import run_rule, shared_draws
from specviz.core.trace.check_session import check_session
from specviz.core.trace.files import load, save
from specviz.core.trace.records import Settings
from specviz.core.trace.rounds import with_extras
from specviz.core.trace.session import Session
from tests.test_sampling import LEVEL


def test_the_threshold_by_hand():
    """min(epsilon, delta exp(-H)): uniform over 4 tokens has H = log 4."""
    p = torch.full((4,), 0.25)
    assert float(typical_threshold(p, 0.3, 0.09)) == pytest.approx(0.09 / 4)
    one_hot = torch.tensor([0.0, 1.0, 0.0])
    assert float(typical_threshold(one_hot, 0.05, 0.09)) == pytest.approx(0.05)  # H = 0


def test_the_engines_typical_rule_keeps_what_the_labs_keeps():
    """Round by round on i.i.d. positions, the engine's rule keeps the same number of drafts
    as core.lab.sequence's on the same drafts (its fate needs no uniform)."""
    p = np.array([0.6, 0.3, 0.08, 0.02])
    q = np.array([0.1, 0.2, 0.3, 0.4])
    k, rounds = 3, 2000
    drafts, u, u_next = shared_draws(q, k, rounds, seed=4)
    tp = torch.tensor(p).repeat(k + 1, 1)
    tq = torch.tensor(q).repeat(k, 1)
    ours = [verify_typical(tp, tq, torch.tensor(d), None)[0].n_accepted for d in drafts]
    lab = run_rule("typical", p, q, k, rounds, draws=(drafts, u, u_next))
    assert np.mean(ours) == pytest.approx(lab.mean_accepted, abs=1e-12)
    assert 0 < lab.mean_accepted < k  # both fates occurred


def test_greedy_typical_is_the_token_wise_result():
    rng = np.random.default_rng(0)
    for _ in range(50):
        k = int(rng.integers(1, 5))
        best = rng.integers(0, 6, size=k + 1)
        p = torch.nn.functional.one_hot(torch.tensor(best), 6).double()
        drafts = torch.tensor(np.where(rng.random(k) < 0.6, best[:k], rng.integers(0, 6, k)))
        q = torch.nn.functional.one_hot(drafts, 6).double()
        a, _ = verify_typical(p, q, drafts, None)
        b = verify(p, q, drafts)
        assert (a.n_accepted, a.next_token) == (b.n_accepted, b.next_token)


def test_greedy_typical_equals_generate(pair):
    from tests.test_drafters import PROMPTS, greedy_reference

    for prompt in PROMPTS:
        engine = SpeculativeEngine(
            pair, Settings(k=4, temperature=0, max_new_tokens=20, verifier="typical")
        )
        header = engine.prefill(prompt, calibrate=False)
        ours = [t.id for r in engine.run() for t in r.tokens if t.emitted]
        assert ours == greedy_reference(pair.target, list(header.prompt_ids), 20, pair.eos_token_id)


def test_typical_rounds_are_recorded_and_checked(pair, tmp_path):
    settings = Settings(k=4, seed=3, max_new_tokens=40, verifier="typical", typical_delta=0.5)
    engine = SpeculativeEngine(pair, settings)
    header = engine.prefill("And the earth was", calibrate=False)
    session = Session(header, list(engine.run()))
    assert check_session(session) == []
    assert all(r.typical is not None and r.block is None for r in session.rounds)
    path = tmp_path / "typical.jsonl"
    save(session, path)
    back = load(path)
    assert back.header.settings.verifier == "typical" and back.header.settings.lossy
    assert back.header.settings.typical_delta == 0.5
    assert [r.typical for r in back.rounds] == [r.typical for r in session.rounds]
    # A threshold that contradicts a token's fate is named.
    rnd = next(r for r in session.rounds if r.n_judged)
    first = next(t for t in rnd.tokens if t.status in ("accepted", "rejected"))
    flipped = 0.0 if first.status == "rejected" else 1.0
    bad = with_extras(rnd, typical={"threshold": [flipped, *rnd.typical.threshold[1:]]})
    rounds = [bad if r is rnd else r for r in session.rounds]
    problems = check_session(Session(header, rounds))
    assert any(p.field == "typical.threshold[0]" for p in problems)


def test_the_end_to_end_test_fails_the_typical_rule(pair):
    """The sequences test that token and block pass (tests/test_drafters.py) rejects typical
    acceptance under prompt lookup (a one-hot q): at the test's flat temperature nearly every
    copied token clears the entropy-scaled threshold, so the stream follows the copied text
    instead of the target. Its first token's distance from p is far above the exact rule's
    on the same number of sessions. (With the fixture's draft model, random and as flat as
    its target, q is close enough to p that the test cannot tell at this size.)"""
    from specviz.core.decoding.warp import SamplingConfig, warp
    from tests.test_drafters import TEMPERATURE, lookup_sequences, sequence_pvalue

    (prompt_ids, token), (_, typical) = (lookup_sequences(pair, r) for r in ("token", "typical"))
    runs = {"token": token, "typical": typical}
    assert sequence_pvalue(pair, prompt_ids, runs["token"]) > LEVEL
    assert sequence_pvalue(pair, prompt_ids, runs["typical"]) < 1e-6 < LEVEL
    with torch.inference_mode():
        logits = pair.target(input_ids=torch.tensor([prompt_ids])).logits[0, -1, : pair.vocab_size]
    p = warp(logits, SamplingConfig(temperature=TEMPERATURE)).double().numpy()
    tv = {}
    for rule, sequences in runs.items():
        counts = np.bincount([s[0] for s in sequences], minlength=len(p)) / len(sequences)
        tv[rule] = 0.5 * np.abs(counts - p).sum()
    print(f"first-token TV from p: {tv}")
    assert tv["typical"] > 1.5 * tv["token"], tv


def test_run_and_inspect_say_lossy(pair_dirs, tmp_path, capsys):
    """`run --verifier typical` warns on stderr and writes a header that says typical with
    its parameters; `inspect` prints LOSSY; a bad epsilon is refused before loading."""
    from specviz.cli.main import main

    target, draft = map(str, pair_dirs)
    trace = tmp_path / "typical.jsonl"
    args = ["run", "--target", target, "--draft", draft, "--prompt", "And the", "--quiet"]
    code = main([*args, "--max-new-tokens", "12", "--verifier", "typical", "--trace", str(trace)])
    err = capsys.readouterr().err
    assert code == 0 and "LOSSY" in err and "the typical rule" in err
    assert load(trace).header.settings.verifier == "typical"
    assert main(["inspect", str(trace)]) == 0
    out = capsys.readouterr().out
    assert "LOSSY" in out and "verifier typical (epsilon 0.3, delta 0.09)" in out
    assert main([*args, "--verifier", "typical", "--typical-epsilon", "0"]) == 2
    err = capsys.readouterr().err
    assert "typical epsilon must be in (0, 1]" in err and "loading" not in err
    # A token-wise run says nothing of it.
    assert main([*args, "--max-new-tokens", "4"]) == 0
    assert "LOSSY" not in capsys.readouterr().err


def test_the_window_shows_a_standing_lossy_banner(pair, qtbot):
    from specviz.gui.stream.panel import StreamPanel

    panel = StreamPanel()
    qtbot.addWidget(panel)
    engine = SpeculativeEngine(pair, Settings(k=3, seed=1, max_new_tokens=8, verifier="typical"))
    header = engine.prefill("And the", calibrate=False)
    panel.clear(header)
    assert not panel.lossy.isHidden() and "does not reproduce" in panel.lossy.text()
    panel.append_rounds(list(engine.run()))
    assert not panel.lossy.isHidden()
    token = SpeculativeEngine(pair, Settings(k=3, seed=1, max_new_tokens=8))
    panel.clear(token.prefill("And the", calibrate=False))
    assert panel.lossy.isHidden()
    panel.append_rounds(list(token.run()))
    assert panel.lossy.isHidden()


def test_the_distribution_panel_reads_a_typical_position_out_loud(pair):
    from specviz.core.metrics.position_bars import position_bars
    from specviz.gui.distribution.text import summary_html

    settings = Settings(k=3, seed=2, max_new_tokens=30, verifier="typical")
    engine = SpeculativeEngine(pair, settings)
    engine.prefill("And the earth was", calibrate=False)
    rounds = list(engine.run())
    rnd = next(r for r in rounds if r.n_judged)
    bars = position_bars(rnd, 0)
    assert bars.typical_threshold == rnd.typical.threshold[0]
    text = summary_html(bars)
    assert "typical acceptance" in text and "LOSSY" in text
    resampled = next(r for r in rounds if r.n_accepted < r.n_drafted)
    assert "from p itself" in summary_html(position_bars(resampled, resampled.n_accepted))


# the offscreen platform cannot resize a top-level window to a new minimum (xcb can)
@pytest.mark.qt_log_ignore("propagateSizeHints")
def test_a_long_drafter_warning_gets_at_most_four_lines_and_scrolls(qtbot):
    """At 1280x720 the stream keeps its room: the banner's box is as tall as four lines of
    its text, the rest is scrolled to (nothing cut off unseen), and the box hides with it."""
    from specviz.gui.stream.panel import BannerArea, StreamPanel

    panel = StreamPanel()
    qtbot.addWidget(panel)
    panel.resize(600, 500)
    panel.show()
    area = panel.lossy.area
    assert isinstance(area, BannerArea) and area.isHidden()
    notes = [f"warning {i}: " + "the head fits other layers better than its own " * 4
             for i in range(3)]  # fmt: skip
    panel.lossy.note(None, notes)
    qtbot.waitUntil(lambda: area.isVisible())
    line = panel.lossy.fontMetrics().lineSpacing()
    assert 4 * line <= area.height() <= 4 * line + 24  # four lines, padding and border
    assert panel.lossy.heightForWidth(area.viewport().width()) > area.height()  # the rest...
    assert area.verticalScrollBar().maximum() > 0  # ...is scrolled to
    assert panel.lossy.text().endswith(notes[-1])  # and kept whole
    panel.lossy.note(None, ["one short warning"])
    assert area.height() < 3 * line + 24  # a short one takes its own height
    panel.clear()
    assert area.isHidden() and panel.lossy.isHidden()
