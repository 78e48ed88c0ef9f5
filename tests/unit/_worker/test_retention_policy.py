"""The retention policy: [retention] in keepgoing.toml, KEEPGOING_RETENTION, a workflow's own."""

from __future__ import annotations

from pathlib import Path

import pytest

from keepgoing import workflow
from keepgoing._worker.retention import DAY, RetentionPolicy, load_retention, parse_retention
from keepgoing.errors import ConfigurationError, InvalidDurationError


def test_off_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KEEPGOING_CONFIG", raising=False)
    monkeypatch.delenv("KEEPGOING_RETENTION", raising=False)

    policy = load_retention()

    assert policy == RetentionPolicy() and not policy.on and policy.audit == 365 * DAY


def test_the_file_and_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "keepgoing.toml"
    path.write_text('[retention]\nruns = "30d"\narchive = "arch"\naudit = "400d"\nbatch = 50\n')
    monkeypatch.delenv("KEEPGOING_RETENTION", raising=False)

    policy = load_retention(path)
    monkeypatch.setenv("KEEPGOING_RETENTION", "10m")
    overridden = load_retention(path)
    monkeypatch.setenv("KEEPGOING_RETENTION", "off")
    off = load_retention(path)

    assert (policy.runs, policy.archive, policy.audit, policy.batch) == (
        30 * DAY,
        "arch",
        400 * DAY,
        50,
    )
    assert overridden.runs == 600 and overridden.archive == "arch"
    assert off.runs is None


@pytest.mark.parametrize(
    ("table", "named"),
    [
        ({"runs": "soon"}, "[retention] runs"),
        ({"runs": "0s"}, "longer than zero"),
        ({"runs": -3}, "[retention] runs"),
        ({"keep": "1d"}, "unknown key"),
        ({"archive": ""}, "archive"),
        ({"batch": 0}, "batch"),
        ({"batch": True}, "batch"),
    ],
)
def test_bad_values_are_named(table: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigurationError, match=named.replace("[", r"\[").replace("]", r"\]")):
        parse_retention({"retention": table})


def test_a_bad_environment_value_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KEEPGOING_CONFIG", raising=False)
    monkeypatch.setenv("KEEPGOING_RETENTION", "forever")

    with pytest.raises(ConfigurationError, match="KEEPGOING_RETENTION"):
        load_retention()


def test_a_workflow_carries_its_own_policy() -> None:
    @workflow(name="retention.kept_a_week", retention="7d")
    async def kept() -> None:
        return None

    @workflow(name="retention.default")
    async def default() -> None:
        return None

    assert kept.retention == 7 * DAY and default.retention is None
    with pytest.raises(InvalidDurationError, match="retention"):
        workflow(name="retention.bad", retention="a while")(kept.fn)
