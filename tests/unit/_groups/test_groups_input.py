"""Worker groups refuse bad input with errors that name the problem."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

import keepgoing
from keepgoing._client.deploy import build_plan
from keepgoing._groups.autoscaler import Autoscaler
from keepgoing._groups.registration import DeployPlan
from keepgoing._groups.secrets import SecretBox
from keepgoing._groups.spec import (
    GroupRevision,
    check_group_name,
    default_group_name,
    script_dependencies,
)
from keepgoing._history.events import ErrorInfo
from keepgoing._store.group_records import GroupLoad, GroupRecord
from keepgoing._worker.loader import task_queues_from_env
from keepgoing._worker.redact import redact_error
from keepgoing.errors import ConfigurationError, GroupError

SOURCE = """# /// script
# dependencies = ["keepgoing", "requests>=2"]
# ///
from keepgoing import task, workflow


@task
def step() -> int:
    return 1


@workflow
async def flow() -> int:
    return await step()
"""


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "My Pipeline.py"
    path.write_text(SOURCE)
    return path


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEEPGOING_SECRET_KEY", Fernet.generate_key().decode())


def test_names_are_dns_labels_of_at_most_40() -> None:
    assert check_group_name("wf-score-batch") == "wf-score-batch"
    assert default_group_name("pipeline.py") == "wf-pipeline"
    assert default_group_name("/x/My_Agent 2.py") == "wf-my-agent-2"
    with pytest.raises(GroupError, match="41 characters long; the limit is 40"):
        check_group_name("a" * 41)
    for bad in ("Upper", "-lead", "trail-", "under_score", "dot.ted", ""):
        with pytest.raises(GroupError, match=r"DNS label|non-empty"):
            check_group_name(bad)
    assert len(default_group_name("x" * 80 + ".py")) <= 40


def test_pep723_dependencies(source: Path) -> None:
    assert script_dependencies(SOURCE) == ("keepgoing", "requests>=2")
    assert script_dependencies("print(1)\n") == ()
    with pytest.raises(GroupError, match="not TOML"):
        script_dependencies("# /// script\n# dependencies = [\n# ///\n")
    with pytest.raises(GroupError, match="list of strings"):
        script_dependencies("# /// script\n# dependencies = [1]\n# ///\n")


def test_a_plan_of_a_plain_file(source: Path) -> None:
    plan = build_plan(source, shutdown_delay_seconds=5, max_replicas=3)
    assert plan.main.group == "wf-my-pipeline"
    assert plan.main.task_queue == "workflows.wf-my-pipeline"
    assert plan.main.dependencies == ("keepgoing", "requests>=2")
    assert plan.task_groups == () and plan.main.max_replicas == 3
    again = GroupRevision.from_json(plan.main.to_json())
    assert again == plan.main


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"name": "Bad_Name"}, "DNS label"),
        ({"max_replicas": 0}, "between 1 and"),
        ({"max_replicas": True}, "must be an int"),
        ({"shutdown_delay_seconds": -1}, "between 0 and 86400"),
        ({"shutdown_delay_seconds": float("nan")}, "must be a number"),
        ({"cpu": "lots"}, "cpu must be"),
        ({"cpu": 0}, "cpu must be"),
        ({"memory": "4 gigs"}, "memory must be"),
        ({"env": {"A": 1}}, "must be a string or a Secret"),
        ({"env": {"bad name": "x"}}, "environment variable names"),
        ({"env": {"KEEPGOING_STORE": "x"}}, "keepgoing sets it"),
        ({"env": ["A=1"]}, "must be a mapping"),
        ({"secrets": "S"}, "list of Secret"),
        ({"image": "python:3.12"}, "must be a keepgoing.Image"),
        ({"concurrency": 0}, "concurrency must be"),
    ],
)
def test_bad_settings_are_refused(source: Path, options: dict[str, object], message: str) -> None:
    with pytest.raises(GroupError, match=message):
        build_plan(source, **options)  # type: ignore[arg-type]


def test_a_missing_file_and_a_local_only_step(source: Path, tmp_path: Path) -> None:
    with pytest.raises(GroupError, match="not a Python file"):
        build_plan(tmp_path / "missing.py")
    image = keepgoing.Image.debian_slim().apt_install("curl")
    with pytest.raises(GroupError, match=r"apt_install\(.*local backend cannot.*kubernetes"):
        build_plan(source, image=image)
    image = keepgoing.Image.debian_slim().run_commands("make")
    with pytest.raises(GroupError, match="run_commands"):
        build_plan(source, image=image)


def test_secrets_never_show_their_value(monkeypatch: pytest.MonkeyPatch, source: Path) -> None:
    monkeypatch.setenv("TOKEN_X", "s3cr3t-value")
    secret = keepgoing.Secret.from_local_env("TOKEN_X")
    assert "s3cr3t" not in repr(secret)
    plan = build_plan(source, env={"API_KEY": secret, "PLAIN": "p"})
    assert "s3cr3t" not in plan.main.to_json()
    assert plan.uploads == {"TOKEN_X": "s3cr3t-value"}
    assert [r.env_var for r in plan.main.secrets] == ["API_KEY"]
    monkeypatch.delenv("TOKEN_X")
    with pytest.raises(GroupError, match="TOKEN_X is not set"):
        keepgoing.Secret.from_local_env("TOKEN_X")
    with pytest.raises(GroupError, match="secret name"):
        keepgoing.Secret.from_env("has space")
    kept = keepgoing.Secret.from_env("ROUTER", alias="OTHER")
    with pytest.raises(GroupError, match="pick one"):
        build_plan(source, env={"ROUTER_API_KEY": kept})
    with pytest.raises(GroupError, match="set twice"):
        build_plan(source, env={"OTHER": "x"}, secrets=[kept])


def test_the_box_refuses_another_key() -> None:
    sealed = SecretBox().seal("value")
    assert "value" not in sealed and SecretBox().open(sealed, "x") == "value"
    other = SecretBox(Fernet.generate_key())
    with pytest.raises(GroupError, match="another KEEPGOING_SECRET_KEY"):
        other.open(sealed, "x")


def test_a_malformed_key_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEEPGOING_SECRET_KEY", "not-a-key")
    with pytest.raises(ConfigurationError, match="not a Fernet key"):
        SecretBox()


def test_http_deploy_bodies_are_checked(source: Path) -> None:
    body = build_plan(source).to_body()
    assert DeployPlan.from_body(body).main.group == "wf-my-pipeline"
    for broken, message in (
        ({**body, "groups": []}, "1 to 50"),
        ({**body, "groups": [{}]}, "lacks the field"),
        ({**body, "groups": [{**body["groups"][0], "task_queue": "x"}]}, "must serve queue"),
        ({**body, "groups": [{**body["groups"][0], "source": ""}]}, "empty"),
        ({**body, "groups": [{**body["groups"][0], "filename": "../x.py"}]}, "file name"),
        ({**body, "groups": [{**body["groups"][0], "dependencies": ["evil"]}]}, "dependencies"),
        ({**body, "uploads": {"X": "v"}}, "do not match"),
        ({**body, "backend": "mars"}, "backend must be"),
    ):
        with pytest.raises(GroupError, match=message):
            DeployPlan.from_body(json.loads(json.dumps(broken)))


def test_task_routes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEEPGOING_TASK_QUEUES", "a=workflows.g-1,b=workflows.g-2")
    assert task_queues_from_env() == {"a": "workflows.g-1", "b": "workflows.g-2"}
    monkeypatch.setenv("KEEPGOING_TASK_QUEUES", "nonsense")
    with pytest.raises(ConfigurationError, match="task=queue"):
        task_queues_from_env()


def test_injected_secret_values_are_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("API_KEY", "abcd-1234")
    monkeypatch.setenv("KEEPGOING_SECRET_ENV", "API_KEY,MISSING")
    error = redact_error(
        ErrorInfo(type="E", message="failed with abcd-1234", traceback="tb abcd-1234")
    )
    assert (error.message, error.traceback) == (
        "failed with [secret API_KEY]",
        "tb [secret API_KEY]",
    )


def _group(replicas: int, cold: float | None = None) -> GroupRecord:
    return GroupRecord("g", "workflows.g", "local", None, 1, replicas, cold, 0.0, 0.0)


def _plan(scaler: Autoscaler, replicas: int, load: GroupLoad, now: float, **spec: object):  # type: ignore[no-untyped-def]
    from keepgoing._groups.autoscaler import _State  # noqa: PLC0415

    revision = GroupRevision(
        group="g", revision=1, task_queue="workflows.g", source="x", filename="x.py", **spec
    )  # type: ignore[arg-type]
    state = scaler._state.setdefault("g", _State())
    return scaler._plan(_group(replicas, cold=2.0), revision, state, load, now)


def test_the_scaling_rule() -> None:
    scaler = Autoscaler(store=None, backends={})  # type: ignore[arg-type]
    q = "workflows.g"
    up = _plan(scaler, 0, GroupLoad(q, queued=1), 100.0, max_replicas=3, concurrency=2)
    assert (up.replicas, up.reason) == (1, "scale up: 1 queued, 0 running")
    burst = _plan(
        scaler, 1, GroupLoad(q, queued=9, running=2), 100.0, max_replicas=3, concurrency=2
    )
    assert burst.replicas == 3  # capped by max_replicas
    # Running work alone keeps the replicas (the backlog is empty).
    held = _plan(scaler, 3, GroupLoad(q, running=6), 101.0, max_replicas=3, concurrency=2)
    assert (held.replicas, held.reason) == (3, None)
    # Idle: down only after the delay.
    early = _plan(scaler, 1, GroupLoad(q), 200.0, shutdown_delay_seconds=5.0)
    assert (early.replicas, early.reason, early.next_check) == (1, None, 205.0)
    late = _plan(scaler, 1, GroupLoad(q), 205.0, shutdown_delay_seconds=5.0)
    assert late.replicas == 0 and "nothing queued or running for 5.0s" in (late.reason or "")
    # A waiting run holds nothing, unless kept warm.
    assert _plan(scaler, 0, GroupLoad(q, open_runs=4), 300.0).replicas == 0
    warm = _plan(scaler, 0, GroupLoad(q, open_runs=4), 300.0, keep_warm_while_open=True)
    assert warm.replicas == 1
    # A timer due within the cold start (2 s) wakes the group; one due later is a check.
    later = _plan(scaler, 0, GroupLoad(q, next_timer=310.0), 300.0)
    assert (later.replicas, later.next_check) == (0, 308.0)
    soon = _plan(scaler, 0, GroupLoad(q, next_timer=310.0), 308.5)
    assert soon.replicas == 1 and "timer is due in 1.5s" in (soon.reason or "")
