"""What a replica's process is given: an allowlist, never the environment of the server.

A replica runs code that whoever deployed its group wrote (``groups.write``).
The process that starts it (a server, ``keepgoing dev``, ``keepgoing groups
serve``) holds what that code must not reach: provider keys, the secret key
that decrypts every group's secrets, the store URL of the server's own
database role, tokens. So a replica's environment is built from nothing, of:

* the few variables of this process a program needs to run at all
  (:data:`PASSED`: the search paths, the locale, the time zone, the temporary
  folder), with the environment's ``bin`` folder first on ``PATH`` and its
  ``VIRTUAL_ENV``;
* ``HOME`` set to a folder of the replica's own, so nothing defaults to the
  server's home (its ``~/.config/keepgoing/secret.key`` among others);
* what its image sets (``Image.env``), the group's ``env`` and its secrets,
  already decrypted by the autoscaler (the key itself is never passed);
* how it reaches keepgoing (:class:`ReplicaAccess`): the store URL the
  workers use (on PostgreSQL, a worker role's, ``KEEPGOING_WORKER_STORE``),
  in the environment and never on the command line, which every local user
  can read in ``/proc/<pid>/cmdline``; and, when a server runs the group, that
  server's URL (``KEEPGOING_URL``) and a gateway key minted for the group
  revision (``KEEPGOING_TOKEN``), so its model calls go through the server's
  gateway and no provider key is ever given to it;
* the variables that name it (group, revision, task queues) and the nonce a
  kill proves it by.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from keepgoing._procinfo import NONCE_ENV, new_nonce

__all__ = ["PASSED", "ReplicaAccess", "replica_environment"]

#: Variables of the starting process a replica gets as they are (names, or prefixes
#: ending in ``*``). Nothing else of that environment reaches a replica: where programs
#: and modules are found, the locale, and keepgoing's own worker tuning (lease and
#: heartbeat times), none of which holds a secret.
PASSED = (
    "PATH",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TZ",
    "TMPDIR",
    "TERM",
    "PYTHONUNBUFFERED",
    "PYTHONPATH",
    "KEEPGOING_LEASE_TTL",
    "KEEPGOING_HEARTBEAT",
    "KEEPGOING_CONNECT_TIMEOUT",
)
_DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


@dataclass(frozen=True, repr=False)
class ReplicaAccess:
    """How a replica reaches keepgoing, as environment variables: the only such values
    it is given (never the server's own ``KEEPGOING_*`` variables).

    ``store_url``: the store the workers open (``KEEPGOING_STORE``); ``server_url`` and
    ``gateway_key``: the server whose gateway its model calls go to (``KEEPGOING_URL``)
    and the key minted for its revision (``KEEPGOING_TOKEN``), empty without a server.
    """

    store_url: str
    server_url: str = ""
    gateway_key: str = ""

    def environment(self) -> dict[str, str]:
        pairs = (
            ("KEEPGOING_STORE", self.store_url),
            ("KEEPGOING_URL", self.server_url),
            ("KEEPGOING_TOKEN", self.gateway_key),
        )
        return {name: value for name, value in pairs if value}

    def __repr__(self) -> str:  # the URL may hold a password, the key is a secret
        return "<ReplicaAccess>"


def _passed(source: Mapping[str, str]) -> dict[str, str]:
    names = [p for p in PASSED if not p.endswith("*")]
    prefixes = tuple(p[:-1] for p in PASSED if p.endswith("*"))
    return {k: v for k, v in source.items() if k in names or (prefixes and k.startswith(prefixes))}


def replica_environment(
    *,
    python: str,
    image_env: Mapping[str, str],
    group_env: Mapping[str, str],
    secrets: Mapping[str, str],
    access: ReplicaAccess,
    names: Mapping[str, str],
    home: Path,
    source: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The whole environment of one replica (see the module's docstring).

    Args:
        python: the interpreter it runs (its folder goes first on ``PATH``).
        image_env, group_env, secrets: what its image sets, the group's ``env``, the
            decrypted secrets by the variable they are injected as (later ones win).
        access: how it reaches keepgoing.
        names: the ``KEEPGOING_*`` variables that name it (group, revision, queues).
        home: its own home folder (created).
        source: the environment to take :data:`PASSED` from (default: this process's).
    """
    env = _passed(os.environ if source is None else source)
    bin_dir = str(Path(python).parent)
    path = env.get("PATH") or _DEFAULT_PATH
    if bin_dir not in path.split(os.pathsep):
        path = bin_dir + os.pathsep + path
    env["PATH"] = path
    venv = Path(python).parent.parent
    if (venv / "pyvenv.cfg").is_file():
        env["VIRTUAL_ENV"] = str(venv)
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    env["HOME"] = str(home)
    env.update(image_env)
    env.update(group_env)
    env.update(secrets)
    if secrets:
        env["KEEPGOING_SECRET_ENV"] = ",".join(sorted(secrets))
    env.update(access.environment())
    env.update(names)
    env[NONCE_ENV] = new_nonce()
    return env
