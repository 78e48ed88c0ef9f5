"""Content-defined chunking: split a file where its content says, not at fixed offsets.

A gear rolling hash (FastCDC, Xia et al. 2016, with normalised chunking) runs
over the bytes; a chunk ends where the hash's bits 16..29 (before the average
size) or 16..25 (after it) are all zero. A cut depends only on the ~64 bytes
before it, so an edit moves at most the cuts next to it: every other chunk of
the new version is byte-identical to one of the old, has the same SHA-256,
and is stored once. Sizes: at least 1 KiB, about 4 KiB on average, at most
32 KiB (except the last chunk, which may be shorter). Small chunks keep the
cost of a one-line edit small, and at most 32 KiB a whole chunk fits in
zlib's window when the store compresses a new chunk against an old one.
Content up to :data:`SMALL_SIZE` is one chunk without scanning: most memory
files are that small, and the store keeps their versions as deltas anyway.

The gear table is derived from SHA-256 and must never change: chunks already
stored would still read back, but would no longer be shared with new ones.
"""

from __future__ import annotations

import hashlib

__all__ = ["AVG_SIZE", "MAX_SIZE", "MIN_SIZE", "SMALL_SIZE", "cut_points", "digest", "split"]

MIN_SIZE = 1024
AVG_SIZE = 4 * 1024
MAX_SIZE = 32 * 1024
SMALL_SIZE = 2 * AVG_SIZE
_WARMUP = 64  # the hash forgets a byte after 64 shifts: warm it up before MIN_SIZE
_MASK_HARD = ((1 << 14) - 1) << 16
_MASK_EASY = ((1 << 10) - 1) << 16
_GEAR: tuple[int, ...] = tuple(
    int.from_bytes(hashlib.sha256(b"keepgoing-gear-%d" % i).digest()[:8], "big") >> 1
    for i in range(256)
)


def digest(data: bytes) -> str:
    """SHA-256 of ``data``, hex: the address of a chunk, a file or a manifest."""
    return hashlib.sha256(data).hexdigest()


def split(data: bytes) -> list[bytes]:
    """``data`` cut into content-defined chunks (``[data]`` when it is small)."""
    start, chunks = 0, []
    for end in cut_points(data):
        chunks.append(data[start:end])
        start = end
    return chunks or [data]


def cut_points(data: bytes) -> list[int]:
    """The end offset of every chunk of ``data``; the last is ``len(data)``."""
    size, start, ends = len(data), 0, []
    if size <= SMALL_SIZE:
        return [size] if size else []
    while start < size:
        end = _next_cut(data, start, size)
        ends.append(end)
        start = end
    return ends


def _next_cut(data: bytes, start: int, size: int) -> int:
    stop = min(start + MAX_SIZE, size)
    if stop - start <= MIN_SIZE:
        return stop
    normal = min(start + AVG_SIZE, stop)
    h = _warm(data, start + MIN_SIZE - _WARMUP, start + MIN_SIZE)
    cut, h = _scan(data, start + MIN_SIZE, normal, _MASK_HARD, h)
    if cut:
        return cut
    cut, h = _scan(data, normal, stop, _MASK_EASY, h)
    return cut or stop


def _warm(data: bytes, begin: int, end: int) -> int:
    h, gear = 0, _GEAR
    for i in range(begin, end):
        h = (h >> 1) + gear[data[i]]
    return h


def _scan(data: bytes, begin: int, end: int, mask: int, h: int) -> tuple[int, int]:
    # The hot loop: a right-shifting gear hash stays below 2**64 without masking.
    gear = _GEAR
    for i in range(begin, end):
        h = (h >> 1) + gear[data[i]]
        if not h & mask:
            return i + 1, h
    return 0, h
