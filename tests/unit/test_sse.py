"""Server-sent event frames (keepgoing._sse): the bytes written and the events read back."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable

from keepgoing._sse import KEEPALIVE, comment, events, frame, opening, raw_frame


def test_a_named_frame_with_an_id_is_id_event_then_compact_json_data() -> None:
    assert frame({"a": [1, 2]}, event="run", event_id=12.5) == (
        b'id: 12.5\nevent: run\ndata: {"a":[1,2]}\n\n'
    )
    assert frame({"seq": 3}, event="history", event_id=3) == (
        b'id: 3\nevent: history\ndata: {"seq":3}\n\n'
    )


def test_an_unnamed_frame_is_data_alone() -> None:
    assert frame({"x": "y"}) == b'data: {"x":"y"}\n\n'
    assert raw_frame("[DONE]") == b"data: [DONE]\n\n"


def test_text_over_several_lines_is_one_data_line_each() -> None:
    assert raw_frame("one\ntwo") == b"data: one\ndata: two\n\n"


def test_comments_and_the_opening() -> None:
    assert KEEPALIVE == b": keepalive\n\n" == comment("keepalive")
    assert opening(1000, "stream of runs") == b"retry: 1000\n: stream of runs\n\n"


async def _lines(chunks: Iterable[bytes]) -> AsyncIterator[str]:
    for line in b"".join(chunks).decode().split("\n"):
        yield line


def _read(chunks: Iterable[bytes]) -> list[tuple[str, str]]:
    async def collect() -> list[tuple[str, str]]:
        return [e async for e in events(_lines(chunks))]

    return asyncio.run(collect())


def test_what_is_written_reads_back_and_comments_are_skipped() -> None:
    written = [
        opening(500, "hello"),
        frame({"n": 1}, event="run", event_id=1),
        KEEPALIVE,
        raw_frame("a\nb"),
        raw_frame("[DONE]"),
    ]
    assert _read(written) == [("run", '{"n":1}'), ("", "a\nb"), ("", "[DONE]")]


def test_a_stream_cut_before_its_blank_line_still_gives_its_last_event() -> None:
    assert _read([b"event: message_stop\ndata: {}"]) == [("message_stop", "{}")]


def test_events_without_data_and_unknown_fields_are_skipped() -> None:
    assert _read([b"event: ping\n\nfoo: bar\ndata:x\n\n"]) == [("", "x")]
