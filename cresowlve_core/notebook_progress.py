"""Progress of a report being rendered: ``rendering 07_create: 5 of 17 cells done (cell 6 running, 40 s)``
on stderr at a fixed interval, so long work is never silent (the main job renders each report in a child
process whose stderr is the terminal).

Cells are counted by a papermill engine (the standard nbclient engine) whose notebook manager reports
each finished code cell; a heartbeat thread prints the line. Nothing of this reaches the notebook.

The same engine writes the executing notebook to disk less often than papermill does by default:
papermill rewrites the whole notebook before and after every cell (pure-Python JSON with indentation,
0.4 s for a 2.6 MB notebook; 48 writes, 8.6 s of CPU, for ``03_analysis`` on 36 runs). Here it is
written at most every :data:`SAVE_EVERY_S` seconds while cells run, and always when execution ends,
finished or failed, so a failed render still leaves its partial notebook: once, by papermill's
``execute_notebook`` after the cells (its final write, or the one before it raises for a failed cell), or by
the engine's final save when the kernel died (papermill would otherwise write a finished notebook twice).
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any, TextIO

ENGINE = "cresowlve-progress"
#: while a notebook executes, it is written to disk at most this often (and always when it ends)
SAVE_EVERY_S = 30.0

#: how often a report rendering prints which cell of how many (on stderr): the main job, and every
#: command that renders a report (``report``, ``errors report``, ``contamination report``, the grid's)
PROGRESS_EVERY_S = 10.0


class _Tracker:
    def __init__(self, stem: str) -> None:
        self.stem, self.t0 = stem, time.monotonic()
        self.total = self.done = 0
        self.running: int | None = None

    def line(self) -> str:
        cells = f"{self.done} of {self.total} cells done" if self.total else "starting the kernel"
        running = f"cell {self.running} running, " if self.running is not None else ""
        return f"  rendering {self.stem}: {cells} ({running}{time.monotonic() - self.t0:.0f} s)"


_ACTIVE: list[_Tracker] = []


def _register_engine() -> None:
    from papermill.engines import NBClientEngine, papermill_engines

    class ProgressEngine(NBClientEngine):
        """nbclient's engine, counting code cells into the active tracker, saving at most every
        :data:`SAVE_EVERY_S` seconds until the cells are done; for ``papermill.execute_notebook`` only
        (which writes the finished notebook itself)."""

        @classmethod
        def execute_managed_notebook(cls, nb_man: Any, kernel_name: str, **kwargs: Any) -> Any:
            save, last = nb_man.save, [time.monotonic()]  # papermill has just saved the notebook at its start

            def throttled_save(**kw: Any) -> Any:
                if time.monotonic() - last[0] < SAVE_EVERY_S:
                    return None
                last[0] = time.monotonic()
                return save(**kw)

            def final_save(**kw: Any) -> Any:
                nb_man.save = save
                return None

            nb_man.save = throttled_save
            try:
                result = cls._execute_cells(nb_man, kernel_name, **kwargs)
            except BaseException:
                nb_man.save = save  # the kernel died or was stopped: notebook_complete's save keeps the partial notebook
                raise
            # The cells ran (or one failed): papermill.execute_notebook writes the notebook next (its final write, or
            # raise_for_execution_errors on a failed cell), so the save of notebook_complete would write the same
            # notebook once more (0.3-1 s for a few MB: indented pure-Python JSON after a deep copy).
            nb_man.save = final_save
            return result

        @classmethod
        def _execute_cells(cls, nb_man: Any, kernel_name: str, **kwargs: Any) -> Any:
            tracker = _ACTIVE[-1] if _ACTIVE else None
            if tracker is not None:
                code = [i for i, c in enumerate(nb_man.nb.cells) if c.cell_type == "code"]
                tracker.total = len(code)
                start, complete = nb_man.cell_start, nb_man.cell_complete

                def cell_start(cell: Any, cell_index: int | None = None, **kw: Any) -> Any:
                    if cell.cell_type == "code" and cell_index is not None:
                        tracker.running = code.index(cell_index) + 1
                    return start(cell, cell_index, **kw)

                def cell_complete(cell: Any, cell_index: int | None = None, **kw: Any) -> Any:
                    if cell.cell_type == "code":
                        tracker.done += 1
                        tracker.running = None
                    return complete(cell, cell_index=cell_index, **kw)

                nb_man.cell_start, nb_man.cell_complete = cell_start, cell_complete
            return super().execute_managed_notebook(nb_man, kernel_name, **kwargs)

    papermill_engines.register(ENGINE, ProgressEngine)  # a dict entry: registering again replaces it


@contextlib.contextmanager
def render_progress(stem: str, every_s: float | None, stream: TextIO | None = None) -> Iterator[dict[str, Any]]:
    """Print the progress line of ``stem`` every ``every_s`` seconds while the block runs (nothing with
    ``None``); yields the keyword arguments that make ``papermill.execute_notebook`` count cells (and
    save the notebook at most every :data:`SAVE_EVERY_S` seconds, with or without progress lines)."""
    _register_engine()
    if not every_s:
        yield {"engine_name": ENGINE}
        return
    tracker, done = _Tracker(stem), threading.Event()
    out = stream or sys.stderr

    def beat() -> None:
        while not done.wait(every_s):
            print(tracker.line(), file=out, flush=True)

    _ACTIVE.append(tracker)
    thread = threading.Thread(target=beat, name=f"progress-{stem}", daemon=True)
    thread.start()
    try:
        yield {"engine_name": ENGINE}
    finally:
        done.set()
        thread.join()
        _ACTIVE.remove(tracker)
