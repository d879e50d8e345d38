"""Small pyqtgraph helpers shared by the window's plots and the distribution panel: growing
series, fixed-width and cached axes, tick labels cut to fit, axis ranges that move in steps,
pyqtgraph's SVG export made to read Qt 6's paths, a whole panel to PNG or SVG. GUI thread
only."""

from __future__ import annotations

import math
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from pyqtgraph import exporters
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QFontMetrics, QPainter
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import QApplication, QGraphicsItem, QWidget


@contextmanager
def svg_closed_paths():
    """pyqtgraph 0.14's SVG exporter cannot read the "Z" (close path) that Qt 6.12 writes
    (pyqtgraph issue #3485): take it out around its coordinate fix-up and put it back."""
    module = sys.modules[exporters.SVGExporter.__module__]
    correct = module.correctCoordinates

    def tolerant(node, defs, item, options):
        closed = []
        for path in node.getElementsByTagName("path"):
            tokens = path.getAttribute("d").split()
            if any(t in ("Z", "z") for t in tokens):
                path.setAttribute("d", " ".join(t for t in tokens if t not in ("Z", "z")))
                closed.append(path)
        correct(node, defs, item, options)
        for path in closed:
            path.setAttribute("d", path.getAttribute("d").strip() + " Z")

    module.correctCoordinates = tolerant
    try:
        yield
    finally:
        module.correctCoordinates = correct


class Series:
    """A growing (x, y) series in numpy arrays with doubling capacity: O(1) amortised."""

    def __init__(self, capacity: int = 256):
        self._x = np.empty(capacity)
        self._y = np.empty(capacity)
        self.n = 0
        self.low: float | None = None  # the smallest and largest finite y so far
        self.high: float | None = None

    def append(self, x: float, y: float | None) -> None:
        if self.n == len(self._x):
            self._x = np.concatenate([self._x, np.empty(len(self._x))])
            self._y = np.concatenate([self._y, np.empty(len(self._y))])
        self._x[self.n] = x
        self._y[self.n] = np.nan if y is None else y
        self.n += 1
        if y is not None and math.isfinite(y):
            self.low = y if self.low is None else min(self.low, y)
            self.high = y if self.high is None else max(self.high, y)

    def clear(self) -> None:
        self.n = 0
        self.low = self.high = None

    @property
    def x(self) -> np.ndarray:
        return self._x[: self.n]

    @property
    def y(self) -> np.ndarray:
        return self._y[: self.n]


def _tick_text(axis: pg.AxisItem) -> tuple[QFontMetrics, int]:
    """The metrics of an axis's tick labels, and the pixels between its edge and them."""
    metrics = QFontMetrics(axis.style["tickFont"] or QApplication.font())
    return metrics, axis.style["tickTextOffset"][0] + max(axis.style["tickLength"], 0)


def fix_axis_width(axis: pg.AxisItem, widest: str) -> None:
    """Reserve room for tick labels as wide as `widest`, once. An axis that fits itself to
    its labels relays out its whole scene whenever they change (new ranges, other tokens),
    and the bars jump sideways; a fixed width makes a Step's redraw 1.03-1.12x faster
    (benchmarks/gui_axes.py). Plots that share a width also line up."""
    metrics, offset = _tick_text(axis)
    axis.setWidth(metrics.horizontalAdvance(widest) + offset + 4)


def fit_tick_labels(axis: pg.AxisItem, labels: list[str]) -> list[str]:
    """Labels cut at the end to the room of a fixed-width axis: pyqtgraph hides a label
    wider than its axis."""
    metrics, offset = _tick_text(axis)
    room = int((axis.fixedWidth or axis.width()) - offset)
    return [metrics.elidedText(text, Qt.TextElideMode.ElideRight, room) for text in labels]


def cache_axes(plot: pg.PlotItem) -> None:
    """Keep each axis as a pixmap, drawn again only when it changes: text in software
    rendering is most of a plot's paint, and a refresh often leaves the axes as they were
    (1.13-1.14x on a Step's redraw, benchmarks/gui_axes.py). The PNG and SVG exports draw
    the items afresh at their own resolution."""
    for side in ("left", "bottom"):
        plot.getAxis(side).setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)


def one_point_per_pixel(curve: pg.PlotDataItem) -> None:
    """Auto-downsample a long series to about a point per pixel (pyqtgraph's default is
    five): a Step's redraw at round 1,500 paints a third fewer segments, 1.16x faster
    (benchmarks/gui_axes.py), and a curve of peaks per pixel looks the same."""
    curve.opts["autoDownsampleFactor"] = 1.0


FINE = (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8)  # round numbers per decade
COARSE = (1, 2, 5)


def nice_ceiling(value: float, ladder: tuple[float, ...] = FINE) -> float:
    """The smallest of ladder x 10^n at or above value (> 0)."""
    if value <= 0 or not math.isfinite(value):
        return 1.0
    scale = 10.0 ** math.floor(math.log10(value))
    for step in (*ladder, 10):
        nice = float(f"{step * scale:.6g}")  # 0.3, not 0.30000000000000004
        if nice >= value * (1 - 1e-12):
            return nice
    return float(f"{10 * scale:.6g}")


class StickyRange:
    """An axis range that follows the data in steps: it grows to a round number with room
    above the highest value, and shrinks only when the data would fill less than a third
    of it. Between steps the axis (a cached pixmap, `cache_axes`) is not drawn again and
    the view box need not fit itself to the data before each paint (pyqtgraph's
    auto-range does that in the paint, and the changed axis then asks for a second paint)."""

    def __init__(self, low=0.0, high=1.0, headroom: float = 1.15, ladder=FINE):
        self.low, self.high, self.headroom, self.ladder = low, high, headroom, ladder
        self._floor = (low, high)

    def reset(self) -> None:
        self.low, self.high = self._floor

    def fit(self, low: float | None, high: float | None) -> bool:
        """Take in the data's extent (None: no data); True when the range changed."""
        floor_low, floor_high = self._floor
        if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
            low, high = floor_low, floor_high
        new_low = (
            floor_low if low >= floor_low else -nice_ceiling(-low * self.headroom, self.ladder)
        )
        top = max(high, floor_high)
        if top <= self.high and top >= self.high / 3 and new_low == self.low:
            return False
        new_high = max(nice_ceiling(top * self.headroom, self.ladder), floor_high)
        changed = (new_low, new_high) != (self.low, self.high)
        self.low, self.high = new_low, new_high
        return changed


def export_widget(widget: QWidget, path: str | Path, title: str) -> None:
    """Write a widget as drawn (a panel of plots and text) to PNG or SVG; OSError if the
    file was not written, ValueError for another suffix."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".png":
        if not widget.grab().toImage().save(str(path)):
            raise OSError(f"could not write {path}")
        return
    if suffix != ".svg":
        raise ValueError(f"unknown format '{path.suffix}': use .png or .svg")
    generator = QSvgGenerator()
    generator.setFileName(str(path))
    generator.setSize(widget.size())
    generator.setViewBox(widget.rect())
    generator.setTitle(title)
    painter = QPainter(generator)
    try:
        widget.render(painter, QPoint())
    finally:
        painter.end()
    if not path.exists():
        raise OSError(f"could not write {path}")
