"""The tree view of a tree round (settings.tree_width > 1): its layout never overlaps two
nodes, every node in its fate's colours and the accepted path bold, plain-text hover and
explanation, a click on the chain view's nodes selects their position in the window, the
per-depth plot's numbers, and a chain session's window without any of it."""

from __future__ import annotations

import os
import random

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402
from PySide6.QtCore import QEvent, Qt  # noqa: E402
from PySide6.QtGui import QColor, QHelpEvent  # noqa: E402

from specviz.core.metrics.positions import depth_counts  # noqa: E402
from specviz.core.trace.records import Round, Settings, TokenEvent  # noqa: E402
from specviz.core.trace.rounds import with_extras  # noqa: E402
from specviz.gui import palette  # noqa: E402
from specviz.gui.stream.figures import fmt  # noqa: E402
from specviz.gui.tree import view as tree_view  # noqa: E402
from specviz.gui.tree.layout import ROOT, layout  # noqa: E402
from specviz.gui.tree.model import round_tree  # noqa: E402
from specviz.gui.tree.text import tooltip  # noqa: E402
from specviz.gui.tree.view import EDGE_WIDTH, PATH_WIDTH, TreeView  # noqa: E402

QUIET = pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")
SETTINGS = dict(k=5, temperature=1.0, seed=5, max_new_tokens=40, tree_width=2, tree_budget=63)


@pytest.fixture(scope="module")
def tree_session(pair):
    """(header, rounds) of one tree session on the test pair: 62-node trees."""
    from specviz.core.engine.speculative import SpeculativeEngine

    engine = SpeculativeEngine(pair, Settings(**SETTINGS))
    header = engine.prefill("And the earth was", calibrate=False)
    return header, list(engine.run())


@pytest.fixture(scope="module")
def chain_session(pair):
    from specviz.core.engine.speculative import SpeculativeEngine

    engine = SpeculativeEngine(pair, Settings(k=4, temperature=1.0, seed=5, max_new_tokens=12))
    header = engine.prefill("And the earth was", calibrate=False)
    return header, list(engine.run())


def synthetic_round(parents: list[int], rng: random.Random, texts=None) -> Round:
    """A tree round with these parents, its fates from a walk of random verdicts."""
    n = len(parents)
    kids: dict[int, list[int]] = {}
    for i, parent in enumerate(parents):
        kids.setdefault(parent, []).append(i)
    fates, p_tried, accept, u = ["discarded"] * n, [None] * n, [None] * n, [None] * n
    node, path, last = ROOT, [], None
    while kids.get(node):
        entered = None
        for child in kids[node]:
            a, draw = rng.random(), rng.random()
            p_tried[child], accept[child], u[child] = a, a, draw
            if draw < a:
                entered = child
                break
            fates[child], last = "rejected", child
        if entered is None:
            break
        fates[entered], node, last = "accepted", entered, None
        path.append(entered)
    texts = texts or [f"t{i}" for i in range(n)]
    tokens = [TokenEvent(i, texts[i], "accepted", p=0.5, q=0.5) for i in path]
    if last is not None:
        tokens.append(TokenEvent(last, texts[last], "rejected", p=0.1, q=0.5))
    tokens.append(TokenEvent(999, "end", "resampled" if last is not None else "bonus", p=0.3))
    tree = {
        "rule": "sample", "parent": parents, "token": list(range(n)), "text": texts,
        "fate": fates, "q": [0.5] * n, "p": [0.4] * n, "p_tried": p_tried,
        "accept_prob": accept, "u": u,
    }  # fmt: skip
    return with_extras(Round("s", 0, 5, 1.0, 1.0, n, len(path), tuple(tokens)), tree=tree)


def random_parents(rng: random.Random, n: int) -> list[int]:
    return [rng.randrange(-1, i) for i in range(n)]


def test_the_layout_never_overlaps_two_nodes(qtbot):
    rng = random.Random(1)
    view = TreeView()
    qtbot.addWidget(view)
    for trial in range(150):
        parents = random_parents(rng, rng.randint(1, 64))
        places = layout(parents)
        assert set(places) == {ROOT, *range(len(parents))}
        by_depth: dict[int, list[float]] = {}
        for node, (depth, row) in places.items():
            by_depth.setdefault(depth, []).append(row)
            if node != ROOT:
                assert depth == places[parents[node]][0] + 1
        for rows in by_depth.values():
            rows.sort()
            assert all(b - a >= 1 for a, b in zip(rows, rows[1:], strict=False))
        if trial % 5:
            continue
        tree = round_tree(synthetic_round(parents, rng))
        view.draw(tree)
        rects = [view.box(key).sceneBoundingRect() for key in tree.nodes]
        for i, a in enumerate(rects):
            for b in rects[i + 1 :]:
                assert not a.intersects(b), (parents, a, b)
        for key in tree.nodes:  # every label inside its box
            assert view.box(key).sceneBoundingRect().contains(view.label(key).sceneBoundingRect())


