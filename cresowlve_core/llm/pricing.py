"""Model prices and cost accounting.

``PriceTable.load()`` reads ``prices.csv`` next to this module (columns ``model,
input_per_mtok, output_per_mtok, batch_discount``; lines starting with ``#`` are comments)
and then, if the environment variable ``CRESOWLVE_PRICES`` names a CSV of the same shape,
lets its rows override or extend the table.

Rules:

* An unknown model costs ``None`` ("unknown"), never 0.
* Reasoning tokens are billed as output tokens. OpenAI already includes them in
  ``output_tokens``/``completion_tokens``, so they are not added a second time; Gemini's
  OpenAI-compatible endpoint leaves them out of ``completion_tokens`` but counts them in
  ``total_tokens``, and the wire adds the difference to the output count
  (:func:`~cresowlve_core.llm.openai_wire._usage`).
* A dated snapshot name (``gpt-4.1-2025-04-14``) falls back to its base name (``gpt-4.1``), and a
  ``vendor/model`` id (OpenRouter) to ``model``; there is no other fuzzy matching
  (``gpt-4.1-mini`` never matches ``gpt-4.1``).
* A cost the provider reports with the answer (OpenRouter's ``usage.cost``) is used instead of
  the table (``Completion.reported_cost``); the table then only bounds the budget reservation.

``CostMeter`` adds up what one role (the model under test, or the judge: one meter each)
spends, and enforces an optional budget with reservations for calls still in flight.
"""

from __future__ import annotations

import csv
import functools
import io
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from cresowlve_core.failures import InputError
from cresowlve_core.llm.types import BudgetExceeded, Usage

DEFAULT_PRICES_PATH = Path(__file__).resolve().parent / "prices.csv"
PRICES_ENV = "CRESOWLVE_PRICES"
_DATE_SUFFIX = re.compile(r"-\d{4}-\d{2}-\d{2}$")


@dataclass(frozen=True)
class ModelPrice:
    """USD per million tokens, and the fraction the Batch API takes off."""

    input_per_mtok: float
    output_per_mtok: float
    batch_discount: float = 0.0


def _price_value(row: dict[str, str | None], column: str, high: float = math.inf) -> float:
    """The number in ``column`` of a price row: finite, at least 0 (and at most ``high``); a NaN
    price would disable ``--max-cost`` (no comparison with NaN is true), a negative one pay it back."""
    text = row.get(column)
    if text is None:
        raise ValueError(f"{column} is missing")
    value = float(text)
    if not (math.isfinite(value) and 0 <= value <= high):
        limit = "between 0 and 1" if high == 1 else "a finite number >= 0"
        raise ValueError(f"{column} must be {limit}, got {text.strip()!r}")
    return value


