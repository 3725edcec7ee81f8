"""How every stage builds its model client: one set of options, one factory, one fallback.

:class:`ClientOptions` (defined in :mod:`cresowlve_core.llm.options`, light enough for the
command-line parser) holds the only defaults of the project for the settings that shape a model
call (each documented beside its field); a stage that needs another value passes it explicitly.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator
from dataclasses import dataclass

from cresowlve_core.failures import InputError, UsageError
from cresowlve_core.llm.cache import ResponseCache
from cresowlve_core.llm.client import LLMClient
from cresowlve_core.llm.http_workers import worker_transport_factory
from cresowlve_core.llm.options import ClientOptions
from cresowlve_core.llm.pricing import CostMeter, PriceTable
from cresowlve_core.llm.types import Endpoint


def open_client(endpoint: Endpoint, options: ClientOptions, *, meter: CostMeter | None = None,
                prices: PriceTable | None = None, cache: ResponseCache | None = None) -> LLMClient:
    """The one way a stage builds its client. ``cache`` shares one cache between two clients.
    ``options.provider`` names the endpoint's profile unless the endpoint names one itself."""
    return LLMClient(
        client_endpoint(endpoint, options),
        concurrency=options.concurrency,
        rpm=options.rpm,
        tpm=options.tpm,
        max_attempts=options.max_attempts,
        timeout_s=options.timeout_s,
        cache=cache if cache is not None else options.open_cache(),
        prices=prices,
        max_cost=options.max_cost,
        cost_meter=meter,
        backoff_base_s=options.backoff_base_s,
        deadline_s=options.deadline_s,
        down_after=options.down_after,
        down_window_s=options.down_window_s,
        first_byte_timeout_s=options.first_byte_timeout_s,
        transport_factory=worker_transport_factory(options.http_workers),
    )


def client_endpoint(endpoint: Endpoint, options: ClientOptions) -> Endpoint:
    """The endpoint a client of ``options`` calls (:func:`open_client`'s ``client.endpoint``):
    ``options.provider`` names its profile unless the endpoint names one itself."""
    if options.provider and not endpoint.provider:
        return dataclasses.replace(endpoint, provider=options.provider)
    return endpoint


class UnservedModel(UsageError, ValueError):
    """A role names a model but no base URL to reach it. Refused: running the embedded model in its
    place would file the embedded model's output under the name asked for."""


def check_served(model: str | None, base_url: str | None, what: str = "a base URL") -> None:
    """Refuse ``model`` without ``base_url`` (:class:`UnservedModel`, naming ``what`` is missing)."""
    if model and not base_url:
        raise UnservedModel(f"model {model!r} is named but {what} is not given; refusing to run the embedded "
                            "model in its place (give its base URL, or name no model for the embedded one); "
                            "nothing was run")


@dataclass(frozen=True)
class ModelRole:
    """Where one role's model lives (the solver, the judge, a construction step, a quiz-taker...).

    Neither ``model`` nor ``base_url`` means the embedded Gemma 3 270M (:func:`endpoint_or_embedded`);
    a model without a base URL is refused."""

    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None

    @property
    def name(self) -> str:
        return self.model or "embedded"


@contextlib.contextmanager
def endpoint_or_embedded(model: str | None, base_url: str | None,
                         api_key_env: str | None = None) -> Iterator[tuple[Endpoint, bool]]:
    """The endpoint named, or (with neither ``model`` nor ``base_url``) the embedded Gemma 3 270M
    for the block. A model without a base URL is refused (:class:`UnservedModel`).

    Yields ``(endpoint, embedded)``. The embedded model is a tiny *base* model: anything built on
    it demonstrates the pipeline, not a result, and reports say so.
    """
    if (named := _named_endpoint(model, base_url, api_key_env)) is not None:
        yield named, False
        return
    from cresowlve_core.llm.local import local_server

    with local_server() as srv:
        yield Endpoint(srv.base_url, srv.model, None), True


def _named_endpoint(model: str | None, base_url: str | None, api_key_env: str | None) -> Endpoint | None:
    """The endpoint a role names; None when it names neither model nor base URL (the embedded model).
    A model without a base URL is refused (:class:`UnservedModel`)."""
    check_served(model, base_url)
    if not base_url:
        return None
    if not model:
        raise InputError("a model name is required when a base URL is given")
    return Endpoint(base_url, model, api_key_env)


@contextlib.contextmanager
def planned_endpoint(model: str | None, base_url: str | None,
                     api_key_env: str | None = None) -> Iterator[tuple[Endpoint, bool]]:
    """What :func:`endpoint_or_embedded` would yield, with nothing started: the embedded model is
    named at its default loopback port (the resume rule ignores a loopback port) and mapped to its
    provider profile for the block, as the running server maps its own. A stage checks its run
    directories against the manifests of this endpoint before the embedded server starts."""
    if (named := _named_endpoint(model, base_url, api_key_env)) is not None:
        yield named, False
        return
    from cresowlve_core.llm.local import DEFAULT_PORT, HOST, LOCAL_MODEL, PROFILE
    from cresowlve_core.llm.profiles import PROVIDERS_ENV

    before = os.environ.get(PROVIDERS_ENV)
    os.environ[PROVIDERS_ENV] = ",".join(filter(None, [before, f"{HOST}:{DEFAULT_PORT}={PROFILE}"]))
    try:
        yield Endpoint(f"http://{HOST}:{DEFAULT_PORT}/v1", LOCAL_MODEL, None), True
    finally:
        if before is None:
            os.environ.pop(PROVIDERS_ENV, None)
        else:
            os.environ[PROVIDERS_ENV] = before