def _colour(brush) -> str:
    return brush.color().name()


def test_every_node_in_its_fates_colours_and_the_path_bold(qtbot, tree_session):
    _, rounds = tree_session
    view = TreeView()
    qtbot.addWidget(view)
    endings = set()
    for rnd in rounds:
        tree = round_tree(rnd)
        view.draw(tree)
        assert tree.final is not None
        endings.add(tree.nodes[tree.final].fate)
        bold = {*tree.path, tree.final}
        for key, node in tree.nodes.items():
            box, label = view.box(key), view.label(key)
            if key == ROOT:
                assert _colour(box.brush()) == QColor(palette.PROMPT_BACKGROUND).name()
                continue
            fate = palette.fate(node.fate)
            assert node.fate == (rnd.tree.fate[key] if key < tree.n else rnd.tokens[-1].status)
            assert _colour(box.brush()) == QColor(fate.background).name()
            assert _colour(label.brush()) == QColor(fate.foreground).name()
            assert label.font().strikeOut() == fate.struck
            width = view.edge(key).pen().widthF()
            assert width == (PATH_WIDTH if key in bold else EDGE_WIDTH), (key, node.fate)
        # the round's own token follows the last accepted node (or the context)
        assert tree.nodes[tree.final].parent == (tree.path[-1] if tree.path else ROOT)
        own = view.box(tree.final).sceneBoundingRect()
        parent = view.box(tree.nodes[tree.final].parent).sceneBoundingRect()
        assert own.left() > parent.right()
    assert endings == {"resampled", "bonus"}  # both kinds were drawn


@QUIET
def test_hover_and_explanation_are_plain_text(qtbot, monkeypatch, tree_session):
    texts = ["<b>x\x1by", "a", "<img src=x>", "b"]
    rnd = synthetic_round([-1, -1, 0, 0], random.Random(3), texts)
    tree = round_tree(rnd)
    view = TreeView()
    qtbot.addWidget(view)
    view.resize(400, 300)
    view.show()
    view.draw(tree)
    shown = []
    monkeypatch.setattr(tree_view, "show_plain", lambda pos, text, widget: shown.append(text))
    for key in (0, 2):
        centre = view.mapFromScene(view.box(key).sceneBoundingRect().center())
        event = QHelpEvent(QEvent.Type.ToolTip, centre, view.viewport().mapToGlobal(centre))
        view.viewportEvent(event)
        assert shown[-1] == view.tooltip_at(key)
    first, third = shown
    assert "'<b>x\\x1by'" in first and "\x1b" not in first  # literal tags, escaped control
    assert rnd.tree.fate[0] in first and "p (target" in first and "q (draft)" in first
    assert "'<img src=x>'" in third
    assert view.label(0).text() == "<b>x\\\u2026"  # the box's text, escaped and cut
    from specviz.gui.tooltips import plain_html

    assert "&lt;b&gt;" in plain_html(first) and "<b>x" not in plain_html(first)
    from specviz.gui.tree.panel import TreePanel

    panel = TreePanel()
    qtbot.addWidget(panel)
    panel.show()
    panel.show_tree(tree, 0)
    assert "'<b>x\\x1by'" in panel.explanation.toPlainText()
    for rnd in tree_session[1][:3]:  # a tried node's test, a rejected one's update
        tree = round_tree(rnd)
        for key, node in tree.nodes.items():
            text = tooltip(tree, key)
            if node.fate in ("accepted", "rejected"):
                assert f"p_tried = {fmt(rnd.tree.p_tried[key])}" in text
                assert f"u {fmt(rnd.tree.u[key])} " in text
                assert f"min(1, p/q) {fmt(rnd.tree.accept_prob[key])}" in text
                assert "min(1, p/q)" in text and "p (target, where it was drawn) = " in text
            if node.fate == "rejected":
                assert "then its parent's p was updated to norm(max(0, p - q))" in text
            if node.fate == "discarded":
                assert "never tried: discarded" in text


