"""A replica's environment is built from an allowlist, never from the server's."""

from __future__ import annotations

from pathlib import Path

from keepgoing._groups.replica_env import ReplicaAccess, replica_environment
from keepgoing._procinfo import NONCE_ENV

SERVER = {
    "PATH": "/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_TIME": "en_GB.UTF-8",
    "HOME": "/root",
    "XDG_CONFIG_HOME": "/root/.config",
    "OPENAI_API_KEY": "sk-planted",
    "KEEPGOING_SECRET_KEY": "planted-key",
    "KEEPGOING_STORE": "postgresql://owner:pw@db/kg",
    "KEEPGOING_URL": "http://127.0.0.1:8711",
    "KEEPGOING_TOKEN": "kg_planted",
    "KEEPGOING_LEASE_TTL": "3",
    "AWS_SECRET_ACCESS_KEY": "planted",
}


def _build(tmp_path: Path, **kw: object) -> dict[str, str]:
    options: dict[str, object] = {
        "python": "/opt/venv/bin/python",
        "image_env": {"FROM_IMAGE": "1"},
        "group_env": {"MODE": "fast"},
        "secrets": {"API_KEY": "s3cret"},
        "access": ReplicaAccess("postgresql://worker:pw@db/kg"),
        "names": {"KEEPGOING_GROUP": "g", "KEEPGOING_GROUP_REVISION": "2"},
        "home": tmp_path / "home",
        "source": SERVER,
    }
    options.update(kw)
    return replica_environment(**options)  # type: ignore[arg-type]


def test_only_the_allowlist_and_the_groups_own_values(tmp_path: Path) -> None:
    env = _build(tmp_path)
    assert env.pop(NONCE_ENV)
    assert env == {
        "PATH": "/opt/venv/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "LC_TIME": "en_GB.UTF-8",
        "KEEPGOING_LEASE_TTL": "3",
        "HOME": str(tmp_path / "home"),
        "FROM_IMAGE": "1",
        "MODE": "fast",
        "API_KEY": "s3cret",
        "KEEPGOING_SECRET_ENV": "API_KEY",
        "KEEPGOING_STORE": "postgresql://worker:pw@db/kg",
        "KEEPGOING_GROUP": "g",
        "KEEPGOING_GROUP_REVISION": "2",
    }
    assert (tmp_path / "home").is_dir()


def test_the_group_cannot_override_how_it_reaches_keepgoing(tmp_path: Path) -> None:
    env = _build(tmp_path, group_env={"KEEPGOING_STORE": "sqlite:///elsewhere.db"})
    assert env["KEEPGOING_STORE"] == "postgresql://worker:pw@db/kg"
    first, second = _build(tmp_path)[NONCE_ENV], _build(tmp_path)[NONCE_ENV]
    assert first != second and len(first) == 64  # one nonce per replica


def test_the_access_never_shows_its_url() -> None:
    assert "pw" not in repr(ReplicaAccess("postgresql://worker:pw@db/kg"))
