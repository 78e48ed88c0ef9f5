"""Building ledger rows: what is kept of a call's messages, and token estimates."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from keepgoing._gateway.providers.scripted import count_tokens
from keepgoing._store.gateway_protocol import GatewayCall, GatewayKey

__all__ = ["Caller", "costless_row", "estimate_tokens", "kept", "new_call_id"]


@dataclass(frozen=True)
class Caller:
    """Who makes a call, and the task attempt it is made from (if any)."""

    key_id: str = ""
    key: GatewayKey | None = None
    run_id: str | None = None
    step: int | None = None
    attempt: int | None = None
    operation_id: str | None = None
    trace_parent: dict[str, str] | None = None  # W3C trace headers sent by the caller
    #: The id of the call's reservation (its pending ledger row), once it is admitted.
    call_id: str | None = None

    def row_id(self) -> str:
        """The id the call's ledger row is written under: its reservation's, if any."""
        return self.call_id or new_call_id()

    def stamp(self) -> dict[str, Any]:
        """The ledger fields that tie a call to its step."""
        return {
            "key_id": self.key_id,
            "run_id": self.run_id,
            "step": self.step,
            "attempt": self.attempt,
            "operation_id": self.operation_id,
            "attempt_state": "open" if self.run_id and self.attempt is not None else "none",
        }


def new_call_id() -> str:
    return "gc_" + uuid.uuid4().hex


def _redact(value: Any) -> Any:
    if isinstance(value, str):
        return f"[redacted: {len(value)} characters]"
    if isinstance(value, list):
        return [_redact(v) for v in value]
    if isinstance(value, dict):
        return {
            k: (v if k in ("role", "type", "name", "id", "tool_call_id") else _redact(v))
            for k, v in value.items()
        }
    return value


def kept(setting: str, value: Any) -> str | None:
    """What the ledger keeps of ``value`` (messages or an answer) under the ``prompts`` setting.

    JSON text; a string the store could not hold (a lone surrogate) is written with
    JSON's own escapes instead, so the row is always written."""
    if setting == "off" or value is None:
        return None
    shown = _redact(value) if setting == "redact" else value
    text = json.dumps(shown, ensure_ascii=False, separators=(",", ":"))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(shown, ensure_ascii=True, separators=(",", ":"))
    return text


def estimate_tokens(messages: list[dict[str, Any]], answer_text: str) -> tuple[int, int]:
    """Input and output tokens, estimated, for a provider that reported no usage."""
    prompt = 3 + sum(4 + count_tokens(json.dumps(m.get("content") or "")) for m in messages)
    return prompt, count_tokens(answer_text)


def costless_row(
    caller: Caller,
    operation: str,
    model: str,
    error: str,
    created: float,
    latency: float,
    status: str = "refused",
) -> GatewayCall:
    """The row of a call that cost nothing: refused before any provider was called, or
    (``status="error"``) one whose reservation is released after it failed."""
    return GatewayCall(
        call_id=caller.row_id(),
        operation=operation,
        model_asked=model,
        model_answered=None,
        provider=None,
        input_tokens=0,
        output_tokens=0,
        cost=0.0,
        latency=latency,
        ttft=None,
        status=status,
        created_at=created,
        error=error[:2000],
        tries=0,
        **caller.stamp(),
    )
