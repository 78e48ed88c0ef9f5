"""The rendered container contract, without a container engine: the Deployment's command
line and environment (its secretKeyRefs read from the rendered Secret) start a real
``keepgoing worker`` that serves the group, and the ScaledObject's query follows the
run from queued to done on the real PostgreSQL."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

import keepgoing
from keepgoing._groups.kubernetes import KubernetesSettings, render_manifests
from keepgoing._groups.spec import GroupRevision, SecretRef

from ._support import wait_until

pytestmark = pytest.mark.integration

PLANTED = "sk-contract-planted-93ab"
SOURCE = """
import os

from keepgoing import task, workflow


@task
def check_env() -> dict[str, object]:
    return {
        "secret_ok": os.environ.get("ROUTER_API_KEY") == os.environ.get("EXPECTED_DIGEST_SOURCE"),
        "group": os.environ.get("KEEPGOING_GROUP"),
        "instance": os.environ.get("KEEPGOING_INSTANCE"),
        "mode": os.environ.get("MODE"),
    }


@workflow
async def contract() -> dict[str, object]:
    return await check_env()
"""


def container_env(objects: list[dict[str, Any]], pod_name: str) -> dict[str, str]:
    """The environment the kubelet would give the worker container."""
    kinds = {o["kind"]: o for o in objects}
    data = {k: base64.b64decode(v).decode() for k, v in kinds["Secret"]["data"].items()}
    env: dict[str, str] = {}
    container = kinds["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    for item in container["env"]:
        source = item.get("valueFrom", {})
        if "secretKeyRef" in source:
            assert source["secretKeyRef"]["name"] == kinds["Secret"]["metadata"]["name"]
            env[item["name"]] = data[source["secretKeyRef"]["key"]]
        elif "fieldRef" in source:
            field = source["fieldRef"]["fieldPath"]
            assert field in ("metadata.name", "metadata.uid")
            env[item["name"]] = pod_name if field == "metadata.name" else str(uuid.uuid4())
        else:
            env[item["name"]] = item["value"]
    return env


def keda_value(store_url: str, objects: list[dict[str, Any]]) -> int:
    import psycopg  # noqa: PLC0415

    (scaled,) = [o for o in objects if o["kind"] == "ScaledObject"]
    query = scaled["spec"]["triggers"][0]["metadata"]["query"]
    with psycopg.connect(store_url) as conn:
        row = conn.execute(query).fetchone()
    assert row is not None
    return int(row[0])


def test_the_rendered_worker_serves_its_group(postgres_url: str, tmp_path: Path) -> None:
    from postgres_support import migrated, reset  # noqa: PLC0415

    url = migrated(postgres_url)
    reset(url)
    revision = GroupRevision(
        group="wf-contract",
        revision=1,
        task_queue="workflows.wf-contract",
        source=SOURCE,
        filename="contract.py",
        env=MappingProxyType({"MODE": "cluster", "EXPECTED_DIGEST_SOURCE": PLANTED}),
        secrets=(SecretRef("ROUTER_API_KEY", "", "ROUTER_API_KEY"),),
        concurrency=4,
    )
    settings = KubernetesSettings(store_url=url, wake_ahead_seconds=0)
    out = render_manifests(
        revision, tmp_path / "k8s", settings=settings, secrets={"ROUTER_API_KEY": PLANTED}
    )
    objects = list(out.objects)
    assert keda_value(url, objects) == 0

    with keepgoing.Client(store=url) as client:
        # Rendered, not deployed: nothing has served the queue yet, and the start says so.
        with pytest.warns(keepgoing.UnknownQueueWarning, match="workflows.wf-contract"):
            handle = client.trigger_workflow("contract", {}, task_queue=revision.task_queue)
        assert keda_value(url, objects) == 1  # queued before any worker exists: wake up

        # The image's ENTRYPOINT, with the source where the image puts it (/app here).
        app = out.folder / "image" / "source"
        dockerfile = out.dockerfile.read_text()
        entry = dockerfile.rsplit("ENTRYPOINT ", 1)[1]
        argv = json.loads(entry)
        assert argv[0] == "keepgoing"
        argv = [sys.executable, "-m", "keepgoing.cli", *argv[1:]]
        argv[4] = str(app / "contract.py")  # /app/contract.py
        env = {k: v for k, v in os.environ.items() if not k.startswith("KEEPGOING_")}
        env.update(container_env(objects, "wf-contract-7d9f-abcde"))
        worker = subprocess.Popen(argv, cwd=app, env=env, stderr=subprocess.PIPE, text=True)
        try:
            result = client.result(handle, timeout=60)
            assert result == {
                "secret_ok": True,
                "group": "wf-contract",
                "instance": "wf-contract-7d9f-abcde",
                "mode": "cluster",
            }
            wait_until(lambda: keda_value(url, objects) == 0, what="the group to have no work")
        finally:
            worker.send_signal(signal.SIGTERM)
            try:
                # It stops within the pod's termination grace.
                _, err = worker.communicate(timeout=settings.termination_grace)
            except subprocess.TimeoutExpired:
                worker.kill()
                _, err = worker.communicate()
                pytest.fail(f"the worker outlived its termination grace:\n{err}")
    assert worker.returncode == 0, err
    assert PLANTED not in err
