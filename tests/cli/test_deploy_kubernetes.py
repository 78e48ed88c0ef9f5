"""``keepgoing deploy --backend kubernetes --out DIR``: a real deploy on PostgreSQL, written out."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
from cryptography.fernet import Fernet

from server._support import cli_env

DATA = Path(__file__).resolve().parent.parent / "data"
PLANTED = "sk-cli-planted-7d2e-never-elsewhere"

AGENT = """# /// script
# dependencies = ["httpx>=0.27"]
# ///
import keepgoing
from keepgoing import task, workflow

numpy_image = keepgoing.Image.debian_slim("3.12").apt_install("libgomp1").pip_install(["numpy"])


@task(image=numpy_image)
def score(rows: list[int]) -> list[float]:
    import numpy as np

    return np.round(np.asarray(rows) * 0.1, 2).tolist()


@task
def fetch(n: int) -> list[int]:
    return list(range(n))


@workflow
async def pipeline(n: int) -> list[float]:
    return await score(await fetch(n))
"""


@pytest.fixture
def pg(postgres_url: str) -> str:
    from postgres_support import migrated, reset  # noqa: PLC0415

    url = migrated(postgres_url)
    reset(url)
    return url


def deploy(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "keepgoing.cli", "deploy", *args],
        cwd=root,
        env={**cli_env(root), "COLUMNS": "200", **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    print(f"[exit {done.returncode}]\n{done.stdout}{done.stderr}")
    return done


def test_deploy_writes_every_group_and_registers_the_revision(pg: str, tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text(AGENT)
    out = tmp_path / "k8s"
    key = Fernet.generate_key().decode()
    args = ["agent.py", "--backend", "kubernetes", "--out", str(out), "--store", pg]
    args += ["--namespace", "agents", "--image-repository", "registry.example.com/team"]
    args += ["--local-secret", "ROUTER_API_KEY", "--max-replicas", "3", "--shutdown-delay", "20"]
    done = deploy(tmp_path, *args, ROUTER_API_KEY=PLANTED, KEEPGOING_SECRET_KEY=key)
    assert done.returncode == 0, done.stderr

    groups = sorted(p.name for p in out.iterdir())
    assert groups[0] == "wf-agent" and len(groups) == 2 and groups[1].startswith("wf-agent-")
    main, task_group = (out / g for g in groups)
    assert "libgomp1" in (task_group / "image" / "Dockerfile").read_text()
    assert "numpy" not in (main / "image" / "Dockerfile").read_text()
    assert "httpx" in (task_group / "image" / "Dockerfile").read_text()  # shared deps

    schema = json.loads((DATA / "keda-2.15-scaledobject.schema.json").read_text())
    for folder in (main, task_group):
        for path in sorted(folder.glob("*.json")):
            obj = json.loads(path.read_text())
            if obj["apiVersion"].startswith("keda.sh/"):
                jsonschema.validate(obj, schema)
            else:
                kubernetes_validate.validate(obj, "1.30", strict=True)
    scaled = json.loads((main / "04-scaledobject.json").read_text())["spec"]
    assert (scaled["maxReplicaCount"], scaled["cooldownPeriod"]) == (3, 20)
    deployment = json.loads((main / "02-deployment.json").read_text())
    env = {e["name"]: e for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["KEEPGOING_TASK_QUEUES"]["value"] == f"score=workflows.{groups[1]}"
    secret = json.loads((main / "01-secret.json").read_text())["data"]
    assert base64.b64decode(secret["ROUTER_API_KEY"]).decode() == PLANTED
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert PLANTED not in path.read_text(errors="replace"), path

    listed = subprocess.run(
        [sys.executable, "-m", "keepgoing.cli", "groups", "ls", "--store", pg, "--json"],
        cwd=tmp_path,
        env=cli_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    names = {g["group"]["name"]: g["group"] for g in json.loads(listed.stdout)}
    assert set(names) == set(groups)
    assert names["wf-agent"]["backend"] == "kubernetes"
    assert names["wf-agent"]["revision"] == 1


def test_kubernetes_needs_out_and_a_postgresql_store(pg: str, tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text(AGENT)
    no_out = deploy(tmp_path, "agent.py", "--backend", "kubernetes", "--store", pg)
    assert no_out.returncode != 0 and "--out" in no_out.stderr
    sqlite = deploy(
        tmp_path,
        "agent.py",
        "--backend",
        "kubernetes",
        "--out",
        "k8s",
        "--store",
        f"sqlite:///{tmp_path / 'kg.db'}",
    )
    assert sqlite.returncode != 0 and "PostgreSQL" in sqlite.stderr
    bad = deploy(tmp_path, "agent.py", "--backend", "nomad", "--store", pg)
    assert bad.returncode == 2 and "local or kubernetes" in bad.stderr


def test_apply_without_a_cluster_config_fails_clearly(pg: str, tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text(AGENT)
    done = deploy(
        tmp_path,
        "agent.py",
        "--backend",
        "kubernetes",
        "--out",
        "k8s",
        "--apply",
        "--store",
        pg,
        KUBECONFIG=str(tmp_path / "no-such-kubeconfig"),
        HOME=str(tmp_path),
    )
    assert done.returncode != 0
    assert "Kubernetes configuration" in done.stderr
    assert (tmp_path / "k8s" / "wf-agent" / "02-deployment.json").exists()  # rendered first


def test_a_redeploy_keeps_a_deployment_for_the_revision_that_still_has_runs(
    pg: str, tmp_path: Path
) -> None:
    import keepgoing  # noqa: PLC0415

    simple = AGENT.replace("@task(image=numpy_image)", "@task")
    (tmp_path / "agent.py").write_text(simple)
    out = tmp_path / "k8s"
    args = ["agent.py", "--backend", "kubernetes", "--out", str(out), "--store", pg]
    assert deploy(tmp_path, *args).returncode == 0
    client = keepgoing.Client(store=pg)
    try:
        client.trigger_workflow("pipeline", {"n": 2}, task_queue="workflows.wf-agent")
        (tmp_path / "agent.py").write_text(simple + "\n# revision two\n")
        done = deploy(tmp_path, *args)
        assert done.returncode == 0, done.stderr
    finally:
        client.close()
    assert sorted(p.name for p in out.iterdir()) == ["wf-agent", "wf-agent-r1"]
    kept = out / "wf-agent-r1"
    assert sorted(p.name for p in kept.glob("*.json")) == [
        "01-deployment.json",
        "02-scaledobject.json",
    ]
    deployment = json.loads((kept / "01-deployment.json").read_text())
    kubernetes_validate.validate(deployment, "1.30", strict=True)
    env = {
        e["name"]: e.get("value")
        for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["KEEPGOING_GROUP_REVISION"] == "1"
    current = json.loads((out / "wf-agent" / "02-deployment.json").read_text())
    env = {
        e["name"]: e.get("value")
        for e in current["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["KEEPGOING_GROUP_REVISION"] == "2"
    schema = json.loads((DATA / "keda-2.15-scaledobject.schema.json").read_text())
    jsonschema.validate(json.loads((kept / "02-scaledobject.json").read_text()), schema)
