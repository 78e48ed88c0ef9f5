"""Checking OpenAI-shaped request bodies before anything is sent to a provider.

A body JSON accepts but a provider would choke on (a wrong type, an unknown
role, a tool without a name) is refused here with a 400 naming the field.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from keepgoing._gateway.ledger import estimate_tokens
from keepgoing.errors import GatewayError

__all__ = [
    "MAX_DEPTH",
    "MAX_DIMENSIONS",
    "MAX_EMBEDDING_VALUES",
    "ChatRequest",
    "EmbedRequest",
    "bad_request",
    "chat_request",
    "embed_request",
    "parse_body",
]

ROLES = ("system", "developer", "user", "assistant", "tool")
MAX_MESSAGES = 10_000
#: The deepest a body may nest (objects and arrays): a tool's JSON schema is a few levels.
MAX_DEPTH = 64
#: The most dimensions an embedding may ask for (the largest models have 3,072), and the
#: most values one embeddings answer may hold (inputs x dimensions).
MAX_DIMENSIONS = 8192
MAX_EMBEDDING_VALUES = 2**21
_MAX_INT = 2**31 - 1
_CHOICES = ("none", "auto", "required")
_INT_PARAMS = ("max_tokens", "max_completion_tokens", "n", "seed", "top_logprobs", "dimensions")
_NUMBER_PARAMS = ("temperature", "top_p", "presence_penalty", "frequency_penalty")
#: Parameters the gateway reads itself and never forwards.
OWN_PARAMS = ("model", "messages", "stream", "stream_options", "input")


@dataclass(frozen=True)
class ChatRequest:
    model: str
    stream: bool
    body: dict[str, Any]  # what providers get (without model and stream)

    @property
    def messages(self) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = self.body["messages"]
        return messages


@dataclass(frozen=True)
class EmbedRequest:
    model: str
    body: dict[str, Any]


def bad_request(message: str, param: str | None = None) -> GatewayError:
    return GatewayError(message, status=400, error_code="invalid_request_error", param=param)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"{text} is beyond the range of a 64-bit float")
    return value


def parse_body(raw: bytes) -> Any:
    """The JSON body, refused (400) unless it is plain JSON: no ``NaN`` or ``Infinity``
    (no provider takes them), no number past a float's range, at most :data:`MAX_DEPTH`
    levels deep.

    Raises:
        GatewayError: status 400 ``invalid_json``.
    """
    try:
        body = json.loads(raw, parse_constant=_no_constant, parse_float=_finite)
    except RecursionError:
        body = None
        deep = True
    except (ValueError, UnicodeDecodeError) as exc:
        reason = str(exc) if "JSON number" in str(exc) or "range" in str(exc) else ""
        raise GatewayError(
            "the request body is not valid JSON" + (f" ({reason})" if reason else ""),
            status=400,
            error_code="invalid_json",
        ) from None
    else:
        deep = _too_deep(body)
    if deep:
        raise GatewayError(
            f"the request body nests deeper than {MAX_DEPTH} levels",
            status=400,
            error_code="invalid_json",
        )
    return body


def _too_deep(value: Any) -> bool:
    level: list[Any] = [value]
    for _ in range(MAX_DEPTH + 1):
        nested: list[Any] = []
        for item in level:
            if isinstance(item, dict):
                nested.extend(v for v in item.values() if isinstance(v, dict | list))
            elif isinstance(item, list):
                nested.extend(v for v in item if isinstance(v, dict | list))
        if not nested:
            return False
        level = nested
    return True


def _model(body: Any) -> str:
    if not isinstance(body, dict):
        raise bad_request(f"the request body must be a JSON object, not {type(body).__name__}")
    model = body.get("model")
    if not isinstance(model, str) or not model.strip() or len(model) > 200:
        raise bad_request("model must be a model name (a string of 1-200 characters)", "model")
    return model


def _params(body: dict[str, Any], ints: tuple[str, ...] = _INT_PARAMS) -> None:
    for name in ints:
        value = body.get(name)
        if isinstance(value, float) and value.is_integer():
            value = body[name] = int(value)  # JSON's 3.0 is the integer 3
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_INT
        ):
            raise bad_request(
                f"{name} must be an integer from 0 to {_MAX_INT}, not {value!r}", name
            )
    if ints != _INT_PARAMS:
        return
    for name in _NUMBER_PARAMS:
        value = body.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise bad_request(f"{name} must be a number, not {value!r}", name)
    stop = body.get("stop")
    if stop is not None and not (
        isinstance(stop, str) or (isinstance(stop, list) and all(isinstance(s, str) for s in stop))
    ):
        raise bad_request("stop must be a string or a list of strings", "stop")
    choice = body.get("tool_choice")
    if choice is not None and choice not in _CHOICES:
        function = choice.get("function") if isinstance(choice, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise bad_request(
                "tool_choice must be none, auto, required or "
                '{"type": "function", "function": {"name": ...}}',
                "tool_choice",
            )
    for name in ("stream_options", "response_format", "metadata", "logit_bias"):
        if body.get(name) is not None and not isinstance(body[name], dict):
            raise bad_request(f"{name} must be an object", name)
    if body.get("user") is not None and not isinstance(body["user"], str):
        raise bad_request("user must be a string", "user")


def _content(value: Any, where: str) -> None:
    if value is None or isinstance(value, str):
        return
    if isinstance(value, list) and all(
        isinstance(p, dict)
        and isinstance(p.get("type"), str)
        and (p["type"] != "text" or isinstance(p.get("text"), str))
        for p in value
    ):
        return
    raise bad_request(
        f"{where} must be a string, null or a list of content parts "
        '(objects with a string "type"; a text part\'s "text" a string)',
        where,
    )


def _message(message: Any, i: int) -> None:
    where = f"messages[{i}]"
    if not isinstance(message, dict):
        raise bad_request(f"{where} must be an object", where)
    role = message.get("role")
    if role not in ROLES:
        raise bad_request(f"{where}.role must be one of {', '.join(ROLES)}, not {role!r}", where)
    _content(message.get("content"), f"{where}.content")
    calls = message.get("tool_calls")
    if calls is not None:
        if not isinstance(calls, list):
            raise bad_request(f"{where}.tool_calls must be a list", where)
        for j, call in enumerate(calls):
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                raise bad_request(f"{where}.tool_calls[{j}] needs function.name", where)
            if not isinstance(function.get("arguments", ""), str):
                raise bad_request(f"{where}.tool_calls[{j}].function.arguments must be a string")
            if not isinstance(call.get("id", ""), str):
                raise bad_request(f"{where}.tool_calls[{j}].id must be a string", where)
    for name in ("tool_call_id", "name"):
        if not isinstance(message.get(name, ""), str):
            raise bad_request(f"{where}.{name} must be a string", where)


def _tools(tools: Any) -> None:
    if tools is None:
        return
    if not isinstance(tools, list):
        raise bad_request("tools must be a list", "tools")
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise bad_request(f"tools[{i}] must be {{type: function, function: {{name, ...}}}}")
        if not isinstance(function.get("description", ""), str):
            raise bad_request(f"tools[{i}].function.description must be a string", "tools")
        parameters = function.get("parameters")
        if parameters is not None:
            _schema(parameters, f"tools[{i}].function.parameters")


def _schema(schema: Any, where: str) -> None:
    """A JSON schema's shape, as far as providers read it: an object whose
    ``properties`` is an object of schemas, ``required`` a list of names, ``items`` a
    schema, ``enum`` a list and ``type`` a name (or a list of names)."""
    if not isinstance(schema, dict):
        raise bad_request(f"{where} must be a JSON schema object", "tools")
    kind = schema.get("type")
    if kind is not None and not (
        isinstance(kind, str) or (isinstance(kind, list) and all(isinstance(k, str) for k in kind))
    ):
        raise bad_request(f"{where}.type must be a type name or a list of them", "tools")
    properties = schema.get("properties")
    if properties is not None:
        if not isinstance(properties, dict):
            raise bad_request(f"{where}.properties must be an object of schemas", "tools")
        for name, inner in properties.items():
            _schema(inner, f"{where}.properties.{name}")
    required = schema.get("required")
    if required is not None and not (
        isinstance(required, list) and all(isinstance(r, str) for r in required)
    ):
        raise bad_request(f"{where}.required must be a list of property names", "tools")
    if schema.get("items") is not None:
        _schema(schema["items"], f"{where}.items")
    if schema.get("enum") is not None and not isinstance(schema["enum"], list):
        raise bad_request(f"{where}.enum must be a list", "tools")


def chat_request(body: Any) -> ChatRequest:
    """The checked chat request.

    Raises:
        GatewayError: status 400, naming the bad field.
    """
    model = _model(body)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad_request("messages must be a non-empty list", "messages")
    if len(messages) > MAX_MESSAGES:
        raise bad_request(f"at most {MAX_MESSAGES:,} messages per request", "messages")
    for i, message in enumerate(messages):
        _message(message, i)
    _tools(body.get("tools"))
    _params(body)
    stream = body.get("stream", False)
    if stream is not None and not isinstance(stream, bool):
        raise bad_request(f"stream must be true or false, not {stream!r}", "stream")
    forwarded = {k: v for k, v in body.items() if k not in OWN_PARAMS}
    forwarded["messages"] = messages
    return ChatRequest(model=model, stream=bool(stream), body=forwarded)


#: The output tokens a call that names no ``max_tokens`` reserves against its key's
#: budget: a budget is overspent by at most one call's reservation, as long as answers
#: stay within it (set ``max_tokens`` to bound it exactly).
RESERVED_OUTPUT_TOKENS = 4096


def chat_reservation(request: ChatRequest) -> tuple[int, int]:
    """The input and output tokens a chat call holds against its key's limits while it
    runs: its prompt, estimated, and its ``max_tokens`` (or :data:`RESERVED_OUTPUT_TOKENS`)
    for each of its ``n`` choices."""
    body = request.body
    limit = body.get("max_completion_tokens") or body.get("max_tokens")
    output = limit if isinstance(limit, int) and limit > 0 else RESERVED_OUTPUT_TOKENS
    n = body.get("n")
    choices = n if isinstance(n, int) and n > 0 else 1
    return estimate_tokens(request.messages, "")[0], output * choices


def embed_request(body: Any) -> EmbedRequest:
    """The checked embeddings request.

    Raises:
        GatewayError: status 400, naming the bad field.
    """
    model = _model(body)
    value = body.get("input")
    ok = (isinstance(value, str) and value != "") or (
        isinstance(value, list)
        and 0 < len(value) <= 2048
        and all(isinstance(v, str) and v != "" for v in value)
    )
    if not ok:
        raise bad_request("input must be a non-empty string or a list of 1-2048 strings", "input")
    _params(body, ("dimensions",))
    dimensions = body.get("dimensions")
    if dimensions is not None:
        count = 1 if isinstance(value, str) else len(value)
        if not 1 <= dimensions <= MAX_DIMENSIONS:
            raise bad_request(
                f"dimensions must be from 1 to {MAX_DIMENSIONS:,}, not {dimensions:,}",
                "dimensions",
            )
        if count * dimensions > MAX_EMBEDDING_VALUES:
            raise bad_request(
                f"{count:,} inputs x {dimensions:,} dimensions is over the "
                f"{MAX_EMBEDDING_VALUES:,} values one request may ask for; send fewer inputs "
                "per request",
                "dimensions",
            )
    if body.get("encoding_format") not in (None, "float", "base64"):
        raise bad_request("encoding_format must be float or base64", "encoding_format")
    if body.get("user") is not None and not isinstance(body["user"], str):
        raise bad_request("user must be a string", "user")
    forwarded = {k: v for k, v in body.items() if k != "model"}
    return EmbedRequest(model=model, body=forwarded)
