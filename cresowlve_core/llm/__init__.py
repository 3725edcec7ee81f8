"""Calling models: the client, its cache, prices and the Batch API.

Start with :class:`LLMClient` (see ``client.py`` for retry, cache and cost semantics) and
``docs/llm.md``. Stages call models through the :class:`ChatModel` protocol.

The names below are imported lazily, on first use (PEP 562): ``import cresowlve_core.llm.types``
(what the command-line parser needs) must not load the openai SDK through ``batch.py``, nor the
HTTP client (``cresowlve --help`` start-up time).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cresowlve_core.lazy import lazy_names

if TYPE_CHECKING:
    from cresowlve_core.llm.batch import collect_batch, submit_batch
    from cresowlve_core.llm.cache import CacheError, ResponseCache, cache_key, default_cache_path
    from cresowlve_core.llm.client import LLMClient, messages_to_prompt, split_think
    from cresowlve_core.llm.effort import PRESETS, sent_fields, shows_reasoning
    from cresowlve_core.llm.pricing import CostMeter, ModelPrice, PriceTable
    from cresowlve_core.llm.profiles import PROFILES, Profile, get_profile
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

_WHERE: dict[str, str] = {
    **dict.fromkeys(("collect_batch", "submit_batch"), "batch"),
    **dict.fromkeys(("CacheError", "ResponseCache", "cache_key", "default_cache_path"), "cache"),
    **dict.fromkeys(("LLMClient", "messages_to_prompt", "split_think"), "client"),
    **dict.fromkeys(("PRESETS", "sent_fields", "shows_reasoning"), "effort"),
    **dict.fromkeys(("PROFILES", "Profile", "get_profile"), "profiles"),
    **dict.fromkeys(("CostMeter", "ModelPrice", "PriceTable"), "pricing"),
    "AsyncTokenBucket": "ratelimit",
    **dict.fromkeys(("EFFORTS", "BudgetExceeded", "ChatModel", "Completion", "Endpoint", "GenParams",
                     "LLMConfigError", "LLMEndpointDown", "LLMError", "LLMFatalError", "Usage"), "types"),
    **dict.fromkeys(("get_wire", "register_wire"), "wire"),
}

__all__ = [
    "EFFORTS",
    "PRESETS",
    "AsyncTokenBucket",
    "BudgetExceeded",
    "cache_key",
    "CacheError",
    "ChatModel",
    "collect_batch",
    "Completion",
    "CostMeter",
    "default_cache_path",
    "Endpoint",
    "GenParams",
    "get_wire",
    "LLMClient",
    "LLMConfigError",
    "LLMEndpointDown",
    "LLMError",
    "LLMFatalError",
    "messages_to_prompt",
    "ModelPrice",
    "PROFILES",
    "Profile",
    "get_profile",
    "PriceTable",
    "register_wire",
    "ResponseCache",
    "sent_fields",
    "shows_reasoning",
    "split_think",
    "submit_batch",
    "Usage",
]


__getattr__, __dir__ = lazy_names(__name__, _WHERE)
