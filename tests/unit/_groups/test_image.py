"""``Image``: immutable fluent steps, validation, canonical JSON and the content hash."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from keepgoing import ConfigurationError, Image
from keepgoing._groups.image import ImageStep


def test_debian_slim_defaults_and_versions() -> None:
    assert Image.debian_slim().python_version == "3.12"
    assert Image.debian_slim("3.11").python_version == "3.11"
    assert Image.debian_slim("3.13.1").python_version == "3.13.1"
    assert Image.debian_slim().steps == ()
    assert Image.debian_slim().base == "debian_slim"


@pytest.mark.parametrize(
    "bad", ["3", "3.", "2.7", "3.10", "3.12-slim", " 3.12", "python3.12", "", 3.12, None]
)
def test_bad_python_version_is_refused(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="python_version"):
        Image.debian_slim(bad)  # type: ignore[arg-type]


def test_methods_return_new_images_and_never_mutate() -> None:
    base = Image.debian_slim("3.12")
    with_numpy = base.pip_install("numpy")
    assert base.steps == ()
    assert with_numpy is not base
    assert with_numpy.steps == (ImageStep("pip_install", {"packages": ("numpy",)}),)
    with pytest.raises(AttributeError):
        base.python_version = "3.11"  # type: ignore[misc]
    with pytest.raises(TypeError):
        with_numpy.steps[0].args["packages"] = ("x",)  # type: ignore[index]


def test_every_step_kind_is_recorded_in_order(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("hi")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.py").write_text("x = 1")
    image = (
        Image.debian_slim()
        .apt_install("curl", "git")
        .pip_install(["numpy", "pandas>=2"])
        .uv_pip_install("httpx")
        .run_commands("echo one", "echo two")
        .env({"B": "2", "A": "1"})
        .add_local_file(tmp_path / "f.txt", "/app/f.txt")
        .add_local_dir(tmp_path / "d", "/app/d")
        .workdir("/app")
    )
    kinds = [s.kind for s in image.steps]
    assert kinds == [
        "apt_install",
        "pip_install",
        "uv_pip_install",
        "run_commands",
        "env",
        "add_local_file",
        "add_local_dir",
        "workdir",
    ]
    assert image.steps[3].args["commands"] == ("echo one", "echo two")
    assert list(image.steps[4].args["vars"]) == ["A", "B"]
    file_step = image.steps[5].args
    assert file_step["sha256"] == hashlib.sha256(b"hi").hexdigest()
    assert file_step["local"] == str((tmp_path / "f.txt").resolve())
    assert image.steps[6].args["files"] == (("a.py", hashlib.sha256(b"x = 1").hexdigest()),)
    assert image.steps_of("workdir")[0].args["path"] == "/app"


def test_list_and_varargs_forms_are_equal() -> None:
    a = Image.debian_slim("3.12").pip_install(["numpy", "pandas"])
    b = Image.debian_slim("3.12").pip_install("pandas", "numpy")
    c = Image.debian_slim("3.12").pip_install(("numpy",), "pandas", "numpy")
    assert a == b == c
    assert a.hash == b.hash == c.hash
    assert hash(a) == hash(b)
    assert len({a, b, c}) == 1
    assert a.steps[0].args["packages"] == ("numpy", "pandas")


def test_different_content_differs() -> None:
    base = Image.debian_slim("3.12")
    variants = [
        base,
        Image.debian_slim("3.11"),
        base.pip_install("numpy"),
        base.uv_pip_install("numpy"),
        base.pip_install("numpy==2.0"),
        base.env({"A": "1"}),
        base.env({"A": "2"}),
        base.workdir("/app"),
        base.run_commands("a", "b"),
        base.run_commands("b", "a"),  # command order matters
        base.pip_install("a").apt_install("curl"),
        base.apt_install("curl").pip_install("a"),  # step order matters
    ]
    assert len({v.hash for v in variants}) == len(variants)


def test_hash_is_sha256_of_canonical_json_without_local_paths(tmp_path: Path) -> None:
    image = Image.debian_slim().pip_install("numpy").env({"X": "y"})
    assert image.hash == hashlib.sha256(image.canonical_json().encode()).hexdigest()
    data = json.loads(image.canonical_json())
    assert data == {
        "base": "debian_slim",
        "format": 1,
        "python_version": "3.12",
        "steps": [
            {"args": {"packages": ["numpy"]}, "kind": "pip_install"},
            {"args": {"vars": {"X": "y"}}, "kind": "env"},
        ],
    }
    assert " " not in image.canonical_json()


def test_local_file_content_changes_the_hash_and_its_location_does_not(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    (one / "cfg.toml").write_text("a = 1")
    (two / "cfg.toml").write_text("a = 1")
    first = Image.debian_slim().add_local_file(one / "cfg.toml", "/etc/cfg.toml")
    moved = Image.debian_slim().add_local_file(two / "cfg.toml", "/etc/cfg.toml")
    assert first == moved
    assert first.canonical_json() != moved.canonical_json()  # the JSON still knows where each lives
    (one / "cfg.toml").write_text("a = 2")
    changed = Image.debian_slim().add_local_file(one / "cfg.toml", "/etc/cfg.toml")
    assert changed != first
    assert first.hash != changed.hash


def test_local_dir_hash_follows_the_tree(tmp_path: Path) -> None:
    src = tmp_path / "pkg"
    (src / "sub").mkdir(parents=True)
    (src / "a.py").write_text("a")
    (src / "sub" / "b.py").write_text("b")
    (src / "__pycache__").mkdir()
    (src / "__pycache__" / "a.cpython-312.pyc").write_bytes(b"\0")
    before = Image.debian_slim().add_local_dir(src, "/app/pkg")
    assert [rel for rel, _ in before.steps[0].args["files"]] == ["a.py", "sub/b.py"]
    (src / "__pycache__" / "other.pyc").write_bytes(b"\1")
    assert Image.debian_slim().add_local_dir(src, "/app/pkg") == before  # debris is skipped
    (src / "sub" / "c.py").write_text("c")
    assert Image.debian_slim().add_local_dir(src, "/app/pkg") != before
    (src / "sub" / "c.py").unlink()
    (src / "sub" / "b.py").write_text("B")
    assert Image.debian_slim().add_local_dir(src, "/app/pkg") != before


def test_json_round_trip(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("data")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x").write_text("x")
    image = (
        Image.debian_slim("3.11")
        .apt_install("curl")
        .pip_install("numpy")
        .uv_pip_install("httpx")
        .run_commands("true")
        .env({"A": "1"})
        .add_local_file(tmp_path / "f", "/f")
        .add_local_dir(tmp_path / "d", "/d")
        .workdir("/w")
    )
    again = Image.from_json(image.canonical_json())
    assert again == image
    assert again.canonical_json() == image.canonical_json()
    assert again.steps == image.steps
    # the file is not read again: a deleted local file does not break reading the spec back
    (tmp_path / "f").unlink()
    assert Image.from_json(image.canonical_json()).hash == image.hash


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("not json", "not valid JSON"),
        ("[]", "must be an object"),
        ('{"format": 2, "base": "debian_slim", "python_version": "3.12", "steps": []}', "format"),
        ('{"format": 1, "base": "alpine", "python_version": "3.12", "steps": []}', "base"),
        (
            '{"format": 1, "base": "debian_slim", "python_version": "2.7", "steps": []}',
            "python_version",
        ),
        ('{"format": 1, "base": "debian_slim", "python_version": "3.12", "steps": {}}', "steps"),
        ('{"format": 1, "base": "debian_slim", "python_version": "3.12", "steps": [1]}', "kind"),
        (
            '{"format": 1, "base": "debian_slim", "python_version": "3.12",'
            ' "steps": [{"kind": "nope", "args": {}}]}',
            "unknown",
        ),
        (
            '{"format": 1, "base": "debian_slim", "python_version": "3.12",'
            ' "steps": [{"kind": "pip_install", "args": {}}]}',
            "packages",
        ),
        (
            '{"format": 1, "base": "debian_slim", "python_version": "3.12",'
            ' "steps": [{"kind": "pip_install", "args": {"packages": ["-r x"]}}]}',
            "installer option",
        ),
        (
            '{"format": 1, "base": "debian_slim", "python_version": "3.12",'
            ' "steps": [{"kind": "add_local_file",'
            ' "args": {"local": "/x", "remote": "/y", "sha256": "zz"}}]}',
            "sha256",
        ),
    ],
)
def test_bad_json_is_refused_clearly(text: str, match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        Image.from_json(text)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda i: i.pip_install(), "no packages"),
        (lambda i: i.pip_install([]), "no packages"),
        (lambda i: i.pip_install(""), "empty"),
        (lambda i: i.pip_install("   "), "empty"),
        (lambda i: i.pip_install(["numpy", " "]), "empty"),
        (lambda i: i.pip_install(3), "strings"),
        (lambda i: i.pip_install([3]), "string"),
        (lambda i: i.pip_install("--index-url=http://evil"), "installer option"),
        (lambda i: i.pip_install("numpy\nrm -rf /"), "newline"),
        (lambda i: i.uv_pip_install(""), "empty"),
        (lambda i: i.apt_install("Curl"), "Debian package name"),
        (lambda i: i.apt_install("curl; rm -rf /"), "Debian package name"),
        (lambda i: i.apt_install(), "no packages"),
        (lambda i: i.run_commands(), "no commands"),
        (lambda i: i.run_commands(""), "empty"),
        (lambda i: i.run_commands("a\nb"), "several lines"),
        (lambda i: i.env({}), "non-empty mapping"),
        (lambda i: i.env(["A"]), "mapping"),
        (lambda i: i.env({"A": 1}), "not a string"),
        (lambda i: i.env({"A": None}), "not a string"),
        (lambda i: i.env({"1A": "x"}), "not an environment variable name"),
        (lambda i: i.env({"A-B": "x"}), "not an environment variable name"),
        (lambda i: i.env({"A": "x\ny"}), "newline"),
        (lambda i: i.workdir("app"), "absolute"),
        (lambda i: i.workdir(""), "non-empty"),
        (lambda i: i.workdir("/app/../etc"), r"\.\."),
        (lambda i: i.add_local_file("/definitely/not/here", "/x"), "does not exist"),
        (lambda i: i.add_local_file("", "/x"), "non-empty path"),
    ],
)
def test_bad_steps_are_refused_with_the_step_named(call: object, match: str) -> None:
    with pytest.raises(ConfigurationError, match=match) as info:
        call(Image.debian_slim())  # type: ignore[operator]
    assert info.value.code == "configuration"


def test_local_paths_are_checked(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    image = Image.debian_slim()
    with pytest.raises(ConfigurationError, match=r"add_local_file: .* is not a file"):
        image.add_local_file(tmp_path, "/x")
    with pytest.raises(ConfigurationError, match=r"add_local_dir: .* is not a directory"):
        image.add_local_dir(tmp_path / "f", "/x")
    with pytest.raises(ConfigurationError, match="must be absolute"):
        image.add_local_file(tmp_path / "f", "relative/f")
    with pytest.raises(ConfigurationError, match="must be absolute"):
        image.add_local_dir(tmp_path, "relative")


def test_a_secret_like_object_in_env_is_refused() -> None:
    class FakeSecret:
        pass

    with pytest.raises(ConfigurationError, match="secrets="):
        Image.debian_slim().env({"TOKEN": FakeSecret()})  # type: ignore[dict-item]


def test_repr_names_the_version_and_hash() -> None:
    image = Image.debian_slim("3.12").pip_install("numpy")
    assert "3.12" in repr(image)
    assert image.hash[:12] in repr(image)


def test_image_is_not_equal_to_other_types() -> None:
    assert Image.debian_slim() != "debian_slim"
    assert ImageStep("env", {"vars": {}}) != {"kind": "env"}


def test_the_constructor_is_held_to_the_same_rules() -> None:
    with pytest.raises(ConfigurationError, match="python_version"):
        Image("2.7")
    with pytest.raises(ConfigurationError, match="ImageStep"):
        Image("3.12", ("pip_install",))  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="ImageStep"):
        Image("3.12", (ImageStep("rm_rf", {}),))