def tree_window(qtbot, header, rounds):
    from specviz.gui.main_window import MainWindow

    window = MainWindow(None, autosave=False)
    qtbot.addWidget(window)
    window.resize(1280, 720)
    window.show()
    window.controller.engine.session_started.emit(header)  # as the worker says it
    window.controller.add_rounds(rounds)
    return window


def _click(qtbot, view, key):
    view.ensureVisible(view.box(key).sceneBoundingRect())
    centre = view.mapFromScene(view.box(key).sceneBoundingRect().center())
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=centre)


@QUIET
def test_a_click_on_a_node_selects_its_position_or_explains_it(qtbot, tree_session):
    header, rounds = tree_session
    window = tree_window(qtbot, header, rounds)
    try:
        presenter = window.tree
        assert presenter.tabs.currentWidget() is presenter.panel
        view = presenter.panel.view
        i, rnd = next((i, r) for i, r in enumerate(rounds)
                      if r.n_accepted >= 2 and r.tokens[-1].status == "resampled")  # fmt: skip
        window.select_round(i)
        tree = view.tree
        assert tree.rnd is window.session.rounds[i]
        for depth, key in enumerate(tree.path):  # a path node: its position everywhere
            _click(qtbot, view, key)
            assert window.distribution.selected == (i, depth)
            assert window.stream.view.selected == (i, depth)
            assert view.selected == key
        rejected = next(k for k, index in tree.chain.items() if rnd.tokens[index].status
                        == "rejected")  # fmt: skip
        for key in (rejected, tree.final):  # where the round ended: position n_accepted
            _click(qtbot, view, key)
            assert window.distribution.selected == (i, rnd.n_accepted) and view.selected == key
        discarded = next(k for k, f in enumerate(rnd.tree.fate) if f == "discarded")
        _click(qtbot, view, discarded)
        assert window.distribution.selected == (i, rnd.n_accepted)  # unchanged
        assert view.selected == discarded
        text = presenter.panel.explanation.toPlainText()
        assert "never tried: discarded" in text and text.startswith(f"Round {i + 1}:")
        off = next(k for k, f in enumerate(rnd.tree.fate)
                   if f == "rejected" and k not in tree.chain)  # fmt: skip
        _click(qtbot, view, off)
        text = presenter.panel.explanation.toPlainText()
        order = tree.nodes[off].order
        assert f"tried {'1st' if order == 1 else '2nd'} at its parent: u " in text
        assert ": rejected; its parent's p was updated to norm(max(0, p - q))" in text
        # a click in the stream selects that position's node in the tree
        window.stream.view.click(i, 0)
        assert view.selected == tree.path[0]
    finally:
        window.close_now()


@QUIET
def test_the_per_depth_plot_counts_the_tree_records(qtbot, tree_session):
    header, rounds = tree_session
    counts = depth_counts(rounds)
    fates = [f for r in rounds for f in r.tree.fate]
    assert sum(counts.tried) == sum(f != "discarded" for f in fates)
    assert sum(counts.accepted) == fates.count("accepted") == sum(r.n_accepted for r in rounds)
    for d in range(1, len(counts.accepted) + 1):  # one accepted node per depth reached
        assert counts.accepted[d - 1] == sum(r.n_accepted >= d for r in rounds)
    assert counts.tokens_per_pass == sum(r.n_emitted for r in rounds) / len(rounds)
    window = tree_window(qtbot, header, rounds)
    try:
        plot = window.tree.depth
        assert plot.shown and plot.panel.scene() is window.plots.graphics.scene()
        heights = list(plot.bars.opts["height"])
        assert heights == pytest.approx([r or 0.0 for r in counts.by_position])
        assert f"{counts.tokens_per_pass:.2f} tokens/pass" in plot.plot.titleLabel.text
        assert plot.describe(1).startswith(f"depth 1: {counts.by_position[0]:.3f} accepted")
    finally:
        window.close_now()


@QUIET
def test_a_chain_session_shows_no_tree(qtbot, tree_session, chain_session):
    window = tree_window(qtbot, *chain_session)
    try:
        assert window.main_splitter.widget(1) is window.plots
        assert window.tree.tabs is None and not window.tree.depth.shown
        assert window.tree.panel.view.tree is None
        window.controller.new_session()
        window.controller.engine.session_started.emit(tree_session[0])
        window.controller.add_rounds(tree_session[1])
        assert window.main_splitter.widget(1) is window.tree.tabs and window.tree.depth.shown
        window.controller.new_session()
        window.controller.engine.session_started.emit(chain_session[0])
        window.controller.add_rounds(chain_session[1])
        assert window.main_splitter.widget(1) is window.plots and window.plots.isVisible()
        assert not window.tree.depth.shown
    finally:
        window.close_now()


