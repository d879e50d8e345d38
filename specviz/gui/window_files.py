"""The window's files: export / open traces (and drag-and-drop), CSV and plot exports,
and the autosave's restore offer. GUI thread only.

Files asks the user (dialogs) and hands what it read to the SessionController, which owns
the session; it keeps no session state of its own besides the last folder used.
"""

from __future__ import annotations

import gc
from pathlib import Path

from PySide6.QtCore import QEventLoop
from PySide6.QtWidgets import QApplication, QWidget

from specviz.core.metrics.running import summary
from specviz.core.trace import files as tracefile
from specviz.core.trace.records import TraceError
from specviz.gui import dialogs
from specviz.gui.session.controller import SessionController

TRACE_FILTER = "specviz traces (*.jsonl);;All files (*)"


def local_trace(mime) -> str | None:
    """The first local .jsonl file among dropped URLs."""
    if not mime.hasUrls():
        return None
    for url in mime.urls():
        if url.isLocalFile() and url.toLocalFile().lower().endswith(".jsonl"):
            return url.toLocalFile()
    return None


def _problems(session) -> list[str]:
    """Contradictions in a loaded trace's numbers (core.trace.check_session), as messages."""
    from specviz.core.trace.check_session import check_session

    # The top-N lists are checked when a position's bars are first shown: checking all of
    # them here would parse four fifths of the file again (`specviz inspect` does).
    return [str(p) for p in check_session(session, limit=20, top_lists=False)]


class Files:
    """The file actions of a window. `parent`: the dialogs' parent; `status`: the status
    bar (messages, progress); `exporters`: plot or panel name -> the view whose
    export(name, path) writes it as PNG or SVG."""

    def __init__(self, parent: QWidget, controller: SessionController, status, exporters):
        self.parent = parent
        self.controller = controller
        self.status = status
        self.exporters = exporters
        self.last_folder = str(Path.cwd())

    # ------------------------------------------------------------------------------ trace

    def export_trace(self, path: str | Path) -> bool:
        """Write the session as a trace (atomically); False and a dialog on failure."""
        session = self.controller.session
        if session is None:
            dialogs.error(
                self.parent, "Nothing to export", "Start a session or open a trace first."
            )
            return False
        try:
            tracefile.save(session, path, summary(session))
        except (OSError, TraceError) as e:  # TraceError: a replayed round's line is not text
            dialogs.error(
                self.parent,
                "Could not export the trace",
                f"{e}\n\nChoose another folder or file name.",
            )
            return False
        self.controller.exported_to()
        self.last_folder = str(Path(path).parent)
        self.status.showMessage(f"Trace saved to {path}", 5000)
        return True

    def export_trace_dialog(self) -> None:
        start = str(Path(self.last_folder) / "session.jsonl")
        path = dialogs.save_path(self.parent, "Export trace", start, TRACE_FILTER)
        if path:
            if not Path(path).suffix:
                path += ".jsonl"
            self.export_trace(path)

    def open_trace(self, path: str | Path) -> bool:
        """Replay a trace file: no models needed. False and a dialog if it cannot be read."""
        if not self.controller.discard_ok("Opening a trace"):
            return False
        name = Path(path).name
        self.status.set_busy(f"reading {name}")

        def progress(fraction: float) -> None:
            self.status.set_busy(f"reading {name}: {fraction:.0%}")
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
                self.parent,
                "Could not open the trace",
                f"{name}: {problems[0]}"
                + (f"\n(and {len(problems) - 1} more problems)" if len(problems) > 1 else "")
                + "\n\nThe file is not a valid specviz trace; `specviz inspect FILE` reports "
                "everything that is wrong with it.",
            )
            return False
        self.last_folder = str(Path(path).parent)
        self.controller.show_replay(session, name=Path(path).name)
        self.status.showMessage(f"Replaying {path}: Reset rewinds, Step / Run replay", 8000)
        if session.warnings:
            dialogs.info(self.parent, "Trace opened with a warning", "\n".join(session.warnings))
        return True

    def open_trace_dialog(self) -> None:
        path = dialogs.open_path(self.parent, "Open trace", self.last_folder, TRACE_FILTER)
        if path:
            self.open_trace(path)

    # ------------------------------------------------------------------------------ exports

    def export_csv(self, path: str | Path) -> bool:
        from specviz.core.metrics.csv_export import write_stats_csv

        session = self.controller.session
        if session is None or not session.rounds:
            dialogs.error(self.parent, "Nothing to export", "The session has no rounds yet.")
            return False
        try:
            write_stats_csv(session, path)
        except OSError as e:
            dialogs.error(self.parent, "Could not export the statistics", str(e))
            return False
        self.status.showMessage(f"Statistics saved to {path}", 5000)
        return True

    def export_csv_dialog(self) -> None:
        start = str(Path(self.last_folder) / "rounds.csv")
        path = dialogs.save_path(self.parent, "Export statistics", start, "CSV (*.csv)")
        if path:
            self.export_csv(path if Path(path).suffix else path + ".csv")

    def export_plot(self, name: str, path: str | Path) -> bool:
        """Write a plot or a panel to PNG or SVG (by the extension), with its legend."""
        try:
            self.exporters[name].export(name, path)
        except (OSError, ValueError) as e:
            dialogs.error(self.parent, "Could not export the plot", str(e))
            return False
        self.status.showMessage(f"Plot saved to {path}", 5000)
        return True

    def export_plot_dialog(self, name: str, suffix: str) -> None:
        start = str(Path(self.last_folder) / f"{name}.{suffix}")
        path = dialogs.save_path(
            self.parent, "Export plot", start, f"{suffix.upper()} (*.{suffix})"
        )
        if path:
            self.export_plot(name, path if Path(path).suffix else f"{path}.{suffix}")

    # ------------------------------------------------------------------------------ autosave

    def offer_restore(self) -> bool:
        """At launch: offer the session an earlier run left in the autosave; True if shown."""
        saver = self.controller.autosaver
        if saver is None:
            return False
        from specviz.core.trace.autosave import Autosaver

        found = Autosaver.find_restorable(saver.folder)
        if found is None:
            return False
        if not dialogs.ask(
            self.parent,
            "Restore the last session?",
            "specviz did not close cleanly last time. Restore the session it was running? "
            "It opens as a replay, ready to export.",
        ):
            saver.discard(found)
            return False
        try:
            session = saver.adopt(found)  # its file is this window's from now on
        except (TraceError, OSError) as e:
            dialogs.error(self.parent, "Could not restore the session", str(e))
            return False
        self.controller.show_replay(session, exported=False)  # only in the cache so far
        return True
