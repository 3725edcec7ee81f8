"""Running a grid config: its cells in this process or in worker processes, then its report.

The one entry point, :func:`run_grid`, sits above :mod:`~cresowlve_core.evaluation.grid` (the cells,
in one process) and :mod:`~cresowlve_core.evaluation.grid_workers` (the cells, in several), which
both build on the first.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from cresowlve_core.evaluation.grid import (
    GRID_FILE,
    Cell,
    CellItems,
    GridConfig,
    GridConfigError,
    cell_finished,
    cells,
    load_grid,
    run_grid_async,
)
from cresowlve_core.text import slug


def temperatures_not_sent(grid: GridConfig, todo: list[Cell]) -> list[str]:
    """One warning per model whose configured temperature (``options.temperature`` of the grid or
    the model) its cells' requests will not carry."""
    from cresowlve_core.evaluation import roles

    notes: dict[str, str] = {}
    for cell in todo:
        if "temperature" in {**grid.options, **cell.model.options} and cell.model.model not in notes:
            if (note := roles.answerer(cell.eval_config(grid)).temperature_not_sent()) is not None:
                notes[cell.model.model] = note
    return list(notes.values())


def unrunnable_cells(grid: GridConfig, todo: list[Cell]) -> list[str]:
    """Why a cell left to run could not start, one ``cell: why`` line each, as ``cresowlve eval`` refuses
    the same configuration before any request: a configuration the client refuses (the Responses API on
    a provider that does not serve it, ...) or an API-key variable (the model's or the judge's) not set."""
    from cresowlve_core.evaluation import roles
    from cresowlve_core.llm.types import LLMConfigError
    from cresowlve_core.llm.wire import sent_fields

    problems: list[str] = []
    for cell in todo:
        try:
            for role in filter(None, roles.resolve(cell.eval_config(grid))):
                sent_fields(role.params, model=role.endpoint.model, profile=role.endpoint.profile)  # as its calls build it
                role.endpoint.api_key()  # its key variable, read as its calls read it
        except LLMConfigError as exc:
            problems.append(f"{cell.name}: {exc}")
    return problems


def run_grid(path: str | Path, *, progress: bool = True, reports_dir: str | Path | None = None,
             workers: int = 1) -> dict[str, Any]:
    """Load the config, run the grid, then render ``03_analysis`` over it (unless ``report: false``, the
    grid was stopped, or a cell was refused: its run directory is in use or holds another configuration,
    which the report would show as this grid's cell; ``report_skipped`` says so).

    ``workers`` > 1 runs the cells in that many processes (never more than ``parallel`` or the cells
    left to run; see :mod:`~cresowlve_core.evaluation.grid_workers`); 1 runs them in this process."""
    from cresowlve_core.runtime import run_coro

    grid = load_grid(path)
    items = CellItems()  # one load per items spec and language, shared by every cell's check
    todo = [c for c in cells(grid) if not cell_finished(grid, c, items)]
    if problems := unrunnable_cells(grid, todo):  # before any cell starts, so nothing is spent on the others
        raise GridConfigError(Path(path), problems)
    for note in temperatures_not_sent(grid, todo):
        print(f"warning: {note}", file=sys.stderr)
    if min(workers, grid.parallel, len(todo)) > 1:
        from cresowlve_core.evaluation.grid_workers import run_grid_in_workers  # spawn machinery, only when used

        out = run_grid_in_workers(grid, min(workers, grid.parallel, len(todo)), progress=progress)
    else:
        out = run_coro(run_grid_async(grid, progress=progress))
    refused = any(c["status"] == "refused" for c in out["cells"])  # a run directory in use or of another configuration
    if grid.report and refused:
        out["report_skipped"] = True
    if grid.report and not out.get("stopped") and not refused:  # an interrupted grid skips its report
        from cresowlve_core import notebook_progress
        from cresowlve_core.notebooks import run_notebook

        res = run_notebook("03_analysis", {"runs": str(grid.directory() / GRID_FILE), "aliases": out["aliases"]},
                           Path(reports_dir) if reports_dir else None, output_name=f"03_analysis_{slug(grid.name)}",
                           title=f"Analysis of grid {grid.name}",
                           progress_every_s=notebook_progress.PROGRESS_EVERY_S if progress else None)
        out["report"] = str(res.html)
    return out
