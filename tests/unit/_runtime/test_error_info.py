"""Describing a failure never fails: ``error_info`` and the attempt's reason, whatever
the task's exception does when it is printed or how deep an UncertainOutcome sits."""

from __future__ import annotations

import pytest

from keepgoing import UncertainOutcome
from keepgoing._runtime.instance import error_info
from keepgoing._worker.attempts import _reason


class _RaisesInStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no")


class _ReturnsInt(Exception):
    def __str__(self) -> str:
        return 7  # type: ignore[return-value]  # noqa: PLE0307


class _Interrupts(Exception):
    def __str__(self) -> str:
        raise KeyboardInterrupt


class _Sneaky(str):
    def isascii(self) -> bool:
        raise RuntimeError("a str subclass's own methods are never called")


class _ReturnsSubclass(Exception):
    def __str__(self) -> str:
        return _Sneaky("a message")


class _OddModule(Exception):
    pass


_OddModule.__module__ = 5  # type: ignore[assignment]


def _raised(kind: type[BaseException]) -> BaseException:
    try:
        raise kind()
    except BaseException as exc:
        return exc


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        (_RaisesInStr, f"<str() of the {__name__}._RaisesInStr failed: RuntimeError>"),
        (_ReturnsInt, f"<str() of the {__name__}._ReturnsInt failed: TypeError>"),
        (_Interrupts, f"<str() of the {__name__}._Interrupts failed: KeyboardInterrupt>"),
        (_ReturnsSubclass, "a message"),
    ],
)
def test_a_message_that_cannot_be_had_is_a_placeholder(
    kind: type[BaseException], message: str
) -> None:
    info = error_info(_raised(kind))
    assert info.message == message and type(info.message) is str
    assert info.type == f"{__name__}.{kind.__qualname__}"
    assert info.traceback is not None and "_raised" in info.traceback


def test_an_odd_module_name_still_names_the_type() -> None:
    info = error_info(_raised(_OddModule))
    assert info.type == "<unknown module>._OddModule"


def test_a_lone_surrogate_in_a_message_is_escaped() -> None:
    info = error_info(ValueError("bad \udc80 text"))
    assert info.message == "bad \\udc80 text"


@pytest.mark.parametrize(
    ("exc", "reason"),
    [
        (UncertainOutcome("maybe"), "uncertain"),
        (ExceptionGroup("g", [UncertainOutcome("maybe")]), "uncertain"),
        (ExceptionGroup("g", [ValueError(), UncertainOutcome("maybe")]), "uncertain"),
        (
            BaseExceptionGroup(
                "g", [KeyboardInterrupt(), ExceptionGroup("h", [UncertainOutcome()])]
            ),
            "uncertain",
        ),
        (ExceptionGroup("g", [ValueError(), TypeError()]), "error"),
        (ValueError(), "error"),
    ],
)
def test_uncertain_outcome_anywhere_in_a_group_is_uncertain(
    exc: BaseException, reason: str
) -> None:
    assert _reason(exc) == reason
