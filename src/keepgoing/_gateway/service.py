"""The gateway: admit a call (model, key, limits), try its targets in order, keep the ledger.

One :class:`Gateway` serves the HTTP routes of a server, or a task's calls
in-process. A call is admitted when its model resolves, the key may use it,
and the key's usage is under every limit. For a key with limits, admission is
one store transaction that checks the usage and *reserves* the call (a
``pending`` ledger row holding its estimated tokens and its most expensive
target's cost), so concurrent calls take turns and a limit of three admits
three; the row is settled with the real figures when the call ends, and a call
that fails releases its reservation (its row settles with no cost). Then its
targets (the model, then its fallbacks) are tried in order, moving on after a
429, a 5xx, a timeout, a failed connection or a stream cut before anything
reached the caller. Every call, refused or failed ones too, gets a ledger row.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from typing import Any, TypeVar

from keepgoing import _tracing as tracing
from keepgoing._clock import Clock, system_clock
from keepgoing._gateway.cassette import Cassette, cassette_key
from keepgoing._gateway.config import GatewayConfig, ProviderConfig, Target
from keepgoing._gateway.ledger import Caller, costless_row, estimate_tokens, kept, new_call_id
from keepgoing._gateway.limits import check_model, has_usage_limits, refusal
from keepgoing._gateway.providers import Provider, ProviderError, make_provider
from keepgoing._gateway.requests import (
    ChatRequest,
    EmbedRequest,
    chat_request,
    chat_reservation,
    embed_request,
)
from keepgoing._gateway.stream import Relay, meaningful, replayed
from keepgoing._store.gateway_protocol import GatewayCall
from keepgoing._store.protocol import Store
from keepgoing.errors import GatewayError, KeepgoingError

__all__ = ["Gateway"]

T = TypeVar("T")


class Gateway:
    def __init__(
        self,
        config: GatewayConfig,
        store: Store | None,
        *,
        clock: Clock = system_clock,
        cassette: Cassette | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.clock = clock
        self.cassette = cassette if cassette is not None else Cassette.from_env()
        self._providers: dict[str, Provider] = {}
        self._background: set[asyncio.Task[None]] = set()

    # -- parts ---------------------------------------------------------------------
    def provider(self, config: ProviderConfig) -> Provider:
        found = self._providers.get(config.name)
        if found is None:
            found = self._providers[config.name] = make_provider(config)
        return found

    def secrets(self) -> list[str]:
        return [
            key for p in self.config.providers.values() if (key := p.api_key()) is not None and key
        ]

    async def aclose(self) -> None:
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        for provider in self._providers.values():
            await provider.aclose()
        self._providers.clear()

    def models(self, caller: Caller) -> list[dict[str, Any]]:
        """The model aliases ``caller`` may use, as OpenAI's model objects."""
        allowed = caller.key.models if caller.key is not None else None
        return [
            {
                "id": name,
                "object": "model",
                "created": 0,
                "owned_by": route.provider,
            }
            for name, route in sorted(self.config.models.items())
            if allowed is None or name in allowed
        ]

    async def record(self, call: GatewayCall) -> None:
        if self.store is not None:
            await self.store.record_gateway_call(call)

    def record_later(self, call: GatewayCall) -> None:
        """Record ``call`` from a task of its own (a stream whose caller went away)."""
        task = asyncio.get_running_loop().create_task(self.record(call))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _admit(
        self, model: str, caller: Caller, operation: str, t0: float, reserve: tuple[int, int]
    ) -> tuple[list[Target], Caller]:
        """The call's targets, and its caller with the reservation's id once it is admitted
        (``reserve``: the input and output tokens to hold against the key's limits)."""
        created = self.clock.now()
        try:
            targets = self.config.resolve(model)
            check_model(caller.key, model)
        except KeyError:
            error = GatewayError(
                f"the model {model!r} does not exist; models: "
                f"{', '.join(self.config.model_names())} (or <provider>/<model> of "
                f"{', '.join(sorted(self.config.providers))})",
                status=404,
                error_code="model_not_found",
                param="model",
            )
            await self._refused(caller, operation, model, error, created, t0)
            raise error from None
        except GatewayError as exc:
            await self._refused(caller, operation, model, exc, created, t0)
            raise
        if caller.key is None or not has_usage_limits(caller.key) or self.store is None:
            return targets, caller
        tokens_in, tokens_out = reserve
        held = GatewayCall(
            call_id=new_call_id(),
            operation=operation,
            model_asked=model,
            model_answered=None,
            provider=None,
            input_tokens=tokens_in,
            output_tokens=tokens_out,
            cost=max(t.price.cost(tokens_in, tokens_out) for t in targets),
            latency=0.0,
            ttft=None,
            status="pending",
            created_at=created,
            **caller.stamp(),
        )
        refused = await self.store.reserve_gateway_call(
            held, created, lambda key, usage: refusal(key, usage, created)
        )
        if refused is not None:
            raise refused
        return targets, replace(caller, call_id=held.call_id)

    async def _refused(
        self,
        caller: Caller,
        operation: str,
        model: str,
        error: GatewayError,
        created: float,
        t0: float,
    ) -> None:
        latency = time.perf_counter() - t0
        await self.record(costless_row(caller, operation, model, str(error), created, latency))

    async def _release(
        self, caller: Caller, operation: str, model: str, created: float, t0: float, why: str
    ) -> None:
        """Settle the reservation of a call that ended in an error nothing recorded, with
        no cost (it spent nothing the gateway knows of)."""
        latency = time.perf_counter() - t0
        try:
            await self.record(
                costless_row(caller, operation, model, why, created, latency, "error")
            )
        except KeepgoingError:  # already settled, or the store is away: nothing to add
            return

    async def _admitted(
        self,
        operation: str,
        model: str,
        caller: Caller,
        reserve: tuple[int, int],
        work: Callable[[Caller, list[Target], float], Awaitable[T]],
    ) -> T:
        """Admit the call, then ``work(caller, targets, t0)``; if that raises, the call's
        reservation is released (from a task of its own: the caller may be cancelled).
        A row already settled stays as it is."""
        t0 = time.perf_counter()
        targets, admitted = await self._admit(model, caller, operation, t0, reserve)
        try:
            return await work(admitted, targets, t0)
        except BaseException as exc:
            if admitted.call_id is not None:
                why = str(exc) or type(exc).__name__
                task = asyncio.get_running_loop().create_task(
                    self._release(admitted, operation, model, self.clock.now(), t0, why)
                )
                self._background.add(task)
                task.add_done_callback(self._background.discard)
            raise

    def _span_attributes(self, operation: str, model: str, caller: Caller) -> dict[str, Any]:
        return {
            "gen_ai.operation.name": operation,
            "gen_ai.request.model": model,
            "keepgoing.run_id": caller.run_id,
            "keepgoing.step": caller.step,
            "keepgoing.attempt": caller.attempt,
            "keepgoing.operation_id": caller.operation_id,
        }

    def _failed(
        self,
        caller: Caller,
        operation: str,
        model: str,
        failures: list[tuple[Target, ProviderError]],
        created: float,
        t0: float,
        prompt: Any,
        streamed: bool = False,
    ) -> tuple[GatewayCall, GatewayError]:
        text = "; ".join(f"{t.label}: {e}" for t, e in failures)
        last = failures[-1][1]
        if not last.retryable and last.status is not None:
            status, code = last.status, "provider_error"
        elif all(e.status == 429 for _, e in failures):
            status, code = 429, "provider_rate_limited"
        else:
            status, code = 502, "provider_error"
        error = GatewayError(
            f"no provider answered {model!r} ({len(failures)} tried): {text}",
            status=status,
            error_code=code,
        )
        row = GatewayCall(
            call_id=caller.row_id(),
            operation=operation,
            model_asked=model,
            model_answered=None,
            provider=failures[-1][0].provider.name,
            input_tokens=0,
            output_tokens=0,
            cost=0.0,
            latency=time.perf_counter() - t0,
            ttft=None,
            status="error",
            created_at=created,
            error=str(error)[:2000],
            streamed=streamed,
            tries=len(failures),
            prompt=kept(self.config.prompts, prompt),
            **caller.stamp(),
        )
        return row, error

    # -- chat ----------------------------------------------------------------------
    async def _answer(
        self, operation: str, model: str, body: dict[str, Any], targets: list[Target]
    ) -> tuple[dict[str, Any] | None, Target, list[tuple[Target, ProviderError]]]:
        """A call not streamed: the recorded answer when replaying a cassette, else the
        first target's that answers, trying them in order while failures are retryable
        (recorded when recording). None, with every failure, when none answered."""
        key = cassette_key(operation, model, body, False) if self.cassette else ""
        if self.cassette is not None and self.cassette.replaying:
            entry = self.cassette.lookup(key, model)
            return entry["response"], self._recorded_target(entry, targets), []
        failures: list[tuple[Target, ProviderError]] = []
        for target in targets:
            provider = self.provider(target.provider)
            call = provider.chat if operation == "chat" else provider.embed
            try:
                answer = await call(target.model, body)
            except ProviderError as exc:
                failures.append((target, exc))
                if not exc.retryable:
                    break
                continue
            if self.cassette is not None:
                self.cassette.record(key, _entry(target, answer))
            return answer, target, failures
        return None, targets[0], failures

    async def chat(self, body: Any, caller: Caller) -> tuple[dict[str, Any], GatewayCall]:
        """A chat completion (not streamed) and its ledger row.

        Raises:
            GatewayError: a bad request, an unknown or refused model, every target failed.
            BudgetExceededError: the key is over a limit.
        """
        request = chat_request(body)
        return await self._admitted(
            "chat",
            request.model,
            caller,
            chat_reservation(request),
            lambda admitted, targets, t0: self._chat(request, admitted, targets, t0),
        )

    async def _chat(
        self, request: ChatRequest, caller: Caller, targets: list[Target], t0: float
    ) -> tuple[dict[str, Any], GatewayCall]:
        created = self.clock.now()
        current = tracing.start(
            f"chat {request.model}",
            self._span_attributes("chat", request.model, caller),
            parent=caller.trace_parent,
        )
        answer, target, failures = await self._answer("chat", request.model, request.body, targets)
        if answer is None:
            row, error = self._failed(
                caller, "chat", request.model, failures, created, t0, request.messages
            )
            await self.record(row)
            tracing.finish(current, {"error.type": error.error_code}, str(error))
            raise error
        message = (answer.get("choices") or [{}])[0].get("message") or {}
        input_tokens, output_tokens = _usage(answer, request, message.get("content") or "")
        row = GatewayCall(
            call_id=caller.row_id(),
            operation="chat",
            model_asked=request.model,
            model_answered=str(answer.get("model") or target.model),
            provider=target.provider.name,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost=target.price.cost(input_tokens, output_tokens),
            latency=time.perf_counter() - t0,
            ttft=None,
            status="ok",
            created_at=created,
            tries=len(failures) + 1,
            prompt=kept(self.config.prompts, request.messages),
            answer=kept(self.config.prompts, message),
            **caller.stamp(),
        )
        await self.record(row)
        tracing.finish(current, _result_attributes(target, row, answer))
        return answer, row

    def _recorded_target(self, entry: dict[str, Any], targets: list[Target]) -> Target:
        for target in targets:
            if target.label == entry.get("label"):
                return target
        provider = self.config.providers.get(str(entry.get("provider")), targets[0].provider)
        model = str(entry.get("model", targets[0].model))
        return Target(str(entry.get("label")), provider, model, self.config.price_of(model))

    async def stream(self, body: Any, caller: Caller) -> AsyncIterator[bytes]:
        """The server-sent events of a streamed chat completion.

        Targets are tried until one has sent the first part of its answer; only
        then does anything reach the caller. A stream cut after that ends with an
        error event and no ``[DONE]``.

        Raises:
            GatewayError, BudgetExceededError: as :meth:`chat`, before the first event.
        """
        request = chat_request(body)
        return await self._admitted(
            "chat",
            request.model,
            caller,
            chat_reservation(request),
            lambda admitted, targets, t0: self._stream(request, admitted, targets, t0),
        )

    async def _stream(
        self, request: ChatRequest, caller: Caller, targets: list[Target], t0: float
    ) -> AsyncIterator[bytes]:
        created = self.clock.now()
        current = tracing.start(
            f"chat {request.model}",
            self._span_attributes("chat", request.model, caller),
            parent=caller.trace_parent,
        )
        failures: list[tuple[Target, ProviderError]] = []
        key = cassette_key("chat", request.model, request.body, True) if self.cassette else ""
        if self.cassette is not None and self.cassette.replaying:
            entry = self.cassette.lookup(key, request.model)
            attempts = [(self._recorded_target(entry, targets), replayed(entry["chunks"]))]
        else:
            attempts = [
                (t, self.provider(t.provider).stream(t.model, request.body)) for t in targets
            ]
        for target, iterator in attempts:
            buffered: list[dict[str, Any]] = []
            try:
                async for chunk in _until_meaningful(iterator):
                    buffered.append(chunk)
            except ProviderError as exc:
                await _close(iterator)
                failures.append((target, exc))
                if not exc.retryable:
                    break
                continue
            relay = Relay(
                gateway=self,
                request=request,
                caller=caller,
                target=target,
                iterator=iterator,
                buffered=buffered,
                tries=len(failures) + 1,
                t0=t0,
                created=created,
                span=current,
                cassette_key=key if self.cassette and not self.cassette.replaying else None,
            )
            return relay.events()
        row, error = self._failed(
            caller, "chat", request.model, failures, created, t0, request.messages, True
        )
        await self.record(row)
        tracing.finish(current, {"error.type": error.error_code}, str(error))
        raise error

    # -- embeddings ----------------------------------------------------------------
    async def embed(self, body: Any, caller: Caller) -> tuple[dict[str, Any], GatewayCall]:
        """Embeddings and their ledger row (raises as :meth:`chat`)."""
        request = embed_request(body)
        return await self._admitted(
            "embeddings",
            request.model,
            caller,
            (estimate_tokens([{"content": request.body["input"]}], "")[0], 0),
            lambda admitted, targets, t0: self._embed(request, admitted, targets, t0),
        )

    async def _embed(
        self, request: EmbedRequest, caller: Caller, targets: list[Target], t0: float
    ) -> tuple[dict[str, Any], GatewayCall]:
        created = self.clock.now()
        current = tracing.start(
            f"embeddings {request.model}",
            self._span_attributes("embeddings", request.model, caller),
            parent=caller.trace_parent,
        )
        answer, target, failures = await self._answer(
            "embeddings", request.model, request.body, targets
        )
        inputs = request.body["input"]
        if answer is None:
            row, error = self._failed(
                caller, "embeddings", request.model, failures, created, t0, inputs
            )
            await self.record(row)
            tracing.finish(current, {"error.type": error.error_code}, str(error))
            raise error
        usage = answer.get("usage") or {}
        tokens = _int(usage.get("prompt_tokens"))
        if tokens is None:
            tokens = estimate_tokens([{"content": inputs}], "")[0]
        row = GatewayCall(
            call_id=caller.row_id(),
            operation="embeddings",
            model_asked=request.model,
            model_answered=str(answer.get("model") or target.model),
            provider=target.provider.name,
            input_tokens=tokens,
            output_tokens=0,
            cost=target.price.cost(tokens, 0),
            latency=time.perf_counter() - t0,
            ttft=None,
            status="ok",
            created_at=created,
            tries=len(failures) + 1,
            prompt=kept(self.config.prompts, inputs),
            answer=kept(self.config.prompts, f"{len(answer.get('data') or [])} vectors"),
            **caller.stamp(),
        )
        await self.record(row)
        tracing.finish(current, _result_attributes(target, row, answer))
        return answer, row