def _read_csv(path: Path) -> dict[str, ModelPrice]:
    """A price table (the bundled one, or the CSV that ``$CRESOWLVE_PRICES`` names): UTF-8, with or
    without a byte-order mark (a spreadsheet's "CSV UTF-8"); a file that cannot be read or a bad row
    (among them a second row for a model, which would silently replace the first) is one
    :class:`InputError` naming the file (and the row's line)."""
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as exc:
        raise InputError(f"price table {path}: cannot be read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"price table {path}: not UTF-8 (byte 0x{exc.object[exc.start]:02x}); save it as UTF-8") from None
    numbered = [(n, ln) for n, ln in enumerate(text.splitlines(), 1) if ln.strip() and not ln.lstrip().startswith("#")]
    rows: dict[str, ModelPrice] = {}
    line_of: dict[str, int | str] = {}  # the line each model's price is on (one price per model and file)
    reader = csv.DictReader(io.StringIO("\n".join(ln for _, ln in numbered)))
    for row in reader:
        line = numbered[reader.line_num - 1][0] if 0 < reader.line_num <= len(numbered) else "?"
        try:
            if None in row:  # csv's key for the fields beyond the header's
                raise ValueError(f"{len(row[None])} more field(s) than the header's {len(reader.fieldnames or [])}: "
                                 "a decimal comma (write 2.50) or an unquoted comma in a note?")
            model = row["model"].strip()
            if model in line_of:
                raise ValueError(f"{model!r} already has a price on line {line_of[model]}: keep one row per model")
            line_of[model] = line
            rows[model] = ModelPrice(
                input_per_mtok=_price_value(row, "input_per_mtok"),
                output_per_mtok=_price_value(row, "output_per_mtok"),
                batch_discount=_price_value(row, "batch_discount", 1.0) if row.get("batch_discount") else 0.0,
            )
        except (KeyError, ValueError, AttributeError) as exc:
            raise InputError(f"bad price row in {path}:{line}: {row!r} ({exc})") from exc
    return rows


@functools.lru_cache(maxsize=1024)
def _price_names(model: str) -> tuple[str, ...]:
    """The names a price of ``model`` is looked up under, in order (see :meth:`PriceTable.get`)."""
    bare = model.rsplit("/", 1)[-1]
    return tuple(dict.fromkeys((model, _DATE_SUFFIX.sub("", model), bare, _DATE_SUFFIX.sub("", bare))))


@dataclass
class PriceTable:
    """Prices by model name. Build with ``PriceTable.load()`` or directly from a dict."""

    prices: dict[str, ModelPrice] = field(default_factory=dict)

    @classmethod
    def load(cls, path: str | Path | None = None) -> PriceTable:
        """Read ``path`` (default: the bundled prices.csv), then apply ``$CRESOWLVE_PRICES`` on top."""
        prices = _read_csv(Path(path) if path else DEFAULT_PRICES_PATH)
        override = os.environ.get(PRICES_ENV)
        if override:
            prices.update(_read_csv(Path(override)))
        return cls(prices)

    def get(self, model: str) -> ModelPrice | None:
        """The price of ``model``, or of its undated base name, each with and without a ``vendor/``
        prefix (OpenRouter's ``mistralai/mistral-large-2512`` finds ``mistral-large-2512``);
        ``None`` when unknown."""
        for name in _price_names(model):
            if name in self.prices:
                return self.prices[name]
        return None

    def cost(self, model: str, usage: Usage, *, batch: bool = False) -> float | None:
        """USD for one call; ``None`` if the model is unknown or a needed token count is missing."""
        return self._usd(model, usage.input_tokens, usage.output_tokens, batch)

    def max_cost(self, model: str, input_tokens: int, max_output_tokens: int, *, batch: bool = False) -> float | None:
        """Upper-bound estimate of one call (used for budget checks); ``None`` if unknown."""
        return self._usd(model, input_tokens, max_output_tokens, batch)

    def _usd(self, model: str, input_tokens: int | None, output_tokens: int | None, batch: bool) -> float | None:
        price = self.get(model)
        if price is None:
            return None
        if price.input_per_mtok == 0 and price.output_per_mtok == 0:
            return 0.0
        if input_tokens is None or output_tokens is None:
            return None
        usd = (input_tokens * price.input_per_mtok + output_tokens * price.output_per_mtok) / 1e6
        return usd * (1.0 - price.batch_discount) if batch else usd


def usd(amount: float) -> str:
    """An amount of USD as a line shows it: four decimals, or as many as a smaller amount needs
    (a budget of $0.00005 is never shown as $0.0000)."""
    if amount == 0 or abs(amount) >= 0.0001:
        return f"${amount:.4f}"
    return f"${amount:.10f}".rstrip("0")


def cost_text(known: float | None, n_unknown: int, n: int) -> str:
    """A total over ``n`` calls of which ``n_unknown`` have no known cost: ``$0.0123``, ``unknown``
    (nothing known, or no call), or the known part as a lower bound, ``≥ $0.0006 (4 of 9 unknown)``."""
    if known is None or n_unknown >= n:
        return "unknown"
    return f"≥ {usd(known)} ({n_unknown} of {n} unknown)" if n_unknown else usd(known)


def estimate_input_tokens(text: str) -> int:
    """A deliberately generous token estimate (≈ 3 characters per token) for budget checks."""
    return max(1, math.ceil(len(text) / 3))


@dataclass
class CostMeter:
    """Running totals for one role. ``spent`` is new money; ``run_cost`` includes cache hits.

    ``spent`` only grows from calls actually sent; cached answers add their original price to
    ``run_cost`` (what the whole run would cost from scratch) but nothing to ``spent``.
    """

    spent: float = 0.0
    run_cost: float = 0.0
    n_calls: int = 0
    n_cached: int = 0
    n_unknown_cost: int = 0
    n_unusable: int = 0  # billed answers the client could not use (no text), retried
    unusable_cost: float = 0.0  # their known cost (also in ``spent``)
    n_unusable_unknown_cost: int = 0  # of them, those whose cost is unknown (no price, no reported cost)
    reserved: float = 0.0
    role: str | None = None  # named in the stop message when a run has several budgets ("judge")
    budget: float | None = None  # the role's max_cost, when it has one (set by the client)

    def reserve(self, estimate: float, max_cost: float | None) -> None:
        """Hold ``estimate`` for a call about to be sent, or raise BudgetExceeded."""
        if max_cost is not None and self.spent + self.reserved + estimate > max_cost:
            raise BudgetExceeded(
                f"{f'the {self.role} budget' if self.role else 'budget'} of {usd(max_cost)} would be exceeded: spent "
                f"{usd(self.spent)}, in flight {usd(self.reserved)}, next call up to {usd(estimate)}",
                remedy=self._over_budget_remedy(estimate, max_cost),
            )
        self.reserved += estimate

    def _over_budget_remedy(self, estimate: float, max_cost: float) -> str:
        """What lets a run its budget stopped get further: the budget caps each invocation's new
        spending, so running again spends it again, unless one call alone may cost more."""
        flag = "--judge-max-cost" if self.role == "judge" else "--max-cost"
        if estimate > max_cost:
            return f"raise {flag} above {usd(estimate)}, what one call may cost"
        return f"raise {flag}, or run again to spend up to {usd(max_cost)} more ({flag} caps each run's new spending)"

    def release(self, estimate: float) -> None:
        """Give back a reservation (the call finished or failed)."""
        self.reserved = max(0.0, self.reserved - estimate)

    def record(self, cost: float | None, *, cached: bool) -> None:
        """Account for one finished call."""
        self.n_calls += 1
        if cached:
            self.n_cached += 1
        if cost is None:
            self.n_unknown_cost += 1
            return
        self.run_cost += cost
        if not cached:
            self.spent += cost

    def charge_unusable(self, cost: float | None) -> None:
        """Account for an answer the provider billed that could not be used (and was asked again):
        its cost is spent, though it is no call's answer."""
        self.n_unusable += 1
        if cost is None:
            self.n_unusable_unknown_cost += 1
        else:
            self.spent += cost
            self.run_cost += cost
            self.unusable_cost += cost

    @property
    def over_budget(self) -> float:
        """How much more than its budget this role spent (0 within it): calls in flight when the
        budget stopped the run cost more than they held (see ``LLMClient``'s reservations)."""
        return max(0.0, self.spent - self.budget) if self.budget is not None else 0.0

    def summary(self) -> dict[str, float | int | None]:
        return {
            "spent": self.spent,
            "run_cost": self.run_cost,
            "n_calls": self.n_calls,
            "n_cached": self.n_cached,
            "n_unknown_cost": self.n_unknown_cost,
            "n_unusable": self.n_unusable,
            "unusable_cost": self.unusable_cost,
            "n_unusable_unknown_cost": self.n_unusable_unknown_cost,
            "max_cost": self.budget,
            "over_budget": self.over_budget,
        }
