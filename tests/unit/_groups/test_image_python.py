"""An image's Python version on the local backend: the interpreter uv finds for it, or
a refused deploy naming the versions found; never a silent substitute."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

import keepgoing
from keepgoing._client.deploy import build_plan
from keepgoing._groups import pythons
from keepgoing._groups.envs import check_local_image
from keepgoing.errors import GroupError

HERE = "{}.{}".format(*sys.version_info[:2])
APP = textwrap.dedent(
    """
    from keepgoing import Image, task, workflow

    @task(image=Image.debian_slim("3.99").pip_install("six"))
    def far_future() -> int:
        return 1

    @workflow
    async def wants_far_future() -> int:
        return await far_future()
    """
)


def test_this_interpreters_version_is_this_interpreter() -> None:
    assert pythons.find_python(HERE) == sys.executable
    assert pythons.find_python(pythons.this_python()) == sys.executable
    image = keepgoing.Image.debian_slim(HERE)
    assert check_local_image(image) == sys.executable


def test_a_version_uv_does_not_find_is_refused_naming_what_it_found() -> None:
    with pytest.raises(GroupError) as refused:
        pythons.find_python("3.99")
    text = str(refused.value)
    assert "asks for Python 3.99" in text and "never substitutes" in text
    assert pythons.this_python() in text  # at least this interpreter was found
    assert set(pythons.python_versions()) >= {pythons.this_python()}


def test_a_deploy_asking_for_a_missing_python_is_refused_and_registers_nothing(
    client: keepgoing.Client, tmp_path: Path
) -> None:
    source = tmp_path / "far_future.py"
    source.write_text(APP)
    with pytest.raises(GroupError, match=r"asks for Python 3\.99"):
        keepgoing.deploy_workflow_worker(source, name="wf-far", client=client)
    with pytest.raises(GroupError, match=r"asks for Python 3\.99"):
        build_plan(source, name="wf-far")
    assert client.groups.statuses() == []
    # The Kubernetes backend builds its own image: the version is its base image's.
    plan = build_plan(source, name="wf-far", backend="kubernetes")
    assert [g.image.python_version for g in plan.task_groups if g.image] == ["3.99"]


def test_an_interpreter_of_another_version_gets_its_own_requirements() -> None:
    wanted = pythons.runtime_requirements()
    names = {w.split(">")[0].split("=")[0].split("[")[0].strip().lower() for w in wanted}
    assert {"typer", "httpx", "fastapi", "uv"} <= names
    assert "pytest" not in names and "mypy" not in names  # the dev extra is not a replica's
