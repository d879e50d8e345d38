"""The main window's files: export / open traces (and drag-and-drop), CSV and plot
exports, the autosave and its restore, and the losslessness lab. GUI thread only.

A mixin of MainWindow, kept apart so each module stays small.
"""

from __future__ import annotations

import gc
from pathlib import Path

from PySide6.QtCore import QEventLoop
from PySide6.QtWidgets import QApplication

from ..core import tracefile
from ..core.bars import position_bars
from ..core.trace import Round, SessionHeader, TraceError
from . import dialogs

TRACE_FILTER = "specviz traces (*.jsonl);;All files (*)"


def _local_trace(mime) -> str | None:
    """The first local .jsonl file among dropped URLs."""
    if not mime.hasUrls():
        return None
    for url in mime.urls():
        if url.isLocalFile() and url.toLocalFile().lower().endswith(".jsonl"):
            return url.toLocalFile()
    return None


def _problems(session) -> list[str]:
    """Contradictions in a loaded trace's numbers (core.validate), as messages."""
    from ..core.validate import check_session

    # The top-N lists are checked when a position's bars are first shown: checking all of
    # them here would parse four fifths of the file again (`specviz inspect` does).
    return [str(p) for p in check_session(session, limit=20, top_lists=False)]


class FilesMixin:
    """Needs from the window: session, replay_source, exported, show_replay, status."""

    def init_files(self, autosave: bool) -> None:
        self.autosaver = None
        self._lab = None
        self.last_folder = str(Path.cwd())
        if autosave:
            from ..core.autosave import Autosaver

            self.autosaver = Autosaver()

    # ------------------------------------------------------------------------------ trace

    def export_trace(self, path: str | Path) -> bool:
        """Write the session as a trace (atomically); False and a dialog on failure."""
        if self.session is None:
            dialogs.error(self, "Nothing to export", "Start a session or open a trace first.")
            return False
        try:
            tracefile.save(self.session, path)
        except (OSError, TraceError) as e:  # TraceError: a replayed round's line is not text
            dialogs.error(
                self, "Could not export the trace", f"{e}\n\nChoose another folder or file name."
            )
            return False
        self.exported = True
        self.last_folder = str(Path(path).parent)
        self.status.showMessage(f"Trace saved to {path}", 5000)
        return True

    def export_trace_dialog(self) -> None:
        start = str(Path(self.last_folder) / "session.jsonl")
        path = dialogs.save_path(self, "Export trace", start, TRACE_FILTER)
        if path:
            if not Path(path).suffix:
                path += ".jsonl"
            self.export_trace(path)

    def open_trace(self, path: str | Path) -> bool:
        """Replay a trace file: no models needed. False and a dialog if it cannot be read."""
        if not self._discard_ok("Opening a trace"):
            return False
        self.status.set_busy(f"reading {Path(path).name}")

        def progress(fraction: float) -> None:
            self.status.set_busy(f"reading {Path(path).name}: {fraction:.0%}")
            QApplication.processEvents(QEventLoop.ProcessEventsFlag.ExcludeUserInputEvents)

        try:
            session = tracefile.load(path, progress=progress)
            # A long trace is millions of records without reference cycles; frozen, the
            # cyclic collector never walks them again (a full pass over a 100k-round trace
            # stalls the window for one to two seconds).
            gc.freeze()
            self.status.set_busy(f"checking {len(session.rounds):,} rounds")
            QApplication.processEvents(QEventLoop.ProcessEventsFlag.ExcludeUserInputEvents)
            problems = _problems(session)
        except (TraceError, OSError, UnicodeDecodeError) as e:
            problems = [str(e)]
        finally:
            self.status.set_busy("")
        if problems:
            dialogs.error(
                self,
                "Could not open the trace",
                f"{Path(path).name}: {problems[0]}"
                + (f"\n(and {len(problems) - 1} more problems)" if len(problems) > 1 else "")
                + "\n\nThe file is not a valid specviz trace; `specviz inspect FILE` reports "
                "everything that is wrong with it.",
            )
            return False
        self.last_folder = str(Path(path).parent)
        self.show_replay(session)
        self.status.showMessage(f"Replaying {path}: Reset rewinds, Step / Run replay", 8000)
        if session.warnings:
            dialogs.info(self, "Trace opened with a warning", "\n".join(session.warnings))
        return True

    def open_trace_dialog(self) -> None:
        path = dialogs.open_path(self, "Open trace", self.last_folder, TRACE_FILTER)
        if path:
            self.open_trace(path)

    def dragEnterEvent(self, event) -> None:
        if _local_trace(event.mimeData()):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dropEvent(self, event) -> None:
        path = _local_trace(event.mimeData())
        if path:
            event.acceptProposedAction()
            self.open_trace(path)

    # ------------------------------------------------------------------------------ exports

    def export_csv(self, path: str | Path) -> bool:
        from ..core.csvexport import write_stats_csv

        if self.session is None or not self.session.rounds:
            dialogs.error(self, "Nothing to export", "The session has no rounds yet.")
            return False
        try:
            write_stats_csv(self.session, path)
        except OSError as e:
            dialogs.error(self, "Could not export the statistics", str(e))
            return False
        self.status.showMessage(f"Statistics saved to {path}", 5000)
        return True

    def export_csv_dialog(self) -> None:
        start = str(Path(self.last_folder) / "rounds.csv")
        path = dialogs.save_path(self, "Export statistics", start, "CSV (*.csv)")
        if path:
            self.export_csv(path if Path(path).suffix else path + ".csv")

    def export_plot(self, name: str, path: str | Path) -> bool:
        try:
            self.plots.export(name, path)
        except (OSError, ValueError) as e:
            dialogs.error(self, "Could not export the plot", str(e))
            return False
        self.status.showMessage(f"Plot saved to {path}", 5000)
        return True

    def export_plot_dialog(self, name: str, suffix: str) -> None:
        start = str(Path(self.last_folder) / f"{name}.{suffix}")
        path = dialogs.save_path(self, "Export plot", start, f"{suffix.upper()} (*.{suffix})")
        if path:
            self.export_plot(name, path if Path(path).suffix else f"{path}.{suffix}")

    # ------------------------------------------------------------------------------ autosave

    def offer_restore(self) -> bool:
        """At launch: offer the session an earlier run left in the autosave; True if shown."""
        if self.autosaver is None:
            return False
        from ..core.autosave import Autosaver

        found = Autosaver.find_restorable(self.autosaver.folder)
        if found is None:
            return False
        if not dialogs.ask(
            self,
            "Restore the last session?",
            "specviz did not close cleanly last time. Restore the session it was running? "
            "It opens as a replay, ready to export.",
        ):
            self.autosaver.discard(found)
            return False
        try:
            session = self.autosaver.adopt(found)  # its file is this window's from now on
        except (TraceError, OSError) as e:
            dialogs.error(self, "Could not restore the session", str(e))
            return False
        self.show_replay(session)
        self.exported = False  # it only lives in the cache until exported
        return True

    def _autosave(self, call, *args) -> None:
        if self.autosaver is None:
            return
        try:
            call(*args)
        except OSError as e:
            self.autosaver = None
            self.status.showMessage(f"Autosave is off: {e}", 10000)

    def autosave_start(self, header: SessionHeader) -> None:
        if self.autosaver is not None:
            self._autosave(self.autosaver.start, header)

    def autosave_round(self, rnd: Round) -> None:
        if self.autosaver is not None:
            self._autosave(self.autosaver.add, rnd)

    def autosave_close(self, clean: bool = True) -> None:
        if self.autosaver is not None and clean:
            self._autosave(self.autosaver.finish)

    # ------------------------------------------------------------------------------ lab

    def open_lab(self) -> None:
        from .lab_window import LabWindow

        if self._lab is None:
            self._lab = LabWindow()
            self._lab.request_position.connect(self._lab_wants_position)
            self.engine.position_ready.connect(self._on_position_ready)
        self._lab.show()
        self._lab.raise_()

    def close_lab(self) -> None:
        if self._lab is not None:
            self._lab.close()
            self._lab = None

    def _lab_wants_position(self) -> None:
        """The lab asks for the selected position: full distributions from the models, or
        the stored top-N in a replay."""
        selected = self.distribution.selected
        if self.session is None or selected is None:
            self._lab.statusBar().showMessage("select a token in the main window first", 6000)
            return
        round_index, position = selected
        rnd = self.session.rounds[round_index]
        title = f"round {round_index + 1}, position {position + 1} of the main window"
        if self.live and self.models is not None:
            settings = rnd.settings or self.session.header.settings
            self._lab_title = title
            self.engine.request_position.emit(
                self.session.context_ids(round_index, position), settings
            )
            return
        try:
            bars = position_bars(self.session.details(round_index), position)
        except TraceError as e:  # a trace's top-N lists are parsed when first shown
            self._lab.statusBar().showMessage(f"this position's stored lists: {e}", 6000)
            return
        if any(v is None for v in bars.p) or any(v is None for v in bars.q):
            self._lab.statusBar().showMessage(
                "this position stores only one of p and q: pick a judged token", 6000
            )
            return
        self._lab.set_distributions(
            list(bars.p), list(bars.q), list(bars.labels), f"{title} (stored top-N)"
        )

    def _on_position_ready(self, result) -> None:
        if self._lab is not None:
            self._lab.set_position(result, getattr(self, "_lab_title", None))
