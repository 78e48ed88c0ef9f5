"""A deploy's groups as Kubernetes manifests: the revisions, their secrets, the files.

``keepgoing deploy --backend kubernetes --out DIR`` registers the deploy (so
runs record its revision and ``keepgoing groups`` shows it) and then writes
each group with :func:`export_groups`; ``--apply`` also applies them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from keepgoing._groups.kubernetes.backend import apply_manifests
from keepgoing._groups.kubernetes.manifests import RenderedGroup, render_manifests
from keepgoing._groups.kubernetes.settings import KubernetesSettings
from keepgoing._groups.secrets import SecretBox
from keepgoing._groups.spec import GroupRevision
from keepgoing._store.protocol import Store
from keepgoing.errors import GroupError

__all__ = ["export_groups", "secret_values"]


async def secret_values(
    store: Store, revision: GroupRevision, box: SecretBox | None = None
) -> dict[str, str]:
    """The decrypted secrets of ``revision`` by env var, read from ``store``.

    Raises:
        GroupError: a secret is not kept in the store.
    """
    if not revision.secrets:
        return {}
    found = await store.get_secrets([(r.scope, r.name) for r in revision.secrets])
    box = box or SecretBox()
    values = {}
    for ref in revision.secrets:
        cipher = found.get((ref.scope, ref.name))
        if cipher is None:
            raise GroupError(f"secret {ref.name!r} for {ref.env_var} is not kept in the store")
        values[ref.env_var] = box.open(cipher, repr(ref.name))
    return values


def export_groups(
    revisions: Sequence[GroupRevision],
    out_dir: str | Path,
    *,
    settings: KubernetesSettings,
    secrets: Mapping[str, Mapping[str, str]],
    apply: bool = False,
    api_client: Any | None = None,
    pinned: Sequence[GroupRevision] = (),
) -> list[RenderedGroup]:
    """Render every group of a deploy under ``out_dir`` (and apply them with ``apply``).

    ``secrets`` maps each group to its secret values by env var. ``pinned`` are the
    older revisions of the main group that still have runs: each gets a Deployment
    and ScaledObject of its own (``<group>-r<revision>``). Everything is rendered
    before anything is applied, so a bad group applies nothing.
    """
    rendered = [
        render_manifests(rev, out_dir, settings=settings, secrets=secrets.get(rev.group, {}))
        for rev in revisions
    ]
    rendered += [render_manifests(rev, out_dir, settings=settings, pinned=True) for rev in pinned]
    if apply:
        for group in rendered:
            apply_manifests(list(group.objects), api_client=api_client)
    return rendered
