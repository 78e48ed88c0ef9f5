"""Content-defined chunking: cuts follow the content, so an edit changes few chunks."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from keepgoing._store.chunking import (
    MAX_SIZE,
    MIN_SIZE,
    SMALL_SIZE,
    cut_points,
    digest,
    split,
)


def text(lines: int, seed: int = 1) -> bytes:
    rng = random.Random(seed)
    words = ["agent", "memory", "lesson", "note", "tool", "call", "retry", "worker", "step"]
    return "".join(
        f"{i:05d} " + " ".join(rng.choice(words) for _ in range(8)) + "\n" for i in range(lines)
    ).encode()


def test_small_content_is_one_chunk() -> None:
    assert split(b"") == [b""]
    assert split(b"hello") == [b"hello"]
    small = random.Random(5).randbytes(SMALL_SIZE)
    assert split(small) == [small]
    assert len(split(small + b"!")) > 1


def test_chunks_join_back_and_respect_the_size_bounds() -> None:
    data = random.Random(3).randbytes(1_000_000)
    chunks = split(data)
    assert b"".join(chunks) == data
    assert all(MIN_SIZE <= len(c) <= MAX_SIZE for c in chunks[:-1])
    assert 3 * 1024 < len(data) / len(chunks) < 8 * 1024  # ~4 KiB on average


def test_long_runs_without_a_cut_are_bounded_by_the_maximum() -> None:
    data = bytes(300_000)  # no content to cut on
    full, rest = divmod(len(data), MAX_SIZE)
    assert [len(c) for c in split(data)] == [MAX_SIZE] * full + [rest]


def test_an_edit_changes_only_the_chunks_around_it() -> None:
    before = text(4000)
    lines = before.split(b"\n")
    lines[2000] = b"02000 this line was rewritten by the agent, and is longer than before"
    after = b"\n".join(lines)

    old = {digest(c) for c in split(before)}
    new = [digest(c) for c in split(after)]

    assert len(new) > 20
    changed = [i for i, key in enumerate(new) if key not in old]
    assert 1 <= len(changed) <= 3  # the chunk holding the edit, and perhaps a moved cut
    assert changed == list(range(changed[0], changed[0] + len(changed)))


def test_an_insertion_at_the_front_does_not_shift_every_cut() -> None:
    before = text(4000)
    after = b"a new first line\n" + before
    old = {digest(c) for c in split(before)}
    new = [digest(c) for c in split(after)]
    assert sum(key not in old for key in new) <= 3


def test_cuts_are_deterministic() -> None:
    data = text(2000, seed=9)
    assert cut_points(data) == cut_points(bytes(data))


@settings(max_examples=60, deadline=None)
@given(st.binary(min_size=0, max_size=40_000))
def test_any_content_splits_and_joins(data: bytes) -> None:
    chunks = split(data)
    assert b"".join(chunks) == data
    assert cut_points(data)[-1:] == ([len(data)] if data else [])