@QUIET
def test_a_live_window_steps_a_tree_session(qtbot, pair, pair_dirs, monkeypatch, tmp_path):
    """The Setup panel keeps the command line's tree settings: Step drafts a tree."""
    from specviz.gui.main_window import MainWindow
    from specviz.gui.session.loaded import Loaded

    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path / "cache"))
    window = MainWindow(None, autosave=False)
    qtbot.addWidget(window)
    window.show()
    try:
        target, draft = (str(d) for d in pair_dirs)
        window.controller.engine.link.pair = pair  # the worker thread is idle
        window.controller.engine.loaded.emit(
            Loaded(target, draft, pair.target_info, pair.draft_info, str(pair.device),
                   pair.vocab_size)
        )  # fmt: skip
        window.controls.set_settings(Settings(**SETTINGS))  # as app.main sets them
        assert window.controls.settings() == Settings(**SETTINGS)
        window.actions_.step.trigger()
        qtbot.waitUntil(lambda: window.session is not None and bool(window.session.rounds),
                        timeout=60_000)  # fmt: skip
        rnd = window.session.rounds[0]
        assert rnd.settings.tree and rnd.tree is not None
        assert window.tree.active and window.tree.panel.view.tree.rnd is rnd
        assert window.tree.panel.view.box(0).isVisible()
    finally:
        window.close_now()


@QUIET
def test_a_tree_fits_its_view_legibly_and_a_small_one_fills_it(qtbot):
    """Issue 37: a 62-node tree (width 2, budget 63) is scaled to its view with its labels
    never under 9 px (then it pans); an 8-node tree grows to fill its view rather than sit
    in a corner; F goes back to the fit."""
    from PySide6.QtGui import QFontInfo

    view = TreeView()
    qtbot.addWidget(view)
    view.resize(360, 460)  # about the Tree tab at 1280 x 720
    view.show()
    full = [-1, -1] + [i // 2 for i in range(60)]  # a full binary tree: 62 nodes, 5 levels
    view.draw(round_tree(synthetic_round(full, random.Random(3))))
    px = QFontInfo(view.label(0).font()).pixelSize()
    assert view.scale_now * px >= 9 - 1e-9
    scene = view.sceneRect()
    shown = view.mapToScene(view.viewport().rect()).boundingRect()
    assert shown.height() >= scene.height() - 1  # its 32 leaves' column: all in view
    assert view.scale_now < 1  # shrunk to fit, down to the legible floor
    small = [-1, 0, 0, 1, 1, 2, 3, 4]  # 8 nodes
    view.draw(round_tree(synthetic_round(small, random.Random(2))))
    assert view.scale_now > 1  # grown towards the view, not left tiny
    drawn = view.mapFromScene(view.sceneRect()).boundingRect()
    room = view.viewport().rect()
    assert drawn.width() <= room.width() + 1 and drawn.height() <= room.height() + 1
    assert drawn.width() >= 0.95 * room.width() or drawn.height() >= 0.95 * room.height()
    view.set_zoom(1.5)
    assert view.scale_now == pytest.approx(view._fit * 1.5)
    qtbot.keyClick(view, Qt.Key.Key_F)
    assert view.zoom == 1.0


@QUIET
def test_the_explanation_shows_whole(qtbot):
    """Issue 37: the Tree tab's explanation grows to its text rather than cut it mid-line."""
    from specviz.gui.tree.panel import TreePanel

    panel = TreePanel()
    qtbot.addWidget(panel)
    panel.resize(370, 520)
    panel.show()
    rng = random.Random(3)
    parents = [-1, -1] + [i // 2 for i in range(60)]
    tree = round_tree(synthetic_round(parents, rng))
    panel.show_tree(tree, 5)
    qtbot.wait(20)
    bar = panel.explanation.verticalScrollBar()
    assert bar.maximum() == 0, panel.explanation.toPlainText()


def test_a_tree_round_says_what_it_drafted_not_drafted_k():
    """Issue 37: a tree round's stop reason names its nodes and levels ("drafted K" said
    nothing of a 3-level tree)."""
    import dataclasses

    from specviz.gui.stream.token_view import k_text

    parents = [-1, -1, 0, 0, 1, 2]  # levels 1, 1, 2, 2, 2, 3
    rnd = dataclasses.replace(synthetic_round(parents, random.Random(1)), stop="k", k=5)
    text = k_text(rnd)
    assert "drafted a tree of 6 nodes, 3 levels" in text and "drafted K" not in text
