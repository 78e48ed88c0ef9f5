"""OpenTelemetry spans for runs, steps and model calls (GenAI semantic conventions).

Used by the worker (run and step spans) and the gateway (model-call spans).

Spans are made only when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set (they are then
exported over OTLP/HTTP by ``opentelemetry-sdk``, the ``keepgoing[otel]`` extra)
or when a program hands its own tracer provider to :func:`use_tracer_provider`.
Otherwise :func:`span` is a no-op and OpenTelemetry is never imported.

Attributes: ``gen_ai.operation.name``, ``gen_ai.provider.name``,
``gen_ai.request.model``, ``gen_ai.response.model``,
``gen_ai.usage.input_tokens``, ``gen_ai.usage.output_tokens``,
``keepgoing.run_id``, ``keepgoing.step``, ``keepgoing.attempt``.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = [
    "ENDPOINT_ENV",
    "enabled",
    "finish",
    "inject",
    "mark_error",
    "span",
    "start",
    "use_tracer_provider",
]

ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"
_lock = threading.Lock()
_tracer: Any = None
_checked = False


def use_tracer_provider(provider: Any) -> None:
    """Send keepgoing's spans to ``provider`` (an SDK ``TracerProvider``); None turns them off."""
    global _tracer, _checked
    with _lock:
        _tracer = provider.get_tracer("keepgoing") if provider is not None else None
        _checked = True


def _the_tracer() -> Any:
    global _tracer, _checked
    if _checked:
        return _tracer
    with _lock:
        if not _checked:
            _checked = True
            if os.environ.get(ENDPOINT_ENV):
                _tracer = _otlp_tracer()
    return _tracer


def _otlp_tracer() -> Any:
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415
            OTLPSpanExporter,
        )
        from opentelemetry.sdk.resources import Resource  # noqa: PLC0415
        from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
        from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: PLC0415
    except ImportError:
        import logging  # noqa: PLC0415

        logging.getLogger("keepgoing.gateway").warning(
            "%s is set but opentelemetry-sdk is not installed: pip install 'keepgoing[otel]'",
            ENDPOINT_ENV,
        )
        return None
    service = os.environ.get("OTEL_SERVICE_NAME", "keepgoing")
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider.get_tracer("keepgoing")


def enabled() -> bool:
    return _the_tracer() is not None


@contextlib.contextmanager
def span(
    name: str,
    attributes: Mapping[str, Any],
    *,
    kind: str = "internal",
    start_time: int | None = None,
) -> Iterator[Any]:
    """A span named ``name`` (yields it, or None when tracing is off)."""
    tracer = _the_tracer()
    if tracer is None:
        yield None
        return
    from opentelemetry.trace import SpanKind  # noqa: PLC0415

    span_kind = SpanKind.CLIENT if kind == "client" else SpanKind.INTERNAL
    clean = {k: v for k, v in attributes.items() if v is not None}
    with tracer.start_as_current_span(
        name, kind=span_kind, attributes=clean, start_time=start_time
    ) as current:
        yield current


def set_attributes(current: Any, attributes: Mapping[str, Any]) -> None:
    if current is not None:
        current.set_attributes({k: v for k, v in attributes.items() if v is not None})


def mark_error(current: Any, message: str) -> None:
    if current is not None:
        from opentelemetry.trace import Status, StatusCode  # noqa: PLC0415

        current.set_status(Status(StatusCode.ERROR, message))


def start(
    name: str,
    attributes: Mapping[str, Any],
    *,
    kind: str = "client",
    start_time: int | None = None,
    parent: Mapping[str, str] | None = None,
) -> Any:
    """A started span that is not made current (for a stream that outlives the call), or
    None. ``parent`` is a carrier of W3C trace headers (``traceparent``) to continue."""
    tracer = _the_tracer()
    if tracer is None:
        return None
    from opentelemetry.propagate import extract  # noqa: PLC0415
    from opentelemetry.trace import SpanKind  # noqa: PLC0415

    span_kind = SpanKind.CLIENT if kind == "client" else SpanKind.INTERNAL
    clean = {k: v for k, v in attributes.items() if v is not None}
    context = extract(dict(parent)) if parent else None
    return tracer.start_span(
        name, context=context, kind=span_kind, attributes=clean, start_time=start_time
    )


def inject(headers: dict[str, str]) -> None:
    """Add the current span's W3C trace headers to ``headers`` (when tracing is on)."""
    if _the_tracer() is None:
        return
    from opentelemetry.propagate import inject as otel_inject  # noqa: PLC0415

    otel_inject(headers)


def finish(current: Any, attributes: Mapping[str, Any], error: str | None = None) -> None:
    """Set ``attributes`` on a span from :func:`start`, mark ``error``, and end it."""
    if current is None:
        return
    set_attributes(current, attributes)
    if error:
        mark_error(current, error)
    current.end()
