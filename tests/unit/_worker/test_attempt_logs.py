"""Logs per attempt: routing by context (threads and coroutines), bounds, redaction,
text that is not Unicode, and tasks that close or replace sys.stdout."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import sys
import threading

import pytest

from keepgoing._worker import logs


@pytest.fixture(autouse=True)
def _routed(monkeypatch: pytest.MonkeyPatch) -> None:
    # pytest swaps its own capture streams in for each phase: route inside the test.
    monkeypatch.setattr(sys, "stdout", sys.stdout)
    monkeypatch.setattr(sys, "stderr", sys.stderr)


def _in(capture: logs.Capture, fn: object) -> None:
    logs.install()
    ctx = contextvars.copy_context()
    ctx.run(logs.current.set, capture)
    ctx.run(fn)  # type: ignore[arg-type]


def test_threads_never_mix_their_lines() -> None:
    captures = [logs.Capture() for _ in range(4)]
    barrier = threading.Barrier(4)

    def body(n: int) -> None:
        barrier.wait()
        for i in range(200):
            print(f"attempt {n} line {i}")
            sys.stderr.write(f"attempt {n} err {i}\n")

    threads = [
        threading.Thread(target=_in, args=(c, lambda n=n: body(n)))  # type: ignore[misc]
        for n, c in enumerate(captures)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for n, capture in enumerate(captures):
        text, _, truncated = capture.finish()
        lines = text.splitlines()
        assert len(lines) == 400 and not truncated
        assert all(line.startswith(f"attempt {n} ") for line in lines)


async def test_coroutines_never_mix_their_lines() -> None:
    log = logging.getLogger("user.task")
    log.setLevel(logging.INFO)

    logs.install()

    async def body(n: int, capture: logs.Capture) -> None:
        logs.current.set(capture)
        for i in range(50):
            print(f"co {n} {i}")
            log.info("co %d logged %d", n, i)
            await asyncio.sleep(0)

    captures = [logs.Capture() for _ in range(3)]
    await asyncio.gather(*(body(n, c) for n, c in enumerate(captures)))
    for n, capture in enumerate(captures):
        text = capture.finish()[0]
        lines = text.splitlines()
        assert sum(line.startswith(f"co {n} ") for line in lines) == 50
        assert sum(line.startswith(f"INFO user.task: co {n} logged") for line in lines) == 50
        assert f"co {(n + 1) % 3} " not in text
    print("outside any attempt")  # goes nowhere but the real stream
    assert all("outside" not in c.finish()[0] for c in captures)


def test_bounded_with_a_marker() -> None:
    capture = logs.Capture()
    chunk = "x" * 1023 + "\n"
    _in(capture, lambda: [sys.stdout.write(chunk) for _ in range(10 * 1024)])  # 10 MiB
    text, size, truncated = capture.finish()
    assert truncated and size == 10 * 1024 * 1024
    assert len(text.encode()) < logs.LIMIT + 200
    assert text.endswith("an attempt's log is cut at 64 KiB]\n")
    assert f"{size - logs.LIMIT:,} more bytes not kept" in text


def test_secrets_are_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_API_KEY", "sk-live-1234567890")
    monkeypatch.setenv("KEEPGOING_SECRET_ENV", "MY_API_KEY, UNSET_ONE")
    logs.register_secret("hunter2-password")
    logs.register_secret("abc")  # too short to redact
    capture = logs.Capture()
    _in(capture, lambda: print("key=sk-live-1234567890 pw=hunter2-password abc"))
    text = capture.finish()[0]
    assert text == "key=[redacted] pw=[redacted] abc\n"
    with pytest.raises(TypeError):
        logs.register_secret(b"bytes")  # type: ignore[arg-type]


def test_a_secret_across_the_bound_is_still_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEEPGOING_SECRET_ENV", "S")
    monkeypatch.setenv("S", "S3CRET-VALUE-XYZ")
    capture = logs.Capture()
    _in(capture, lambda: print("a" * (logs.LIMIT - 5) + "S3CRET-VALUE-XYZ" + "b" * 100))
    text = capture.finish()[0]
    assert "S3CRET" not in text and "XYZ" not in text


def test_binary_invalid_utf8_and_nul() -> None:
    capture = logs.Capture()

    def body() -> None:
        sys.stdout.buffer.write(b"bytes \xff\xfe ok\n")
        sys.stdout.write("lone \udcff surrogate and \x00 nul\n")
        sys.stdout.flush()

    _in(capture, body)
    text = capture.finish()[0]
    text.encode("utf-8")  # valid Unicode now
    assert "bytes \ufffd\ufffd ok" in text and "\x00" not in text
    assert "lone \ufffd" in text and "surrogate" in text


def test_closing_or_replacing_stdout() -> None:
    capture = logs.Capture()

    def body() -> None:
        sys.stdout.close()
        print("still captured after close")

    _in(capture, body)
    assert "still captured after close" in capture.finish()[0]
    assert not sys.stdout.closed
    with open("/dev/null", "w") as replaced:
        sys.stdout = replaced  # a task replacing the stream
        again = logs.Capture()
        _in(again, lambda: print("routed again"))  # the next attempt routes it again
        assert again.finish()[0] == "routed again\n"
        sys.stdout = sys.__stdout__
