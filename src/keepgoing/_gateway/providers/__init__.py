"""Model providers behind the gateway, one module each; :func:`make_provider` picks one."""

from __future__ import annotations

from keepgoing._gateway.config import ProviderConfig
from keepgoing._gateway.providers.anthropic import AnthropicProvider
from keepgoing._gateway.providers.base import Provider, ProviderError
from keepgoing._gateway.providers.openai import OpenAIProvider
from keepgoing._gateway.providers.scripted import ScriptedProvider

__all__ = ["Provider", "ProviderError", "make_provider"]


def make_provider(config: ProviderConfig) -> Provider:
    if config.type == "openai":
        return OpenAIProvider(config)
    if config.type == "anthropic":
        return AnthropicProvider(config)
    return ScriptedProvider(config)
