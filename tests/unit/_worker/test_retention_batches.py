"""The sweep's batches are sized by how long their delete held the write lock."""

from __future__ import annotations

from keepgoing._worker.retention import FIRST_BATCH, HOLD_TARGET, next_batch


def test_a_slow_delete_halves_the_next_batch() -> None:
    assert next_batch(64, HOLD_TARGET / 2 + 0.001, 100) == 32
    assert next_batch(1, HOLD_TARGET * 10, 100) == 1  # never below one run


def test_a_fast_delete_doubles_it_up_to_the_policys_batch() -> None:
    assert next_batch(FIRST_BATCH, HOLD_TARGET / 8 - 0.001, 100) == 2 * FIRST_BATCH
    assert next_batch(64, 0.0, 100) == 100


def test_a_delete_in_between_keeps_the_size() -> None:
    assert next_batch(40, HOLD_TARGET / 4, 100) == 40
    assert next_batch(40, HOLD_TARGET / 2, 100) == 40
    assert next_batch(40, HOLD_TARGET / 8, 100) == 40
    assert next_batch(400, HOLD_TARGET / 4, 100) == 100  # a smaller policy caps it
