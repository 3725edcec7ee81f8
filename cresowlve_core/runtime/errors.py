"""The errors that stop a whole stage (as opposed to failing one unit)."""

from __future__ import annotations

from typing import Any

from cresowlve_core.failures import CresowlveError
from cresowlve_core.llm.types import BudgetExceeded, LLMConfigError, LLMEndpointDown, LLMFatalError

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


#: joins a stop's reason and what to do for the run to get further; the last line
#: (:func:`cresowlve_core.exitcodes.stage_exit`) ends with what follows it instead of "run again to resume"
TO_GO_ON = "; to go on: "
#: what to change after a fatal error whose remedy nobody named: the error's own message says what it is
CHANGE_WHAT_STOPPED_IT = "change what stopped the run (the same command stops the same way)"


def stop_remedy(exc: BaseException) -> str | None:
    """What to do for the run to get further than ``exc`` let it (the error's ``remedy``: a valid key,
    another effort, a higher budget), or None when running the same command again may be all it
    takes (an endpoint that looked down may be up again)."""
    if isinstance(exc, LLMEndpointDown):
        return None
    remedy = getattr(exc, "remedy", None)
    if remedy:
        return str(remedy)
    return "raise --max-cost" if isinstance(exc, BudgetExceeded) else CHANGE_WHAT_STOPPED_IT


def stop_reason(exc: BaseException) -> str:
    """A one-line reason for ``summary.json`` and the last line of the CLI, ending with
    :data:`TO_GO_ON` and :func:`stop_remedy` when running the same command again is not all it takes."""
    reason = f"max_cost reached: {exc}" if isinstance(exc, BudgetExceeded) else f"fatal: {exc}"
    remedy = stop_remedy(exc)
    return f"{reason}{TO_GO_ON}{remedy}" if remedy else reason
