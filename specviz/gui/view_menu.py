"""The View and Help menus: the output alone (no struck-through drafts), text size, a dark
palette; the keyboard shortcuts (F1), the documentation and About. GUI thread only."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QUrl
from PySide6.QtGui import QAction, QColor, QDesktopServices, QFont, QKeySequence, QPalette
from PySide6.QtWidgets import QApplication, QMainWindow, QStyleFactory

import specviz
from specviz.gui import dialogs

CHECKOUT = Path(specviz.__file__).resolve().parents[1]  # README.md and docs/ live here

TEXT_STEPS = (0.8, 0.9, 1.0, 1.15, 1.3, 1.5, 1.75, 2.0)  # the font scales, Ctrl +/- moves


class ViewMenu:
    """Builds the menus on `window` (a MainWindow) and carries out their choices."""

    def __init__(self, window: QMainWindow):
        self.window = window
        app = QApplication.instance()
        self._base_font = QFont(app.font()) if app is not None else QFont()
        self._base_palette = QPalette(app.palette()) if app is not None else QPalette()
        self._base_style = app.style().name() if app is not None else ""
        self.scale = TEXT_STEPS.index(1.0)
        self.dark = False
        bar = window.menuBar()
        view = bar.addMenu("&View")
        self.output_only = self._action(
            "Output only", "Ctrl+T", "The text the session emitted, without the drafts"
        )
        self.output_only.setCheckable(True)
        self.output_only.toggled.connect(window.show_output_only)
        window.stream.output_only_requested.connect(self.output_only.setChecked)
        view.addAction(self.output_only)
        view.addSeparator()
        for text, keys, step in (
            ("Larger text", QKeySequence.StandardKey.ZoomIn, 1),
            ("Smaller text", QKeySequence.StandardKey.ZoomOut, -1),
            ("Normal text size", "Ctrl+0", 0),
        ):
            action = self._action(text, keys, "The window's text size")
            action.triggered.connect(lambda _=False, s=step: self.text_size(s))
            view.addAction(action)
        view.addSeparator()
        self.dark_action = self._action("Dark palette", None, "Light text on dark panels")
        self.dark_action.setCheckable(True)
        self.dark_action.toggled.connect(self.set_dark)
        view.addAction(self.dark_action)
        help_menu = bar.addMenu("&Help")
        self.shortcuts = self._action("Keyboard shortcuts", "F1", "Every key the window takes")
        self.shortcuts.triggered.connect(self.show_shortcuts)
        help_menu.addAction(self.shortcuts)
        self.docs = self._action("Documentation (README)", None, "Open README.md; docs/ has more")
        self.docs.triggered.connect(self.open_docs)
        help_menu.addAction(self.docs)
        self.about = self._action("About specviz", None, "The version and where the docs are")
        self.about.triggered.connect(self.show_about)
        help_menu.addAction(self.about)

    def _action(self, text: str, keys, tip: str) -> QAction:
        action = QAction(text, self.window)
        if keys is not None:
            action.setShortcut(QKeySequence(keys))
        action.setStatusTip(tip)
        return action

    def text_size(self, step: int) -> None:
        """One size larger (+1) or smaller (-1), or back to normal (0)."""
        normal = TEXT_STEPS.index(1.0)
        self.scale = normal if step == 0 else min(max(self.scale + step, 0), len(TEXT_STEPS) - 1)
        factor = TEXT_STEPS[self.scale]
        font = QFont(self._base_font)
        if font.pointSizeF() > 0:
            font.setPointSizeF(self._base_font.pointSizeF() * factor)
        else:
            font.setPixelSize(max(6, round(self._base_font.pixelSize() * factor)))
        QApplication.setFont(font)
        self.window.stream.view.set_scale(factor)
        self.window.statusBar().showMessage(f"Text at {factor:.0%}", 2000)

    def set_dark(self, dark: bool) -> None:
        """A dark palette (Fusion): panels dark, text light; the fates keep their own
        colours, each token on its own light background, so they stay told apart."""
        self.dark = dark
        app = QApplication.instance()
        if not dark:
            app.setStyle(QStyleFactory.create(self._base_style) or app.style())
            app.setPalette(self._base_palette)
            return
        app.setStyle(QStyleFactory.create("Fusion"))
        app.setPalette(dark_palette())

    def shortcut_lines(self) -> list[str]:
        """'KEYS  what they do' for every action of the window that has keys."""
        lines = set()
        for action in self.window.findChildren(QAction):
            keys = " or ".join(k.toString() for k in action.shortcuts())
            text = action.text().replace("&", "").replace("\u2026", "")
            if keys and text:
                lines.add(f"{keys:<20} {text}")
        return sorted(lines)

    def show_shortcuts(self) -> None:
        notes = (
            "Letter keys (Space, R) work where no text field has the focus; the F-keys work "
            "everywhere. The mouse wheel scrolls a panel; Ctrl + wheel zooms a plot."
        )
        text = "\n".join(self.shortcut_lines()) + "\n\n" + notes
        dialogs.info(self.window, "Keyboard shortcuts", text)

    def show_about(self) -> None:
        dialogs.info(self.window, "About specviz", about_text())

    def open_docs(self) -> None:
        if not open_docs():
            self.show_about()  # no viewer (or no checkout): where the files are


def about_text(root: Path = CHECKOUT) -> str:
    """Help > About: the version and where the documentation is (plain text)."""
    readme, docs = root / "README.md", root / "docs"
    where = (
        f"README: {readme}\nThe docs: {docs} (usage.md first; design.md, trace-format.md, "
        "verification.md and the rest)"
        if readme.is_file() and docs.is_dir()
        else "The README and the docs/ folder come with specviz's source (not installed)."
    )
    return (
        f"specviz {specviz.__version__}: speculative decoding, round by round.\n\n{where}\n\n"
        "Help > Keyboard shortcuts (F1) lists every key; a token's tooltip gives its numbers."
    )


def open_docs(root: Path = CHECKOUT) -> bool:
    """Open README.md with the desktop's viewer; False where there is none."""
    readme = root / "README.md"
    return readme.is_file() and QDesktopServices.openUrl(QUrl.fromLocalFile(str(readme)))


def dark_palette() -> QPalette:
    p = QPalette()
    base, window, text = QColor("#1e1f22"), QColor("#2b2d30"), QColor("#e6e6e6")
    for role, colour in (
        (QPalette.ColorRole.Window, window),
        (QPalette.ColorRole.WindowText, text),
        (QPalette.ColorRole.Base, base),
        (QPalette.ColorRole.AlternateBase, window),
        (QPalette.ColorRole.Text, text),
        (QPalette.ColorRole.Button, window),
        (QPalette.ColorRole.ButtonText, text),
        (QPalette.ColorRole.ToolTipBase, window),
        (QPalette.ColorRole.ToolTipText, text),
        (QPalette.ColorRole.Highlight, QColor("#3d6fb4")),
        (QPalette.ColorRole.HighlightedText, QColor("#ffffff")),
        (QPalette.ColorRole.PlaceholderText, QColor("#9a9a9a")),
    ):
        p.setColor(role, colour)
    p.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Text, QColor("#777777"))
    p.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.ButtonText, QColor("#777777"))
    return p
