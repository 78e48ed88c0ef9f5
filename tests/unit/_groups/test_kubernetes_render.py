"""Kubernetes rendering: Dockerfiles (golden), manifests checked against the Kubernetes
schemas (kubernetes-validate, offline) and against KEDA 2.15's documented fields."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from types import MappingProxyType
from typing import Any

import jsonschema
import kubernetes_validate
import pytest

from keepgoing import Image
from keepgoing._groups.kubernetes import (
    KubernetesSettings,
    image_reference,
    queue_work_query,
    render_dockerfile,
    render_manifests,
    render_objects,
)
from keepgoing._groups.kubernetes.settings import KEEPGOING_URL_OPTIONS, keda_connection
from keepgoing._groups.spec import GroupRevision, SecretRef
from keepgoing.errors import GroupError

DATA = Path(__file__).resolve().parents[2] / "data"
GOLDEN = DATA / "kubernetes"
K8S_VERSION = "1.30"
STORE = "postgresql://kg:s3cret-pw@postgres.db.svc.cluster.local:5432/keepgoing?pool_max=8"
PLANTED = "sk-planted-4f1c9e-do-not-leak"
SOURCE = """# /// script
# dependencies = ["httpx>=0.27"]
# ///
from keepgoing import task, workflow
"""


def settings(**options: Any) -> KubernetesSettings:
    values: dict[str, Any] = {
        "store_url": STORE,
        "namespace": "agents",
        "image_repository": "registry.example.com/team/keepgoing",
        "keepgoing_requirement": "keepgoing[postgres]==0.1.0",
    }
    values.update(options)
    return KubernetesSettings(**values)


def revision(**options: Any) -> GroupRevision:
    values: dict[str, Any] = {
        "group": "wf-agent",
        "revision": 3,
        "task_queue": "workflows.wf-agent",
        "source": SOURCE,
        "filename": "examples/agent.py",
        "dependencies": ("httpx>=0.27",),
        "image": Image.debian_slim("3.12"),
        "cpu": "2",
        "memory": "4Gi",
        "env": MappingProxyType({"LOG_LEVEL": "info"}),
        "secrets": (SecretRef("ROUTER_API_KEY", "", "ROUTER_API_KEY"),),
        "max_replicas": 4,
        "shutdown_delay_seconds": 20.0,
    }
    values.update(options)
    return GroupRevision(**values)


SECRETS = {"ROUTER_API_KEY": PLANTED}


def _golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("KEEPGOING_REGOLD"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert text == path.read_text(), f"{name} changed; KEEPGOING_REGOLD=1 rewrites it"


# -- Dockerfiles ------------------------------------------------------------------------
def test_dockerfile_of_a_main_group_with_its_own_image(tmp_path: Path) -> None:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "system.txt").write_text("be brief")
    (tmp_path / "cfg.toml").write_text("a = 1")
    image = (
        Image.debian_slim("3.12")
        .apt_install("git", "curl")
        .pip_install(["numpy", "keepgoing[postgres]==0.1.0"])
        .uv_pip_install("orjson")
        .run_commands("echo built > /built.txt")
        .env({"MODE": 'say "hi" $HOME', "A": "1"})
        .add_local_file(tmp_path / "cfg.toml", "/etc/agent/cfg.toml")
        .add_local_dir(tmp_path / "prompts", "/opt/prompts")
        .workdir("/srv")
    )
    _golden("main-image.Dockerfile", render_dockerfile(revision(image=image), settings()))


def test_dockerfile_of_a_per_task_group_gets_the_shared_dependencies() -> None:
    task_group = revision(
        group="wf-agent-1a2b3c4d",
        task_queue="workflows.wf-agent-1a2b3c4d",
        parent="wf-agent",
        tasks=("score",),
        image=Image.debian_slim("3.11").pip_install("numpy"),
        secrets=(),
    )
    _golden("task-image.Dockerfile", render_dockerfile(task_group, settings()))


def test_dockerfile_without_an_image_installs_the_script_dependencies_and_keepgoing() -> None:
    text = render_dockerfile(revision(image=None), settings())
    assert "RUN python -m pip install 'httpx>=0.27' 'keepgoing[postgres]==0.1.0'" in text
    assert text.startswith("# keepgoing worker image for group wf-agent\n")
    assert 'COPY ["source/agent.py", "/app/agent.py"]' in text
    assert text.rstrip().endswith(
        'ENTRYPOINT ["keepgoing", "worker", "/app/agent.py", "--queue", "workflows.wf-agent", '
        '"--concurrency", "16", "--shutdown-grace", "10"]'
    )


def test_a_main_group_image_that_installs_keepgoing_is_not_given_it_twice() -> None:
    image = Image.debian_slim("3.12").pip_install("keepgoing==0.1.0")
    text = render_dockerfile(revision(image=image), settings())
    assert text.count("keepgoing==0.1.0") == 1
    assert "keepgoing[postgres]" not in text
    assert "httpx" not in text  # a custom main image installs the script's deps itself


def test_the_tag_follows_the_content(tmp_path: Path) -> None:
    base = image_reference(revision(), settings())
    assert base.startswith("registry.example.com/team/keepgoing/wf-agent:")
    assert image_reference(revision(), settings()) == base
    assert image_reference(revision(revision=9), settings()) == base  # same content, same image
    same_spec = revision(image=Image.debian_slim("3.12"), revision=3)
    assert image_reference(same_spec, settings()) == base
    assert image_reference(revision(source=SOURCE + "# more\n"), settings()) != base
    with_pkg = revision(image=Image.debian_slim("3.12").pip_install("numpy"))
    assert image_reference(with_pkg, settings()) != base


def test_the_build_context_holds_what_the_dockerfile_copies(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg.toml"
    cfg.write_text("a = 1")
    image = Image.debian_slim("3.12").add_local_file(cfg, "/etc/cfg.toml")
    out = render_manifests(
        revision(image=image), tmp_path / "out", settings=settings(), secrets=SECRETS
    )
    context = out.folder / "image"
    assert (context / "source" / "agent.py").read_text() == SOURCE
    digest = image.steps[0].args["sha256"]
    assert (context / "files" / digest).read_text() == "a = 1"
    assert f'COPY ["files/{digest}", "/etc/cfg.toml"]' in out.dockerfile.read_text()


def test_a_local_file_changed_after_the_image_was_defined_is_refused(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg.toml"
    cfg.write_text("a = 1")
    image = Image.debian_slim("3.12").add_local_file(cfg, "/etc/cfg.toml")
    cfg.write_text("a = 2")
    with pytest.raises(GroupError, match="changed since the image was defined"):
        render_manifests(
            revision(image=image), tmp_path / "out", settings=settings(), secrets=SECRETS
        )


# -- manifests --------------------------------------------------------------------------
def by_kind(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {obj["kind"]: obj for obj in objects}


def test_objects_come_in_apply_order() -> None:
    kinds = [o["kind"] for o in render_objects(revision(), settings(), SECRETS)]
    assert kinds == ["Secret", "Deployment", "TriggerAuthentication", "ScaledObject"]


@pytest.mark.parametrize("kind", ["Deployment", "Secret"])
def test_core_objects_pass_the_kubernetes_schemas(kind: str) -> None:
    obj = by_kind(render_objects(revision(), settings(), SECRETS))[kind]
    kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def test_a_broken_deployment_fails_the_schema_check() -> None:
    """The check is real: a misspelt field is caught."""
    obj = by_kind(render_objects(revision(), settings(), SECRETS))["Deployment"]
    obj["spec"]["template"]["spec"]["containers"][0]["imagePulPolicy"] = "Always"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def test_a_pinned_revision_has_a_deployment_and_scaled_object_of_its_own() -> None:
    """An older revision that still has runs: ``<group>-r<revision>``, its own pod label
    (so the group's Deployments never select each other's pods), its own work only."""
    old = revision(revision=2)
    objs = by_kind(render_objects(old, settings(), pinned=True))
    assert sorted(objs) == ["Deployment", "ScaledObject"]  # the group's Secret is shared
    dep, scaled = objs["Deployment"], objs["ScaledObject"]
    assert dep["metadata"]["name"] == scaled["metadata"]["name"] == "wf-agent-r2"
    assert dep["spec"]["selector"]["matchLabels"] == {"keepgoing.dev/group": "wf-agent-r2"}
    assert dep["spec"]["template"]["metadata"]["labels"]["keepgoing.dev/pinned-of"] == "wf-agent"
    current = by_kind(render_objects(revision(), settings(), SECRETS))["Deployment"]
    assert current["spec"]["selector"]["matchLabels"] == {"keepgoing.dev/group": "wf-agent"}
    env = {
        e["name"]: e.get("value") for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["KEEPGOING_GROUP_REVISION"] == "2" and env["KEEPGOING_GROUP"] == "wf-agent"
    assert scaled["spec"]["scaleTargetRef"]["name"] == "wf-agent-r2"
    query = scaled["spec"]["triggers"][0]["metadata"]["query"]
    assert "AND revision = 2)" in query and "IS NULL" not in query
    kubernetes_validate.validate(dep, K8S_VERSION, strict=True)
    jsonschema.validate(scaled, keda_schema())


def keda_schema() -> dict[str, Any]:
    return json.loads((DATA / "keda-2.15-scaledobject.schema.json").read_text())


@pytest.mark.parametrize("kind", ["ScaledObject", "TriggerAuthentication"])
def test_keda_objects_pass_the_documented_fields(kind: str) -> None:
    obj = by_kind(render_objects(revision(), settings(), SECRETS))[kind]
    jsonschema.validate(obj, keda_schema())


def test_a_misspelt_keda_field_fails_the_schema() -> None:
    obj = by_kind(render_objects(revision(), settings(), SECRETS))["ScaledObject"]
    obj["spec"]["triggers"][0]["metadata"]["targetQueryValu"] = "1"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(obj, keda_schema())


def test_scaled_object_mappings() -> None:
    spec = by_kind(render_objects(revision(), settings(polling_interval=5), SECRETS))[
        "ScaledObject"
    ]["spec"]
    assert spec["minReplicaCount"] == 0
    assert spec["maxReplicaCount"] == 4
    assert spec["cooldownPeriod"] == 20
    assert spec["pollingInterval"] == 5
    assert spec["scaleTargetRef"]["name"] == "wf-agent"
    (trigger,) = spec["triggers"]
    assert trigger["type"] == "postgresql"
    assert trigger["metadata"]["targetQueryValue"] == "16"
    assert trigger["metadata"]["activationTargetQueryValue"] == "0"
    # A main group counts its own revision's work (and runs recorded with none).
    query = trigger["metadata"]["query"]
    assert "keepgoing_revision_work" in query
    assert "AND (revision IS NULL OR revision = 3)" in query
    assert trigger["authenticationRef"] == {"name": "wf-agent-store"}


def test_deployment_resources_labels_env_and_termination() -> None:
    objs = by_kind(render_objects(revision(), settings(shutdown_grace=25), SECRETS))
    dep = objs["Deployment"]
    assert dep["metadata"]["namespace"] == "agents"
    assert dep["spec"]["replicas"] == 0
    pod = dep["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == 30
    (container,) = pod["containers"]
    assert container["resources"] == {
        "requests": {"cpu": "2", "memory": "4Gi"},
        "limits": {"cpu": "2", "memory": "4Gi"},
    }
    env = {e["name"]: e for e in container["env"]}
    assert env["LOG_LEVEL"] == {"name": "LOG_LEVEL", "value": "info"}
    assert env["ROUTER_API_KEY"]["valueFrom"]["secretKeyRef"] == {
        "name": "wf-agent-secrets",
        "key": "ROUTER_API_KEY",
    }
    assert env["KEEPGOING_STORE"]["valueFrom"]["secretKeyRef"]["key"] == "KEEPGOING_STORE"
    assert env["KEEPGOING_SECRET_ENV"]["value"] == "ROUTER_API_KEY"
    sel = dep["spec"]["selector"]["matchLabels"]
    assert all(dep["spec"]["template"]["metadata"]["labels"][k] == v for k, v in sel.items())


def test_task_routes_reach_the_main_worker() -> None:
    rev = revision(task_queues=MappingProxyType({"score": "workflows.wf-agent-1a2b3c4d"}))
    dep = by_kind(render_objects(rev, settings(), SECRETS))["Deployment"]
    env = {e["name"]: e for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["KEEPGOING_TASK_QUEUES"]["value"] == "score=workflows.wf-agent-1a2b3c4d"


def test_no_resources_renders_no_resources_block() -> None:
    dep = by_kind(render_objects(revision(cpu=None, memory=None), settings(), SECRETS))
    assert "resources" not in dep["Deployment"]["spec"]["template"]["spec"]["containers"][0]


def test_secret_values_are_only_in_the_secret(tmp_path: Path) -> None:
    out = render_manifests(revision(), tmp_path / "out", settings=settings(), secrets=SECRETS)
    encoded = base64.b64encode(PLANTED.encode()).decode()
    secret_file = next(p for p in out.files if "secret" in p.name)
    assert oct(secret_file.stat().st_mode & 0o777) == "0o600"
    data = json.loads(secret_file.read_text())["data"]
    assert base64.b64decode(data["ROUTER_API_KEY"]).decode() == PLANTED
    assert base64.b64decode(data["KEEPGOING_STORE"]).decode() == STORE
    for path in tmp_path.rglob("*"):
        if path.is_file():
            text = path.read_text()
            assert PLANTED not in text, path
            assert "s3cret-pw" not in text, path
            if path != secret_file:
                assert encoded not in text, path


def test_keda_connection_drops_keepgoing_options() -> None:
    assert keda_connection(STORE) == (
        "postgresql://kg:s3cret-pw@postgres.db.svc.cluster.local:5432/keepgoing"
    )
    assert keda_connection("postgres://h/db?sslmode=require&pool_min=1") == (
        "postgresql://h/db?sslmode=require"
    )


def test_keepgoing_url_options_match_the_postgres_store() -> None:
    from keepgoing._store.postgres.store import _OPTIONS  # noqa: PLC0415

    assert set(_OPTIONS) == KEEPGOING_URL_OPTIONS


def test_render_replaces_the_group_folder(tmp_path: Path) -> None:
    out = render_manifests(revision(), tmp_path, settings=settings(), secrets=SECRETS)
    stale = out.folder / "99-old.json"
    stale.write_text("{}")
    render_manifests(revision(), tmp_path, settings=settings(), secrets=SECRETS)
    assert not stale.exists()
    assert sorted(p.name for p in out.folder.glob("*.json")) == [
        "01-secret.json",
        "02-deployment.json",
        "03-triggerauthentication.json",
        "04-scaledobject.json",
    ]


# -- the query ----------------------------------------------------------------------------
def test_query_quotes_the_queue_and_adds_the_wake_ahead() -> None:
    query = queue_work_query(revision(task_queue="workflows.it's"), settings(wake_ahead_seconds=45))
    assert "queue = 'workflows.it''s'" in query
    assert "+ 45" in query
    assert "GREATEST" not in query


def test_keep_warm_queries_the_open_runs_of_the_main_group() -> None:
    task_group = revision(
        group="wf-agent-1a2b3c4d",
        task_queue="workflows.wf-agent-1a2b3c4d",
        parent="wf-agent",
        keep_warm_while_open=True,
    )
    query = queue_work_query(task_group, settings())
    assert "GREATEST" in query
    assert "open_runs" in query and "queue = 'workflows.wf-agent'" in query


# -- refusals -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"store_url": "sqlite:///kg.db"}, "needs a PostgreSQL store"),
        ({"store_url": ""}, "store URL"),
        ({"store_url": "postgresql:///db"}, "name its host"),
        ({"namespace": "Agents"}, "DNS label"),
        ({"image_repository": "Registry/UPPER"}, "image repository"),
        ({"keepgoing_requirement": "--index-url x"}, "requirement"),
        ({"polling_interval": 0}, "polling_interval"),
        ({"wake_ahead_seconds": -1}, "wake_ahead_seconds"),
        ({"shutdown_grace": float("nan")}, "shutdown_grace"),
    ],
)
def test_bad_settings_are_refused(options: dict[str, Any], match: str) -> None:
    with pytest.raises(GroupError, match=match):
        settings(**options)


def test_a_missing_or_unknown_secret_is_refused() -> None:
    with pytest.raises(GroupError, match="needs the value of secret"):
        render_objects(revision(), settings(), {})
    with pytest.raises(GroupError, match="does not use secret"):
        render_objects(revision(), settings(), {**SECRETS, "OTHER": "x"})


def test_a_source_name_that_cannot_be_a_file_is_refused() -> None:
    with pytest.raises(GroupError, match="source file name"):
        render_dockerfile(revision(filename="my agent.py"), settings())