async def _until_meaningful(
    iterator: AsyncIterator[dict[str, Any]],
) -> AsyncIterator[dict[str, Any]]:
    """The chunks of ``iterator`` up to and including its first meaningful one."""
    while True:
        try:
            chunk = await anext(iterator)
        except StopAsyncIteration:
            return
        yield chunk
        if meaningful(chunk):
            return


async def _close(iterator: AsyncIterator[dict[str, Any]]) -> None:
    closer = getattr(iterator, "aclose", None)
    if closer is not None:
        try:
            await closer()
        except Exception:  # a provider's stream that fails while closing has nothing to add
            return


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _usage(answer: dict[str, Any], request: ChatRequest, text: Any) -> tuple[int, int]:
    usage = answer.get("usage") or {}
    prompt, completion = _int(usage.get("prompt_tokens")), _int(usage.get("completion_tokens"))
    if prompt is None or completion is None:
        shown = text if isinstance(text, str) else json.dumps(text)
        estimated = estimate_tokens(request.messages, shown)
        prompt = estimated[0] if prompt is None else prompt
        completion = estimated[1] if completion is None else completion
    return prompt, completion


def _entry(target: Target, answer: dict[str, Any]) -> dict[str, Any]:
    return {
        "label": target.label,
        "provider": target.provider.name,
        "model": target.model,
        "response": answer,
    }


def _result_attributes(target: Target, row: GatewayCall, answer: dict[str, Any]) -> dict[str, Any]:
    reasons = [c.get("finish_reason") for c in answer.get("choices") or () if isinstance(c, dict)]
    return {
        "gen_ai.provider.name": target.provider.type,
        "gen_ai.response.model": row.model_answered,
        "gen_ai.response.id": answer.get("id"),
        "gen_ai.response.finish_reasons": [r for r in reasons if r] or None,
        "gen_ai.usage.input_tokens": row.input_tokens,
        "gen_ai.usage.output_tokens": row.output_tokens,
        "keepgoing.gateway.provider": target.provider.name,
        "keepgoing.gateway.cost_usd": row.cost,
        "keepgoing.gateway.tries": row.tries,
    }
