"""Checking OpenAI-shaped request bodies before anything is sent to a provider.

A body JSON accepts but a provider would choke on (a wrong type, an unknown
role, a tool without a name) is refused here with a 400 naming the field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from keepgoing.errors import GatewayError

__all__ = ["ChatRequest", "EmbedRequest", "bad_request", "chat_request", "embed_request"]

ROLES = ("system", "developer", "user", "assistant", "tool")
MAX_MESSAGES = 10_000
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
            isinstance(value, bool) or not isinstance(value, int) or value < 0
        ):
            raise bad_request(f"{name} must be a non-negative integer, not {value!r}", name)
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


def _content(value: Any, where: str) -> None:
    if value is None or isinstance(value, str):
        return
    if isinstance(value, list) and all(isinstance(p, dict) and "type" in p for p in value):
        return
    raise bad_request(f"{where} must be a string, null or a list of content parts", where)


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
    if not isinstance(message.get("tool_call_id", ""), str):
        raise bad_request(f"{where}.tool_call_id must be a string", where)


def _tools(tools: Any) -> None:
    if tools is None:
        return
    if not isinstance(tools, list):
        raise bad_request("tools must be a list", "tools")
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise bad_request(f"tools[{i}] must be {{type: function, function: {{name, ...}}}}")
        parameters = function.get("parameters")
        if parameters is not None and not isinstance(parameters, dict):
            raise bad_request(f"tools[{i}].function.parameters must be a JSON schema object")


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
    forwarded = {k: v for k, v in body.items() if k != "model"}
    return EmbedRequest(model=model, body=forwarded)
