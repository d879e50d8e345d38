"""The distribution panel at 1280x720 (issue 48): a long explanation (a block round's nine or
ten lines) scrolls instead of squeezing the plots; the p/q bars, the accept test and the
residual keep at least MIN_PLOT pixels each, in chain, block, typical and tree rounds."""

from __future__ import annotations

import pytest

from specviz.core.metrics.position_bars import positions
from specviz.core.trace.records import Settings
from specviz.gui.distribution.summary_area import MIN_PLOT

QUIET = pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")
KINDS = {
    "chain": dict(k=4),
    "block": dict(k=4, verifier="block"),
    "typical": dict(k=4, verifier="typical"),
    "tree": dict(k=5, tree_width=2, tree_budget=63),
}


@pytest.fixture(scope="module")
def sessions(pair):
    """{kind: (header, rounds)} on the test pair."""
    from specviz.core.engine.speculative import SpeculativeEngine

    out = {}
    for kind, given in KINDS.items():
        engine = SpeculativeEngine(pair, Settings(temperature=1.0, seed=5, max_new_tokens=24,
                                                  **given))  # fmt: skip
        header = engine.prefill("And the earth was", calibrate=False)
        out[kind] = header, list(engine.run())
    return out


@QUIET
@pytest.mark.parametrize("kind", list(KINDS))
def test_no_plot_of_the_distribution_panel_is_squeezed_at_1280x720(qtbot, sessions, kind):
    from specviz.gui.main_window import MainWindow

    header, rounds = sessions[kind]
    window = MainWindow(None, autosave=False)
    qtbot.addWidget(window)
    window.resize(1280, 720)
    window.show()
    window.controller.engine.session_started.emit(header)  # as the worker says it
    window.controller.add_rounds(rounds)
    d = window.distribution
    for rnd in rounds[:4]:
        for position in range(positions(rnd)):
            window.select_position(rnd.index, position)
            qtbot.wait(1)
            heights = {
                "p/q bars": d.main.height(),
                "accept test": d.gauge.height(),
                "residual": d.residual_plot.height(),
            }
            assert min(heights.values()) >= MIN_PLOT, (kind, rnd.index, position, heights)
            corner = d.mapTo(window, d.rect().bottomRight())
            assert corner.y() <= window.height()
    window.close_now()
