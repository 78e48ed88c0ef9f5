"""``keepgoing.toml``'s ``[gateway]`` table: what it accepts and the errors naming bad keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from keepgoing._gateway.config import SCRIPTED_MODEL, load_config, parse_config
from keepgoing._gateway.prices import Price
from keepgoing.errors import ConfigurationError

GOOD = {
    "gateway": {
        "prompts": "redact",
        "providers": {
            "oa": {"type": "openai", "base_url": "http://127.0.0.1:1/v1", "api_key_env": "K"},
            "claude": {"type": "anthropic"},
        },
        "models": {
            "fast": {
                "provider": "oa",
                "model": "gpt-4o-mini",
                "fallbacks": ["claude/claude-3-5-haiku-latest", "scripted"],
            },
            "cheap": {"provider": "oa", "model": "tiny", "price": {"input": 1, "output": 2}},
        },
        "prices": {"tiny": {"input": 0.5, "output": 0.5}},
    }
}


def test_aliases_resolve_with_their_fallbacks_in_order() -> None:
    config = parse_config(GOOD)
    targets = config.resolve("fast")
    assert [(t.label, t.provider.name, t.model) for t in targets] == [
        ("fast", "oa", "gpt-4o-mini"),
        ("claude/claude-3-5-haiku-latest", "claude", "claude-3-5-haiku-latest"),
        ("scripted", "scripted", SCRIPTED_MODEL),
    ]
    assert targets[0].price == Price(0.15, 0.60)  # a default price
    assert config.resolve("cheap")[0].price == Price(1, 2)  # the alias's own price wins
    assert config.resolve("oa/tiny")[0].price == Price(0.5, 0.5)  # then [gateway.prices]
    assert config.prompts == "redact"
    assert config.providers["claude"].base_url == "https://api.anthropic.com"
    with pytest.raises(KeyError):
        config.resolve("nope")


def test_with_no_file_only_the_scripted_model_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KEEPGOING_CONFIG", raising=False)
    config = load_config()
    assert config.model_names() == ["scripted"]
    assert config.resolve("scripted")[0].price == Price(0, 0)


@pytest.mark.parametrize(
    ("table", "needle"),
    [
        ({"gateway": {"prompt": "store"}}, "gateway.prompt is not a known key"),
        ({"gateway": {"prompts": "maybe"}}, "gateway.prompts must be store, redact or off"),
        ({"gateway": {"timeout": "soon"}}, "gateway.timeout must be a number"),
        ({"gateway": {"timeout": 0}}, "gateway.timeout must be above 0"),
        ({"gateway": {"providers": {"x": {"type": "grpc"}}}}, "gateway.providers.x.type"),
        (
            {"gateway": {"providers": {"x": {"type": "openai", "bse_url": "http://a"}}}},
            "gateway.providers.x.bse_url is not a known key",
        ),
        (
            {"gateway": {"providers": {"x": {"type": "openai", "base_url": "ftp://a"}}}},
            "gateway.providers.x.base_url must be an http(s) URL",
        ),
        (
            {"gateway": {"providers": {"x": {"type": "openai", "api_key": "sk-123"}}}},
            "keys are never written in the configuration",
        ),
        ({"gateway": {"models": {"m": {"provider": "ghost"}}}}, "gateway.models.m.provider"),
        (
            {"gateway": {"models": {"m": {"provider": "scripted", "fallbacks": ["ghost"]}}}},
            "gateway.models.m.fallbacks names 'ghost'",
        ),
        (
            {"gateway": {"models": {"m": {"provider": "scripted", "price": {"input": -1}}}}},
            "gateway.models.m.price.input must be at least 0",
        ),
        ({"gateway": {"models": []}}, "gateway.models must be a table"),
    ],
)
def test_bad_keys_are_named(table: dict, needle: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        parse_config(table, source="kg.toml")
    assert needle in str(caught.value) and str(caught.value).startswith("kg.toml: ")


def test_a_file_that_is_not_toml(tmp_path: Path) -> None:
    path = tmp_path / "keepgoing.toml"
    path.write_text("[gateway\n")
    with pytest.raises(ConfigurationError, match="is not valid TOML"):
        load_config(path)
    with pytest.raises(ConfigurationError, match="cannot read"):
        load_config(tmp_path / "missing.toml")
