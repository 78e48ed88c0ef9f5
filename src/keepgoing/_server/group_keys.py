"""Gateway keys minted for a deployed group: how its replicas reach the server's gateway.

A server that runs the autoscaler gives each replica of a group revision the
server's URL (``KEEPGOING_URL``) and a key of that revision's own
(``KEEPGOING_TOKEN``), so its model calls go through the server's ``/v1``
gateway: provider keys stay in the server, and the server's ledger and limits
apply. A minted key is a service token with ``gateway.use`` and ``runs.read``
(to tie its calls to the run's step), named ``group.<name>.r<revision>`` and
created by ``group:<name>``; it may call ``/v1`` only (:data:`SCOPE`).

Its calls are metered as gateway key ``group:<name>``, so a limit set on that
key (``keepgoing gateway keys set group:<name> --total-budget 5``) holds across
the group's revisions. A new revision gets a new key; the keys of revisions
that no longer run (retired, or replaced by a redeploy) are revoked, and so is
a key of the same revision left by an earlier server process. The key's text
is only ever put in the replica's environment: never logged, never stored.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from keepgoing._clock import Clock, system_clock
from keepgoing._server.tokens import create_token, revoke_token
from keepgoing._store.auth_protocol import TokenRecord
from keepgoing._store.protocol import Store

__all__ = ["PERMISSIONS", "PREFIX", "SCOPE", "GroupKeys", "group_key_of", "key_name"]

#: The only path prefix a group's key may call.
SCOPE = "/v1"
#: What a group's key may do: call models, tied to the steps of runs.
PERMISSIONS = ("gateway.use", "runs.read")
#: The gateway key id of a group's calls is this prefix and the group's name.
PREFIX = "group:"


def key_name(group: str, revision: int) -> str:
    return f"group.{group}.r{revision}"


def group_key_of(token: TokenRecord) -> str | None:
    """``group:<name>`` for a key minted for a group's revision, else None."""
    if token.kind == "service" and token.created_by.startswith(PREFIX):
        return token.created_by
    return None


def _revision_of(token: TokenRecord) -> int | None:
    _, _, tail = token.name.rpartition(".r")
    return int(tail) if tail.isdigit() else None


class GroupKeys:
    """Mints and revokes the keys of a store's groups (the autoscaler's ``keys``).

    Args:
        store: the server's store (opened).
        url: the server's URL as a replica on this machine reaches it.
    """

    def __init__(self, store: Store, url: str, *, clock: Clock = system_clock) -> None:
        self.store = store
        self.url = url.rstrip("/")
        self.clock = clock

    async def grant(
        self, group: str, revision: int, keep: Collection[int] | None = None
    ) -> dict[str, str]:
        """A new key for ``revision`` of ``group``, as the replica's environment pairs.

        The group's other keys for this revision are revoked, and, when ``keep`` is
        given, those of every revision not in it.
        """
        await self.revoke(group, lambda n: n == revision or (keep is not None and n not in keep))
        _, text = await create_token(
            self.store,
            name=key_name(group, revision),
            kind="service",
            permissions=PERMISSIONS,
            actor_kind="group",
            actor_id=group,
            now=self.clock.now(),
        )
        return {"KEEPGOING_URL": self.url, "KEEPGOING_TOKEN": text}

    async def revoke(self, group: str, which: Callable[[int], bool] = lambda n: True) -> int:
        """Revoke the active keys of ``group`` whose revision ``which`` picks; how many."""
        owner, count = PREFIX + group, 0
        for token in await self.store.list_tokens():
            revision = _revision_of(token)
            if group_key_of(token) != owner or revision is None or not which(revision):
                continue
            await revoke_token(
                self.store,
                token.token_id,
                actor_kind="system",
                actor_id="autoscaler",
                now=self.clock.now(),
            )
            count += 1
        return count
