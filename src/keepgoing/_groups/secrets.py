"""``Secret``: a value injected into a group's workers, stored encrypted at rest.

Two kinds:

* :meth:`Secret.from_env` names a secret kept by keepgoing (``keepgoing secrets
  set NAME``); the deploy stores only the reference.
* :meth:`Secret.from_local_env` reads an environment variable of the deploying
  process now, and the deploy uploads it, kept for that group only.

Values are encrypted with Fernet (AES-128-CBC with HMAC-SHA256, from
``cryptography``) before they reach the store. The key is ``KEEPGOING_SECRET_KEY``
(a Fernet key: ``keepgoing secrets key`` prints a new one) or, without it, one
kept in ``$XDG_CONFIG_HOME/keepgoing/secret.key`` (``~/.config/...``), created
with mode 0600 on first use. Every process that encrypts or decrypts (the
deploying client in store mode, the server, the autoscaler) must use the same
key: set ``KEEPGOING_SECRET_KEY`` on servers that share a store.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken

from keepgoing._groups.spec import check_env_name
from keepgoing.errors import ConfigurationError, GroupError

__all__ = ["Secret", "SecretBox", "check_secret_name", "load_key"]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,127}$")
KEY_ENV = "KEEPGOING_SECRET_KEY"


def check_secret_name(name: object) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise GroupError(
            f"a secret name is a letter or '_' then up to 127 letters, digits, '_', '.' or "
            f"'-', not {name!r}"
        )
    return name


@dataclass(frozen=True, repr=False)
class Secret:
    """A secret for a group's ``env=`` (under its key) or ``secrets=`` (under its own name).

    ``value`` is set only for :meth:`from_local_env` and never shown by ``repr``.
    """

    name: str
    env_var: str | None = None
    value: str | None = None

    @classmethod
    def from_env(cls, name: str, *, alias: str | None = None) -> Secret:
        """The secret kept under ``name`` (``keepgoing secrets set NAME``), injected as
        ``alias`` (default: its key in ``env=``, or ``name``)."""
        check_secret_name(name)
        return cls(name=name, env_var=None if alias is None else check_env_name(alias, "alias"))

    @classmethod
    def from_local_env(cls, var: str, *, env_var_name: str | None = None) -> Secret:
        """The value of this process's environment variable ``var``, read now and uploaded
        with the deploy, injected as ``env_var_name`` (default: its key in ``env=``, or ``var``).

        Raises:
            GroupError: ``var`` is not set (or is empty).
        """
        check_env_name(var, "Secret.from_local_env")
        value = os.environ.get(var)
        if not value:
            raise GroupError(f"Secret.from_local_env({var!r}): {var} is not set here")
        target = None if env_var_name is None else check_env_name(env_var_name, "env_var_name")
        return cls(name=var, env_var=target, value=value)

    @property
    def local(self) -> bool:
        return self.value is not None

    def __repr__(self) -> str:
        kind = "from_local_env" if self.local else "from_env"
        target = f" as {self.env_var}" if self.env_var else ""
        return f"<Secret.{kind} {self.name}{target}>"


def _key_file() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "keepgoing" / "secret.key"


def load_key(*, create: bool = True) -> bytes:
    """The Fernet key: ``KEEPGOING_SECRET_KEY``, else the key file (created if missing).

    Raises:
        ConfigurationError: the key is malformed, or missing and ``create`` is False.
    """
    text = os.environ.get(KEY_ENV)
    where = KEY_ENV
    if not text:
        path = _key_file()
        where = str(path)
        if path.exists():
            text = path.read_text().strip()
        elif not create:
            raise ConfigurationError(f"no secret key: set {KEY_ENV} or create {path}")
        else:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            key = Fernet.generate_key()
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(key + b"\n")
            return key
    try:
        Fernet(text.encode())
    except ValueError:
        raise ConfigurationError(
            f"the secret key in {where} is not a Fernet key (32 url-safe base64 bytes); "
            "`keepgoing secrets key` prints a new one"
        ) from None
    return text.encode()


class SecretBox:
    """Encrypts and decrypts secret values with the key of :func:`load_key`."""

    def __init__(self, key: bytes | None = None) -> None:
        self._fernet = Fernet(key or load_key())

    def seal(self, value: str) -> str:
        return self._fernet.encrypt(value.encode()).decode()

    def open(self, ciphertext: str, what: str) -> str:
        try:
            return self._fernet.decrypt(ciphertext.encode()).decode()
        except InvalidToken:
            raise GroupError(
                f"secret {what} cannot be decrypted with this key: it was stored with another "
                f"{KEY_ENV}"
            ) from None
