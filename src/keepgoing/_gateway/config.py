"""The gateway's configuration: the ``[gateway]`` table of ``keepgoing.toml``.

::

    [gateway]
    prompts = "store"            # store | redact | off: what the ledger keeps of messages
    timeout = 60                 # seconds per provider call

    [gateway.providers.openai]
    type = "openai"              # any OpenAI-compatible base URL
    base_url = "https://api.openai.com/v1"
    api_key_env = "OPENAI_API_KEY"   # the key is read from this variable, never stored

    [gateway.models.fast]
    provider = "openai"
    model = "gpt-4o-mini"
    fallbacks = ["claude/claude-3-5-haiku-latest", "scripted"]
    price = { input = 0.15, output = 0.60 }   # US dollars per million tokens

A model name in a request is an alias from ``[gateway.models]``, or
``<provider>/<model>`` for any configured provider. ``scripted`` (the offline
scripted model) is always there unless the file defines its own.

Every error names the key and the file: ``ConfigurationError``.
"""

from __future__ import annotations

import math
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from keepgoing._gateway.prices import DEFAULT_PRICES, Price
from keepgoing.errors import ConfigurationError

__all__ = [
    "CONFIG_ENV",
    "SCRIPTED_MODEL",
    "GatewayConfig",
    "ModelRoute",
    "ProviderConfig",
    "Target",
    "load_config",
    "parse_config",
]

CONFIG_ENV = "KEEPGOING_CONFIG"
SCRIPTED_MODEL = "keepgoing-scripted-1"
PROVIDER_TYPES = ("openai", "anthropic", "scripted")
PromptSetting = Literal["store", "redact", "off"]
_DEFAULT_BASE = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}


@dataclass(frozen=True)
class ProviderConfig:
    """One provider. ``api_key_env`` names the environment variable holding its key."""

    name: str
    type: str
    base_url: str = ""
    api_key_env: str | None = None
    timeout: float = 60.0
    max_retries: int = 0

    def api_key(self) -> str | None:
        """The key, read from the environment on each call (never kept in the config)."""
        return os.environ.get(self.api_key_env) if self.api_key_env else None


@dataclass(frozen=True)
class ModelRoute:
    """An alias: the provider model it names, what to try after it, and its price."""

    name: str
    provider: str
    model: str
    fallbacks: tuple[str, ...] = ()
    price: Price | None = None


@dataclass(frozen=True)
class Target:
    """One thing to try for a request: a provider and the model name it knows."""

    label: str  # the alias or ``provider/model`` that named it
    provider: ProviderConfig
    model: str
    price: Price


@dataclass(frozen=True)
class GatewayConfig:
    providers: dict[str, ProviderConfig]
    models: dict[str, ModelRoute]
    prices: dict[str, Price] = field(default_factory=dict)
    prompts: PromptSetting = "store"
    timeout: float = 60.0
    source: str = "(built-in defaults)"

    def price_of(self, model: str) -> Price:
        """The configured price of provider model ``model``, else the default, else free."""
        found = self.prices.get(model) or DEFAULT_PRICES.get(model)
        return found if found is not None else Price(0.0, 0.0)

    def model_names(self) -> list[str]:
        return sorted(self.models)

    def resolve(self, name: str) -> list[Target]:
        """The targets to try for model ``name``, in order (its fallbacks after it).

        Raises:
            KeyError: no alias or ``provider/model`` has that name (the message lists them).
        """
        targets: list[Target] = []
        seen: set[str] = set()

        def add(label: str, depth: int) -> None:
            if label in seen or depth > 8:
                return
            seen.add(label)
            route = self.models.get(label)
            if route is not None:
                provider = self.providers[route.provider]
                price = route.price or self.price_of(route.model)
                targets.append(Target(label, provider, route.model, price))
                for fallback in route.fallbacks:
                    add(fallback, depth + 1)
                return
            provider_name, slash, model = label.partition("/")
            provider_config = self.providers.get(provider_name)
            if slash and model and provider_config is not None:
                targets.append(Target(label, provider_config, model, self.price_of(model)))
                return
            if depth == 0:
                raise KeyError(label)

        add(name, 0)
        return targets


def load_config(path: str | os.PathLike[str] | None = None) -> GatewayConfig:
    """The gateway configuration from ``path``, else ``KEEPGOING_CONFIG``, else
    ``./keepgoing.toml`` if it exists, else the built-in defaults (the scripted model).

    Raises:
        ConfigurationError: the file cannot be read or parsed, or a key is wrong.
    """
    chosen = path or os.environ.get(CONFIG_ENV)
    if chosen is None:
        if not Path("keepgoing.toml").is_file():
            return parse_config({})
        chosen = "keepgoing.toml"
    where = str(chosen)
    try:
        text = Path(chosen).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"cannot read the configuration {where}: {exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"{where} is not valid TOML: {exc}") from None
    return parse_config(data, source=where)


