"""Where and how a group runs on Kubernetes: namespace, image repository, store, KEDA timing."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from keepgoing._version import __version__
from keepgoing.errors import GroupError

__all__ = ["KubernetesSettings", "keda_connection"]

_DNS_LABEL = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
# A container image repository: registry host (optional port), then path components.
_REPOSITORY = re.compile(
    r"(?:[a-zA-Z0-9.-]+(?::\d+)?/)?[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*"
)
# keepgoing's own PostgreSQL URL options (``PostgresStore`` strips them before libpq
# sees them); KEDA's driver would take them for server settings and fail.
KEEPGOING_URL_OPTIONS = frozenset({"pool_min", "pool_max", "outage_timeout"})


@dataclass(frozen=True)
class KubernetesSettings:
    """What a cluster needs beyond the group revision.

    Attributes:
        store_url: the ``postgresql://`` store the workers (and KEDA) connect to, as
            seen from inside the cluster. It goes only into the rendered ``Secret``.
        namespace: the namespace of every object rendered.
        image_repository: where the worker images are pushed; the tag is the image's
            content hash, so a changed image is a new tag and an unchanged one is reused.
        keepgoing_requirement: what the image installs keepgoing from.
        polling_interval: seconds between KEDA's queries of the queue view.
        wake_ahead_seconds: a timer or retry due within this many seconds wakes the
            group already, so a replica is up when it fires (the cold start).
        shutdown_grace: seconds a stopping worker gives running attempts to finish
            (``keepgoing worker --shutdown-grace``); the pod's termination grace adds 5.
    """

    store_url: str
    namespace: str = "default"
    image_repository: str = "keepgoing-workers"
    keepgoing_requirement: str = f"keepgoing[postgres]=={__version__}"
    polling_interval: int = 10
    wake_ahead_seconds: float = 30.0
    shutdown_grace: float = 10.0

    def __post_init__(self) -> None:
        _check_store(self.store_url)
        if not isinstance(self.namespace, str) or not _DNS_LABEL.fullmatch(self.namespace):
            raise GroupError(f"namespace {self.namespace!r} is not a Kubernetes DNS label")
        if not isinstance(self.image_repository, str) or not _REPOSITORY.fullmatch(
            self.image_repository
        ):
            raise GroupError(
                f"image_repository {self.image_repository!r} is not an image repository "
                "like 'registry.example.com/team/keepgoing'"
            )
        req = self.keepgoing_requirement
        if not isinstance(req, str) or not req.strip() or req.startswith("-") or "\n" in req:
            raise GroupError(f"keepgoing_requirement {req!r} is not a requirement")
        if not _positive_int(self.polling_interval):
            raise GroupError(
                f"polling_interval must be a positive int, not {self.polling_interval!r}"
            )
        for name in ("wake_ahead_seconds", "shutdown_grace"):
            value = getattr(self, name)
            if not _non_negative(value):
                raise GroupError(f"{name} must be a number of seconds >= 0, not {value!r}")

    @property
    def termination_grace(self) -> int:
        """The pod's ``terminationGracePeriodSeconds``: the worker's grace and a margin."""
        return math.ceil(self.shutdown_grace) + 5


def keda_connection(store_url: str) -> str:
    """The store URL as KEDA's ``postgresql`` trigger takes it: keepgoing's options removed."""
    parts = urlsplit(store_url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)]
    kept = [(k, v) for k, v in query if k not in KEEPGOING_URL_OPTIONS]
    return urlunsplit(parts._replace(scheme="postgresql", query=urlencode(kept)))


def _check_store(url: object) -> None:
    if not isinstance(url, str) or not url:
        raise GroupError("the kubernetes backend needs the store URL its workers connect to")
    scheme = urlsplit(url).scheme
    if scheme not in ("postgresql", "postgres"):
        raise GroupError(
            f"the kubernetes backend needs a PostgreSQL store (postgresql://...), not a "
            f"{scheme or 'schemeless'} URL: every replica and KEDA share the one database"
        )
    if not urlsplit(url).hostname:
        raise GroupError(
            "the store URL for the cluster must name its host "
            "(as pods reach it, e.g. postgres.db.svc.cluster.local)"
        )


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _non_negative(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )
