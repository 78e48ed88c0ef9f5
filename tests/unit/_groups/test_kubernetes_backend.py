"""KubernetesBackend and apply_manifests through the official client, against a small HTTP
fake of the Kubernetes API (no cluster runs here): the requests are real HTTP requests
the client builds, and the fake answers as the API server documents."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import kubernetes
import pytest

from keepgoing._groups.kubernetes import (
    KubernetesBackend,
    apply_manifests,
    render_manifests,
)
from keepgoing._groups.kubernetes.client import Cluster
from keepgoing.errors import GroupError, GroupNotFoundError

from .test_kubernetes_render import SECRETS, revision, settings

NS = "agents"


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    content_type: str
    body: Any


@dataclass
class FakeApi:
    """Objects by path, and every request seen."""

    objects: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    refuse: dict[str, int] = field(default_factory=dict)  # path -> status to answer
    lock: threading.Lock = field(default_factory=threading.Lock)

    def pod(self, name: str, group: str, phase: str = "Running", **status: Any) -> None:
        self.objects[f"/api/v1/namespaces/{NS}/pods/{name}"] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": NS,
                "labels": {"keepgoing.dev/group": group, "keepgoing.dev/revision": "3"},
                "creationTimestamp": "2026-12-01T10:00:00Z",
            },
            "spec": {"containers": [{"name": "worker", "image": "x"}], "nodeName": "node-a"},
            "status": {"phase": phase, "startTime": "2026-12-01T10:00:01Z", **status},
        }

    def of(self, method: str) -> list[Request]:
        return [r for r in self.requests if r.method == method]


def _merge(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Fields the patch names replace, the rest stay (as apply keeps others' fields)."""
    out = dict(old)
    for key, value in new.items():
        both = isinstance(value, dict) and isinstance(out.get(key), dict)
        out[key] = _merge(out[key], value) if both else value
    return out


class _Handler(BaseHTTPRequestHandler):
    api: FakeApi

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _answer(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _status(self, code: int, reason: str, message: str) -> None:
        self._answer(
            code,
            {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "reason": reason,
                "message": message,
                "code": code,
            },
        )

    def _handle(self, method: str) -> None:
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        api = self.api
        with api.lock:
            api.requests.append(
                Request(
                    method,
                    parts.path,
                    parse_qs(parts.query),
                    self.headers.get("Content-Type", ""),
                    body,
                )
            )
            if parts.path in api.refuse:
                self._status(api.refuse[parts.path], "Forbidden", "deployments is forbidden")
                return
            self._route(method, parts.path, parse_qs(parts.query), body)

    def _route(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> None:
        api = self.api
        if path.endswith("/scale") and method == "PATCH":
            target = path.removesuffix("/scale")
            if target not in api.objects:
                self._status(404, "NotFound", f"{target} not found")
                return
            api.objects[target]["spec"]["replicas"] = body["spec"]["replicas"]
            self._answer(
                200,
                {
                    "apiVersion": "autoscaling/v1",
                    "kind": "Scale",
                    "metadata": {"name": path.split("/")[-2]},
                    "spec": {"replicas": body["spec"]["replicas"]},
                },
            )
        elif method == "PATCH":
            api.objects[path] = _merge(api.objects.get(path, {}), body)
            self._answer(200, api.objects[path])
        elif method == "GET" and path.endswith("/pods"):
            selector = query.get("labelSelector", [""])[0]
            key, _, value = selector.partition("=")
            items = [
                o
                for p, o in api.objects.items()
                if p.startswith(path + "/") and o["metadata"]["labels"].get(key) == value
            ]
            self._answer(
                200, {"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": items}
            )
        elif method in ("GET", "DELETE"):
            if path not in api.objects:
                self._status(404, "NotFound", f"{path} not found")
                return
            obj = api.objects[path] if method == "GET" else api.objects.pop(path)
            self._answer(200, obj)
        else:
            self._status(405, "MethodNotAllowed", method)

    def do_GET(self) -> None:
        self._handle("GET")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")


@pytest.fixture
def fake() -> Iterator[tuple[FakeApi, Any]]:
    api = FakeApi()
    handler = type("Handler", (_Handler,), {"api": api})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    config = kubernetes.client.Configuration()
    config.host = f"http://127.0.0.1:{server.server_address[1]}"
    client = kubernetes.client.ApiClient(config)
    try:
        yield api, client
    finally:
        client.close()
        server.shutdown()
        server.server_close()


DEPLOYMENT = f"/apis/apps/v1/namespaces/{NS}/deployments/wf-agent"
SECRET = f"/api/v1/namespaces/{NS}/secrets/wf-agent-secrets"
SCALED = f"/apis/keda.sh/v1alpha1/namespaces/{NS}/scaledobjects/wf-agent"
AUTH = f"/apis/keda.sh/v1alpha1/namespaces/{NS}/triggerauthentications/wf-agent-store"


def test_apply_manifests_applies_a_rendered_folder_server_side(
    fake: tuple[FakeApi, Any], tmp_path: Path
) -> None:
    api, client = fake
    render_manifests(revision(), tmp_path, settings=settings(), secrets=SECRETS)

    applied = apply_manifests(tmp_path, api_client=client)

    assert applied == [
        "Secret agents/wf-agent-secrets",
        "Deployment agents/wf-agent",
        "TriggerAuthentication agents/wf-agent-store",
        "ScaledObject agents/wf-agent",
    ]
    patches = api.of("PATCH")
    assert [p.path for p in patches] == [SECRET, DEPLOYMENT, AUTH, SCALED]
    for p in patches:
        assert p.content_type == "application/apply-patch+yaml"
        assert p.query["fieldManager"] == ["keepgoing"]
        assert p.query["force"] == ["true"]
    assert api.objects[DEPLOYMENT]["spec"]["replicas"] == 0  # created at zero


def test_reapplying_leaves_the_replica_count_to_keda(fake: tuple[FakeApi, Any]) -> None:
    api, client = fake
    backend = KubernetesBackend(settings(), api_client=client)
    rev = revision(secrets=())
    backend.ensure_group(rev)
    api.objects[DEPLOYMENT]["spec"]["replicas"] = 3  # KEDA scaled it

    backend.ensure_group(rev)

    last = [p for p in api.of("PATCH") if p.path == DEPLOYMENT][-1]
    assert "replicas" not in last.body["spec"]
    assert api.objects[DEPLOYMENT]["spec"]["replicas"] == 3


def test_ensure_group_waits_for_secret_values_before_writing_the_secret(
    fake: tuple[FakeApi, Any],
) -> None:
    api, client = fake
    backend = KubernetesBackend(settings(), api_client=client)
    backend.ensure_group(revision())
    assert SECRET not in api.objects  # no values yet: no Secret that would lack them
    assert {DEPLOYMENT, AUTH, SCALED} <= set(api.objects)

    backend.set_secrets("wf-agent", SECRETS)
    assert set(api.objects[SECRET]["data"]) == {
        "KEEPGOING_STORE",
        "KEDA_POSTGRESQL_CONNECTION",
        "ROUTER_API_KEY",
    }
    backend.ensure_group(revision(revision=4))  # a redeploy keeps applying the known values
    assert [p.path for p in api.of("PATCH")].count(SECRET) == 2

    with pytest.raises(GroupError, match="ROUTER_API_KEY"):
        backend.set_secrets("wf-agent", {})
    with pytest.raises(GroupNotFoundError):
        backend.set_secrets("wf-unknown", SECRETS)


def test_set_replicas_patches_the_scale(fake: tuple[FakeApi, Any]) -> None:
    api, client = fake
    backend = KubernetesBackend(settings(), api_client=client)
    backend.ensure_group(revision(secrets=()))
    backend.set_replicas("wf-agent", 2)
    (scale,) = [r for r in api.requests if r.path.endswith("/scale")]
    assert scale.content_type == "application/merge-patch+json"
    assert scale.body == {"spec": {"replicas": 2}}
    assert api.objects[DEPLOYMENT]["spec"]["replicas"] == 2
    with pytest.raises(GroupError, match="whole number"):
        backend.set_replicas("wf-agent", -1)
    with pytest.raises(GroupNotFoundError):
        backend.set_replicas("wf-missing", 1)


def test_list_instances_reads_the_group_pods(fake: tuple[FakeApi, Any]) -> None:
    api, client = fake
    api.pod("wf-agent-abc-1", "wf-agent")
    api.pod(
        "wf-agent-abc-2",
        "wf-agent",
        phase="Failed",
        containerStatuses=[
            {
                "name": "worker",
                "image": "x",
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "state": {"terminated": {"exitCode": 137, "finishedAt": "2026-12-01T10:05:00Z"}},
            }
        ],
    )
    api.pod("other-1", "wf-other")
    backend = KubernetesBackend(settings(), api_client=client)

    instances = backend.list_instances("wf-agent")

    assert [(i.instance_id, i.state, i.exit_status, i.host, i.revision) for i in instances] == [
        ("wf-agent-abc-1", "running", None, "node-a", 3),
        ("wf-agent-abc-2", "exited", 137, "node-a", 3),
    ]
    assert instances[1].ended_at is not None and instances[1].ended_at > instances[1].started_at
    listings = [r.query["labelSelector"] for r in api.requests if r.path.endswith("/pods")]
    assert listings == [["keepgoing.dev/group=wf-agent"], ["keepgoing.dev/pinned-of=wf-agent"]]


def _container(**states: Any) -> dict[str, Any]:
    return {
        "name": "worker",
        "image": "x",
        "imageID": "",
        "ready": False,
        "restartCount": 1,
        **states,
    }


def test_terminations_report_the_containers_the_cluster_oom_killed(
    fake: tuple[FakeApi, Any],
) -> None:
    api, client = fake
    oom = {"exitCode": 137, "reason": "OOMKilled", "finishedAt": "2026-12-01T10:05:00Z"}
    # Restarted after running out of memory: running again, its last state says why.
    api.pod(
        "wf-agent-abc-1",
        "wf-agent",
        containerStatuses=[_container(state={"running": {}}, lastState={"terminated": oom})],
    )
    api.pod(  # ended for good, out of memory
        "wf-agent-abc-2",
        "wf-agent",
        phase="Failed",
        containerStatuses=[_container(state={"terminated": oom})],
    )
    error = {"exitCode": 1, "reason": "Error", "finishedAt": "2026-12-01T10:06:00Z"}
    api.pod(  # an exit the cluster does not explain
        "wf-agent-abc-3",
        "wf-agent",
        phase="Failed",
        containerStatuses=[_container(state={"terminated": error})],
    )
    api.pod("wf-agent-abc-4", "wf-agent")  # no container status yet
    backend = KubernetesBackend(settings(), api_client=client)

    found = backend.terminations("wf-agent")

    assert [(t.instance_id, t.host, t.cause, t.reason) for t in found] == [
        ("wf-agent-abc-1", "wf-agent-abc-1", "oom_killed", "OOMKilled"),
        ("wf-agent-abc-2", "wf-agent-abc-2", "oom_killed", "OOMKilled"),
    ]
    assert found[0].finished_at == 1796119500.0  # 2026-12-01T10:05:00Z


def test_kill_instance_deletes_the_pod_with_no_grace(fake: tuple[FakeApi, Any]) -> None:
    api, client = fake
    api.pod("wf-agent-abc-1", "wf-agent")
    api.pod("other-1", "wf-other")
    backend = KubernetesBackend(settings(), api_client=client)

    backend.kill_instance("wf-agent", "wf-agent-abc-1")

    (delete,) = api.of("DELETE")
    assert delete.path == f"/api/v1/namespaces/{NS}/pods/wf-agent-abc-1"
    assert delete.query["gracePeriodSeconds"] == ["0"]
    with pytest.raises(GroupNotFoundError, match="not an instance of group"):
        backend.kill_instance("wf-agent", "other-1")
    with pytest.raises(GroupNotFoundError, match="does not exist"):
        backend.kill_instance("wf-agent", "wf-agent-abc-1")


def test_a_refusal_names_the_object_and_the_reason(fake: tuple[FakeApi, Any]) -> None:
    api, client = fake
    api.refuse[DEPLOYMENT] = 403
    backend = KubernetesBackend(settings(), api_client=client)
    with pytest.raises(GroupError, match=r"Deployment agents/wf-agent: .*403.*forbidden"):
        backend.ensure_group(revision(secrets=()))


def test_an_unreachable_cluster_is_a_clear_error() -> None:
    config = kubernetes.client.Configuration()
    config.host = "http://127.0.0.1:9"  # discard port: nothing listens
    config.retries = 0
    client = kubernetes.client.ApiClient(config)
    try:
        with pytest.raises(GroupError, match="cannot reach the API server"):
            Cluster(client).pods(NS, "a=b")
    finally:
        client.close()


def test_apply_refuses_what_is_not_a_manifest(tmp_path: Path, fake: tuple[FakeApi, Any]) -> None:
    _, client = fake
    with pytest.raises(GroupError, match="neither a manifest file nor a folder"):
        apply_manifests(tmp_path / "missing", api_client=client)
    with pytest.raises(GroupError, match="holds no manifests"):
        apply_manifests(tmp_path, api_client=client)
    (tmp_path / "x.json").write_text("[1]")
    with pytest.raises(GroupError, match="not a Kubernetes object"):
        apply_manifests(tmp_path, api_client=client)
    with pytest.raises(GroupError, match="keepgoing renders no such object"):
        apply_manifests(
            [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}],
            api_client=client,
        )


def test_without_the_client_installed_the_error_says_how_to_get_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys  # noqa: PLC0415

    monkeypatch.setitem(sys.modules, "kubernetes", None)
    with pytest.raises(GroupError, match=r"pip install 'keepgoing\[kubernetes\]'"):
        apply_manifests([])


def test_a_pinned_revisions_pods_are_the_groups_instances_too(fake: tuple[FakeApi, Any]) -> None:
    api, client = fake
    api.pod("wf-agent-abc-1", "wf-agent")
    api.pod("wf-agent-r2-xyz-1", "wf-agent-r2")
    pinned = api.objects[f"/api/v1/namespaces/{NS}/pods/wf-agent-r2-xyz-1"]["metadata"]["labels"]
    pinned.update({"keepgoing.dev/pinned-of": "wf-agent", "keepgoing.dev/revision": "2"})
    backend = KubernetesBackend(settings(), api_client=client)

    found = [(i.instance_id, i.revision) for i in backend.list_instances("wf-agent")]
    assert sorted(found) == [("wf-agent-abc-1", 3), ("wf-agent-r2-xyz-1", 2)]
    backend.kill_instance("wf-agent", "wf-agent-r2-xyz-1")
    assert f"/api/v1/namespaces/{NS}/pods/wf-agent-r2-xyz-1" not in api.objects
    with pytest.raises(GroupNotFoundError, match="not an instance of group"):
        backend.kill_instance("wf-other", "wf-agent-abc-1")
