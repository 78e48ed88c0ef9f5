"""The official ``kubernetes`` client, imported only when a cluster is really talked to.

It is the optional extra ``keepgoing[kubernetes]``: rendering manifests needs
none of it. Every call goes through :class:`Cluster`, which turns the client's
exceptions into :class:`~keepgoing.errors.GroupError` naming the object and
what the API server said.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from keepgoing.errors import GroupError, GroupNotFoundError

__all__ = ["Cluster", "FIELD_MANAGER", "load_client"]

FIELD_MANAGER = "keepgoing"
_APPLY = "application/apply-patch+yaml"
_MERGE = "application/merge-patch+json"
T = TypeVar("T")

#: apiVersion/kind -> the plural of a custom resource keepgoing renders.
_CUSTOM = {
    ("keda.sh/v1alpha1", "ScaledObject"): "scaledobjects",
    ("keda.sh/v1alpha1", "TriggerAuthentication"): "triggerauthentications",
}


def load_client() -> Any:
    """The ``kubernetes`` package, or a GroupError saying how to install it."""
    try:
        import kubernetes  # noqa: PLC0415 (optional extra)
    except ModuleNotFoundError:
        raise GroupError(
            "talking to a Kubernetes cluster needs the official client: "
            "pip install 'keepgoing[kubernetes]'"
        ) from None
    return kubernetes


def default_api_client() -> Any:
    """An ApiClient from the kubeconfig (``KUBECONFIG``, ``~/.kube/config``) or, inside a
    pod, from its service account."""
    k8s = load_client()
    try:
        k8s.config.load_kube_config()
    except Exception as outside:
        try:
            k8s.config.load_incluster_config()
        except Exception:
            raise GroupError(f"no Kubernetes configuration found: {outside}") from None
    return k8s.client.ApiClient()


class Cluster:
    """The few API calls keepgoing makes, on one ApiClient."""

    def __init__(self, api_client: Any | None = None) -> None:
        self.k8s = load_client()
        self.api = api_client if api_client is not None else default_api_client()
        self.core = self.k8s.client.CoreV1Api(self.api)
        self.apps = self.k8s.client.AppsV1Api(self.api)
        self.custom = self.k8s.client.CustomObjectsApi(self.api)

    def apply(self, obj: dict[str, Any]) -> None:
        """Server-side apply ``obj`` (create or update), owning its fields as ``keepgoing``.

        A Deployment that exists keeps its replica count: KEDA owns it.
        """
        kind, name = obj["kind"], obj["metadata"]["name"]
        namespace = obj["metadata"].get("namespace", "default")
        what = f"{kind} {namespace}/{name}"
        opts = {"field_manager": FIELD_MANAGER, "force": True, "_content_type": _APPLY}
        if kind == "Secret" and obj["apiVersion"] == "v1":
            self.call(what, lambda: self.core.patch_namespaced_secret(name, namespace, obj, **opts))
        elif kind == "Deployment" and obj["apiVersion"] == "apps/v1":
            if self.exists(lambda: self.apps.read_namespaced_deployment(name, namespace), what):
                obj = {**obj, "spec": {k: v for k, v in obj["spec"].items() if k != "replicas"}}
            body = obj
            self.call(
                what, lambda: self.apps.patch_namespaced_deployment(name, namespace, body, **opts)
            )
        elif (obj["apiVersion"], kind) in _CUSTOM:
            group, version = obj["apiVersion"].split("/")
            plural = _CUSTOM[(obj["apiVersion"], kind)]
            self.call(
                what,
                lambda: self.custom.patch_namespaced_custom_object(
                    group, version, namespace, plural, name, obj, **opts
                ),
            )
        else:
            raise GroupError(
                f"cannot apply {obj['apiVersion']} {kind}: keepgoing renders no such object"
            )

    def scale(self, name: str, namespace: str, replicas: int) -> None:
        body = {"spec": {"replicas": replicas}}
        self.call(
            f"Deployment {namespace}/{name}",
            lambda: self.apps.patch_namespaced_deployment_scale(
                name, namespace, body, _content_type=_MERGE
            ),
        )

    def pods(self, namespace: str, selector: str) -> list[Any]:
        listing = self.call(
            f"pods {selector} in {namespace}",
            lambda: self.core.list_namespaced_pod(namespace, label_selector=selector),
        )
        return list(listing.items or [])

    def read_pod(self, name: str, namespace: str) -> Any:
        return self.call(
            f"Pod {namespace}/{name}", lambda: self.core.read_namespaced_pod(name, namespace)
        )

    def delete_pod(self, name: str, namespace: str) -> None:
        self.call(
            f"Pod {namespace}/{name}",
            lambda: self.core.delete_namespaced_pod(name, namespace, grace_period_seconds=0),
        )

    def exists(self, read: Callable[[], Any], what: str) -> bool:
        try:
            self.call(what, read)
        except GroupNotFoundError:
            return False
        return True

    def call(self, what: str, request: Callable[[], T]) -> T:
        exceptions = self.k8s.client.exceptions
        try:
            return request()
        except exceptions.ApiException as exc:
            if exc.status == 404:
                raise GroupNotFoundError(f"{what} does not exist in the cluster") from None
            raise GroupError(f"{what}: the API server said {exc.status} {_message(exc)}") from None
        except OSError as exc:  # urllib3's connection errors are OSErrors
            raise GroupError(f"{what}: cannot reach the API server: {exc}") from None
        except Exception as exc:
            if type(exc).__module__.startswith("urllib3"):
                raise GroupError(f"{what}: cannot reach the API server: {exc}") from None
            raise


def _message(exc: Any) -> str:
    body = getattr(exc, "body", None) or ""
    try:
        detail = json.loads(body).get("message")
    except (TypeError, ValueError, AttributeError):
        detail = None
    return f"{exc.reason}: {detail}" if detail else str(exc.reason)
