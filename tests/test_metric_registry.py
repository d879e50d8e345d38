"""Issue 32 item 4: a round's judged drafts are placed by position (a chain) or depth (a tree)
in one place (core.metrics.positions), and every figure of acceptance by position reads it;
a metric is one fold plus one MetricSpec in core.metrics.registry.SPECS, which `inspect`,
the window's running stats and tune's table read. The metric here is a test file's."""

from __future__ import annotations

import pytest

from specviz.core.trace.records import Settings
from specviz.core.trace.session import Session

PROMPT = "And the earth was"
TREE = Settings(k=4, temperature=1.0, seed=5, max_new_tokens=40, tree_width=2, tree_budget=12)


@pytest.fixture(scope="module")
def tree_session(pair) -> Session:
    from specviz.core.engine.speculative import SpeculativeEngine

    engine = SpeculativeEngine(pair, TREE)
    session = Session(engine.prefill(PROMPT, calibrate=False))
    for rnd in engine.run():
        session.append(rnd)
    return session


def by_depth(rounds) -> list[float | None]:
    """Accepted / tried nodes at each depth, counted here from the tree records alone."""
    tried: dict[int, list[bool]] = {}
    for rnd in rounds:
        depths: list[int] = []
        for parent in rnd.tree.parent:
            depths.append(1 if parent < 0 else depths[parent] + 1)
        for depth, fate in zip(depths, rnd.tree.fate, strict=True):
            if fate != "discarded":
                tried.setdefault(depth, []).append(fate == "accepted")
    deepest = max(tried, default=0)
    return [sum(tried[d]) / len(tried[d]) if tried.get(d) else None
            for d in range(1, deepest + 1)]  # fmt: skip


def test_the_cost_model_counts_a_trees_acceptance_by_depth(tree_session):
    from specviz.core.metrics.costmodel import CostModel

    rounds = tree_session.rounds
    assert any(r.tree.parent[:2] == (-1, -1) for r in rounds)  # siblings: node order != depth
    expected = by_depth(rounds)
    model = CostModel(window=None).extend(rounds)
    assert model.acceptance_by_position() == pytest.approx(expected)
    assert list(model.figures().acceptance_by_position) == pytest.approx(expected)


def test_the_cost_model_keeps_a_trees_depth(tree_session):
    """tree_refined charges d draft passes, d the trees' mean depth (a pass per level)."""
    from specviz.core.metrics.costmodel import CostModel
    from specviz.core.trace.tree_nodes import TreeNodes

    rounds = tree_session.rounds
    depths = [TreeNodes.of(r.tree.parent).depth for r in rounds]
    assert max(depths) > 1
    assert [r.tree for r in CostModel(window=None).extend(rounds).rounds] == depths


class BonusShare:
    """A test's metric: the share of rounds that ended on a bonus token (every draft kept)."""

    def __init__(self) -> None:
        self.rounds = self.bonus = 0

    def add(self, rnd) -> None:
        self.rounds += 1
        self.bonus += bool(rnd.tokens) and rnd.tokens[-1].status == "bonus"

    def value(self) -> float | None:
        return self.bonus / self.rounds if self.rounds else None


@pytest.fixture
def with_bonus_share(monkeypatch):
    from specviz.core.metrics import registry

    spec = registry.MetricSpec(
        "bonus_share", "bonus share (a test's)", "rounds ending on a bonus / rounds", BonusShare
    )
    monkeypatch.setitem(registry.SPECS, "bonus_share", spec)
    return spec


def bonus_share(rounds) -> float:
    return sum(r.tokens[-1].status == "bonus" for r in rounds) / len(rounds)


@pytest.fixture
def trace(tree_session, tmp_path):
    from specviz.core.trace.files import save

    path = tmp_path / "tree.jsonl"
    save(tree_session, path)
    return path


def inspect_json(path, capsys) -> dict:
    import json

    from specviz.cli.main import main

    capsys.readouterr()
    assert main(["inspect", "--json", str(path)]) == 0
    return json.loads(capsys.readouterr().out)


def replay_window(qtbot, session):
    from specviz.gui.main_window import MainWindow

    window = MainWindow(None, autosave=False)
    qtbot.addWidget(window)
    window.show()
    window.controller.engine.session_started.emit(session.header)  # as the worker says it
    window.controller.add_rounds(session.rounds)
    return window


QUIET = pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")


def test_a_metric_registered_from_a_test_file_alone_is_in_inspect(
    with_bonus_share, trace, tree_session, capsys
):
    from specviz.cli.main import main

    expected = bonus_share(tree_session.rounds)
    assert 0 < expected < 1
    assert inspect_json(trace, capsys)["metrics"]["bonus_share"] == pytest.approx(expected)
    assert main(["inspect", str(trace)]) == 0
    assert f"bonus share (a test's): {expected:.3f}" in capsys.readouterr().out


@QUIET
def test_a_metric_registered_from_a_test_file_alone_is_in_the_window(
    with_bonus_share, qtbot, tree_session
):
    window = replay_window(qtbot, tree_session)
    try:
        expected = bonus_share(tree_session.rounds)
        stats = window.controller.stats
        assert stats.metrics.values()["bonus_share"] == pytest.approx(expected)
        assert f"bonus share (a test's): {expected:.3f}" in window.status.acceptance.toolTip()
    finally:
        window.close_now()


def test_a_metric_registered_from_a_test_file_alone_is_in_a_tune_row(
    with_bonus_share, tree_session
):
    from specviz.core.tune.sweep import SweepRun
    from specviz.core.tune.table import sweep_table

    rounds = tuple(tree_session.rounds)
    half = len(rounds) // 2
    runs = [SweepRun(0, "test", TREE.k, rounds[:half]), SweepRun(1, "test", TREE.k, rounds[half:])]
    [row] = sweep_table(runs).rows
    assert row.metrics["bonus_share"] == pytest.approx(bonus_share(rounds))
    assert row.to_json()["metrics"]["bonus_share"] == pytest.approx(bonus_share(rounds))


def test_an_unregistered_metric_is_nowhere(trace, capsys, tree_session):
    from specviz.core.metrics.running import RunningStats

    assert "bonus_share" not in inspect_json(trace, capsys)["metrics"]
    assert "bonus_share" not in RunningStats.for_header(tree_session.header).metrics.values()


@QUIET
def test_one_tree_trace_gives_one_acceptance_by_depth_everywhere(
    qtbot, trace, tree_session, capsys
):
    """inspect (its summary and its metrics), the Tree tab's counts and bars, the window's
    RunningStats, the cost model's figures and tune's table: the same per-depth acceptance,
    the tree records' own count."""
    from specviz.core.metrics.costmodel import figures
    from specviz.core.metrics.running import fold
    from specviz.core.trace.files import load
    from specviz.core.tune.sweep import SweepRun
    from specviz.core.tune.table import sweep_table

    session = load(trace)
    counted = by_depth(session.rounds)
    expected = pytest.approx(counted)
    assert len(counted) > 1 and None not in counted
    report = inspect_json(trace, capsys)
    assert report["acceptance_by_position"] == expected
    assert report["metrics"]["acceptance_by_position"] == expected
    assert fold(session).acceptance_by_position == expected
    assert list(figures(session.rounds, window=len(session.rounds)).acceptance_by_position) == (
        expected
    )
    [row] = sweep_table([SweepRun(0, "test", TREE.k, tuple(session.rounds))]).rows
    assert row.metrics["acceptance_by_position"] == expected
    window = replay_window(qtbot, session)
    try:
        assert window.controller.stats.acceptance_by_position == expected
        depth = window.tree.depth
        depth.redraw()
        assert depth.counts.by_position == expected
        assert list(depth.bars.opts["height"]) == expected
    finally:
        window.close_now()
