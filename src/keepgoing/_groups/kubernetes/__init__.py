"""The Kubernetes backend: a Dockerfile, a Deployment, a Secret and a KEDA ScaledObject per group.

Rendering needs nothing beyond keepgoing; applying needs the official client
(``pip install 'keepgoing[kubernetes]'``). See docs/kubernetes.md.
"""

from keepgoing._groups.kubernetes.backend import KubernetesBackend, apply_manifests
from keepgoing._groups.kubernetes.dockerfile import image_reference, render_dockerfile
from keepgoing._groups.kubernetes.keda import queue_work_query
from keepgoing._groups.kubernetes.manifests import RenderedGroup, render_manifests, render_objects
from keepgoing._groups.kubernetes.settings import KubernetesSettings

__all__ = [
    "KubernetesBackend",
    "KubernetesSettings",
    "RenderedGroup",
    "apply_manifests",
    "image_reference",
    "queue_work_query",
    "render_dockerfile",
    "render_manifests",
    "render_objects",
]
