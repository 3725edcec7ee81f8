"""The errors that stop a whole stage (as opposed to failing one unit)."""

from __future__ import annotations

from typing import Any

from cresowlve_core.failures import CresowlveError
from cresowlve_core.llm.types import BudgetExceeded, LLMConfigError, LLMFatalError

#: A unit that raises one of these stops the run: a spent budget, a wrong key, model or endpoint.
#: Anything already finished stays persisted; calls in flight are awaited and recorded.
STOP_ERRORS: tuple[type[BaseException], ...] = (BudgetExceeded, LLMFatalError, LLMConfigError)


class StopWithRecord(CresowlveError):
    """Raised by a unit that has a record worth keeping *and* must stop the run.

    Example: the answer was paid for, then the judge's key turned out wrong. The runtime appends
    ``record`` and then stops exactly as it would on ``cause``.
    """

    def __init__(self, cause: BaseException, record: dict[str, Any]):
        super().__init__(str(cause))
        self.cause = cause
        self.record = record


def stop_reason(exc: BaseException) -> str:
    """A one-line reason for ``summary.json`` and the last line of the CLI."""
    if isinstance(exc, BudgetExceeded):
        return f"max_cost reached: {exc}"
    return f"fatal: {exc}"
