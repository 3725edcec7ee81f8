"""Calling models: the client, its cache, prices and the Batch API.

Start with :class:`LLMClient` (see ``client.py`` for retry, cache and cost semantics) and
``docs/llm.md``. Stages call models through the :class:`ChatModel` protocol.
"""

from cresowlve_core.llm.batch import collect_batch, submit_batch
from cresowlve_core.llm.cache import (
    CacheError,
    ResponseCache,
    cache_key,
    default_cache_path,
)
from cresowlve_core.llm.client import LLMClient, messages_to_prompt, split_think
from cresowlve_core.llm.effort import PRESETS, preset_body, sent_fields, shows_reasoning
from cresowlve_core.llm.pricing import CostMeter, ModelPrice, PriceTable
from cresowlve_core.llm.ratelimit import AsyncTokenBucket
from cresowlve_core.llm.types import (
    EFFORTS,
    BudgetExceeded,
    ChatModel,
    Completion,
    Endpoint,
    GenParams,
    LLMConfigError,
    LLMEndpointDown,
    LLMError,
    LLMFatalError,
    Usage,
)
from cresowlve_core.llm.wire import get_wire, register_wire

__all__ = [
    "EFFORTS",
    "AsyncTokenBucket",
    "BudgetExceeded",
    "CacheError",
    "ChatModel",
    "Completion",
    "CostMeter",
    "default_cache_path",
    "Endpoint",
    "GenParams",
    "LLMClient",
    "LLMConfigError",
    "LLMEndpointDown",
    "LLMError",
    "LLMFatalError",
    "ModelPrice",
    "PRESETS",
    "PriceTable",
    "ResponseCache",
    "Usage",
    "cache_key",
    "collect_batch",
    "get_wire",
    "messages_to_prompt",
    "preset_body",
    "register_wire",
    "sent_fields",
    "shows_reasoning",
    "split_think",
    "submit_batch",
]
