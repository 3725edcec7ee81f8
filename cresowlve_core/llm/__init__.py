"""Calling models: the client, its cache, prices and the Batch API.

Start with :class:`LLMClient` (see ``client.py`` for retry, cache and cost semantics).
"""

from cresowlve_core.llm.batch import collect_batch, submit_batch
from cresowlve_core.llm.cache import DEFAULT_CACHE_PATH, ResponseCache, cache_key
from cresowlve_core.llm.client import LLMClient, messages_to_prompt, split_think
from cresowlve_core.llm.pricing import CostMeter, ModelPrice, PriceTable
from cresowlve_core.llm.ratelimit import AsyncTokenBucket
from cresowlve_core.llm.types import (
    EFFORTS,
    BudgetExceeded,
    Completion,
    Endpoint,
    GenParams,
    LLMConfigError,
    LLMError,
    LLMFatalError,
)

__all__ = [
    "EFFORTS",
    "AsyncTokenBucket",
    "BudgetExceeded",
    "Completion",
    "CostMeter",
    "DEFAULT_CACHE_PATH",
    "Endpoint",
    "GenParams",
    "LLMClient",
    "LLMConfigError",
    "LLMError",
    "LLMFatalError",
    "ModelPrice",
    "PriceTable",
    "ResponseCache",
    "cache_key",
    "collect_batch",
    "messages_to_prompt",
    "split_think",
    "submit_batch",
]
