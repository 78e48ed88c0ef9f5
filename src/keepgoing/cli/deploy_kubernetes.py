"""``keepgoing deploy FILE --backend kubernetes --out DIR [--apply]``: the Kubernetes half.

The deploy is registered like any other (a revision per group, runs record
it); then each group is written as a Dockerfile with its build context and
manifests (Secret, Deployment, KEDA TriggerAuthentication and ScaledObject),
and applied with the official client when ``--apply`` is given.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from keepgoing._client.client import Client
from keepgoing._groups.kubernetes.export import export_groups, secret_values
from keepgoing._groups.kubernetes.manifests import RenderedGroup
from keepgoing._groups.kubernetes.settings import KubernetesSettings
from keepgoing._groups.registration import DeployPlan
from keepgoing._groups.spec import GroupRevision
from keepgoing._open_store import store_from_url
from keepgoing._store.url import resolve_store_url
from keepgoing.errors import GroupError

__all__ = ["deploy_to_kubernetes"]

log = logging.getLogger("keepgoing.groups")


def deploy_to_kubernetes(
    plan: DeployPlan,
    client: Client,
    *,
    out: Path | None,
    apply: bool,
    cluster_store: str | None,
    namespace: str,
    image_repository: str,
    store: str | None,
) -> list[RenderedGroup]:
    """Register ``plan`` through ``client``, then write (and apply) its manifests.

    Raises:
        GroupError: no ``--out``, no PostgreSQL store for the cluster, or a secret whose
            value cannot be read here (a server keeps it and this client is not on the store).
    """
    if out is None:
        raise GroupError("--backend kubernetes needs --out DIR for the manifests")
    store_url = cluster_store or (store if store is not None else resolve_store_url(None))
    settings = KubernetesSettings(
        store_url=store_url, namespace=namespace, image_repository=image_repository
    )
    numbers = client.groups.deploy(plan).revisions
    revisions = [g.with_revision(numbers[g.group]) for g in plan.groups]
    secrets = _secrets(plan, revisions, store)
    pinned = _pinned(client, plan.main.group, out)
    return export_groups(
        revisions, out, settings=settings, secrets=secrets, apply=apply, pinned=pinned
    )


def _pinned(client: Client, group: str, out: Path) -> list[GroupRevision]:
    """The older revisions of ``group`` that still have runs (each keeps a Deployment);
    the folders of the others are removed, and the objects to delete are logged."""
    import shutil  # noqa: PLC0415

    kept = []
    for r in client.groups.show(group, decisions=0).revisions:
        if r.current:
            continue
        folder = out / f"{group}-r{r.revision}"
        if r.open_runs and r.retired_at is None:
            kept.append(client.groups.revision(group, r.revision))
        elif folder.is_dir():
            shutil.rmtree(folder)
            log.warning(
                "revision %d of %s has no run left: delete its objects with "
                "`kubectl delete deployment,scaledobject %s-r%d`",
                r.revision,
                group,
                group,
                r.revision,
            )
    return kept


def _secrets(
    plan: DeployPlan, revisions: list[GroupRevision], store: str | None
) -> dict[str, dict[str, str]]:
    if not any(r.secrets for r in revisions):
        return {}
    if all(ref.scope and ref.name in plan.uploads for r in revisions for ref in r.secrets):
        return {
            r.group: {ref.env_var: plan.uploads[ref.name] for ref in r.secrets} for r in revisions
        }
    if store is None and not _store_mode():
        raise GroupError(
            "the Secret manifest needs the kept secrets' values, which only the store's key "
            "opens: deploy with --store (and KEEPGOING_SECRET_KEY), or pass them with "
            "--local-secret"
        )
    return asyncio.run(_read(revisions, store))


def _store_mode() -> bool:
    import os  # noqa: PLC0415

    return not os.environ.get("KEEPGOING_URL")


async def _read(revisions: list[GroupRevision], url: str | None) -> dict[str, dict[str, str]]:
    the_store = store_from_url(url)
    await the_store.open()
    try:
        return {r.group: await secret_values(the_store, r) for r in revisions}
    finally:
        await the_store.close()