def parse_config(data: dict[str, Any], *, source: str = "(built-in defaults)") -> GatewayConfig:
    """Check and build the configuration from parsed TOML (``data["gateway"]``).

    Raises:
        ConfigurationError: a wrong key, type or reference (the message names it).
    """
    gateway = data.get("gateway", {})
    _table(gateway, "gateway", source)
    _known(gateway, "gateway", {"prompts", "timeout", "providers", "models", "prices"}, source)
    prompts = gateway.get("prompts", "store")
    if prompts not in ("store", "redact", "off"):
        raise _bad(source, "gateway.prompts", f"must be store, redact or off, not {prompts!r}")
    timeout = _number(gateway.get("timeout", 60.0), "gateway.timeout", source, positive=True)
    providers: dict[str, ProviderConfig] = {}
    raw_providers = gateway.get("providers", {})
    _table(raw_providers, "gateway.providers", source)
    for name, raw in raw_providers.items():
        providers[name] = _provider(name, raw, timeout, source)
    if "scripted" not in providers:
        providers["scripted"] = ProviderConfig("scripted", "scripted", timeout=timeout)
    prices = {}
    raw_prices = gateway.get("prices", {})
    _table(raw_prices, "gateway.prices", source)
    for model, raw in raw_prices.items():
        prices[model] = _price(raw, f"gateway.prices.{model!r}", source)
    models: dict[str, ModelRoute] = {}
    raw_models = gateway.get("models", {})
    _table(raw_models, "gateway.models", source)
    for name, raw in raw_models.items():
        models[name] = _route(name, raw, providers, source)
    if "scripted" not in models:
        models["scripted"] = ModelRoute("scripted", "scripted", SCRIPTED_MODEL)
    config = GatewayConfig(providers, models, prices, prompts, timeout, source)
    for route in models.values():
        for fallback in route.fallbacks:
            try:
                config.resolve(fallback)
            except KeyError:
                raise _bad(
                    source,
                    f"gateway.models.{route.name}.fallbacks",
                    f"names {fallback!r}, which is neither a model alias nor <provider>/<model> "
                    f"of a configured provider ({', '.join(sorted(providers))})",
                ) from None
    return config


def _provider(name: str, raw: Any, timeout: float, source: str) -> ProviderConfig:
    where = f"gateway.providers.{name}"
    _table(raw, where, source)
    _known(
        raw, where, {"type", "base_url", "api_key_env", "api_key", "timeout", "max_retries"}, source
    )
    if "api_key" in raw:
        raise _bad(
            source,
            f"{where}.api_key",
            "keys are never written in the configuration: put the key in an environment "
            "variable and name it with api_key_env",
        )
    kind = raw.get("type", name if name in PROVIDER_TYPES else None)
    if kind not in PROVIDER_TYPES:
        raise _bad(
            source, f"{where}.type", f"must be one of {', '.join(PROVIDER_TYPES)}, not {kind!r}"
        )
    base_url = raw.get("base_url", _DEFAULT_BASE.get(kind, ""))
    if not isinstance(base_url, str) or (
        kind != "scripted" and not base_url.startswith(("http://", "https://"))
    ):
        raise _bad(source, f"{where}.base_url", f"must be an http(s) URL, not {base_url!r}")
    key_env = raw.get("api_key_env")
    if key_env is not None and (not isinstance(key_env, str) or not key_env):
        raise _bad(source, f"{where}.api_key_env", "must name an environment variable")
    retries = raw.get("max_retries", 0)
    if not isinstance(retries, int) or isinstance(retries, bool) or not 0 <= retries <= 10:
        raise _bad(source, f"{where}.max_retries", f"must be an integer 0..10, not {retries!r}")
    return ProviderConfig(
        name=name,
        type=kind,
        base_url=base_url.rstrip("/"),
        api_key_env=key_env,
        timeout=_number(raw.get("timeout", timeout), f"{where}.timeout", source, positive=True),
        max_retries=retries,
    )


def _route(name: str, raw: Any, providers: dict[str, ProviderConfig], source: str) -> ModelRoute:
    where = f"gateway.models.{name}"
    _table(raw, where, source)
    _known(raw, where, {"provider", "model", "fallbacks", "price"}, source)
    provider = raw.get("provider")
    if provider not in providers:
        raise _bad(
            source,
            f"{where}.provider",
            f"names {provider!r}; configured providers: {', '.join(sorted(providers))}",
        )
    model = raw.get("model", SCRIPTED_MODEL if providers[provider].type == "scripted" else None)
    if not isinstance(model, str) or not model:
        raise _bad(source, f"{where}.model", "must be the provider's model name (a string)")
    fallbacks = raw.get("fallbacks", [])
    if not isinstance(fallbacks, list) or not all(isinstance(f, str) for f in fallbacks):
        raise _bad(source, f"{where}.fallbacks", "must be a list of model names")
    price = _price(raw["price"], f"{where}.price", source) if "price" in raw else None
    return ModelRoute(name, provider, model, tuple(fallbacks), price)


def _price(raw: Any, where: str, source: str) -> Price:
    _table(raw, where, source)
    _known(raw, where, {"input", "output"}, source)
    return Price(
        input=_number(raw.get("input", 0.0), f"{where}.input", source),
        output=_number(raw.get("output", 0.0), f"{where}.output", source),
    )


def _number(value: Any, where: str, source: str, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _bad(source, where, f"must be a number, not {value!r}")
    if value < 0 or (positive and value == 0):
        raise _bad(source, where, f"must be {'above' if positive else 'at least'} 0, not {value!r}")
    return float(value)


def _table(value: Any, where: str, source: str) -> None:
    if not isinstance(value, dict):
        raise _bad(source, where, f"must be a table, not {type(value).__name__}")


def _known(table: dict[str, Any], where: str, keys: set[str], source: str) -> None:
    unknown = sorted(set(table) - keys)
    if unknown:
        raise _bad(
            source,
            f"{where}.{unknown[0]}",
            f"is not a known key; {where} takes {', '.join(sorted(keys))}",
        )


def _bad(source: str, key: str, problem: str) -> ConfigurationError:
    return ConfigurationError(f"{source}: {key} {problem}")
