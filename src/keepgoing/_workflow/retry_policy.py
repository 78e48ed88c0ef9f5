"""Which errors a task retries: ``NonRetryableError``, ``retry_on`` and ``give_up_on``.

A task's ``retries`` count errors; these rules say which errors may be retried
at all. The worker asks :func:`not_retried` about each exception an attempt
raised; a non-None answer is the *cause* recorded on the attempt (reason
``"non_retryable"``), and the store never retries such an attempt
(``_store/transitions.decide_failure``); :func:`describe` gives its words to
the timeline, the steps view and ``keepgoing show``.

The order, first match wins:

1. an instance of ``NonRetryableError`` is never retried;
2. an instance of a type in ``give_up_on`` is never retried;
3. with ``retry_on`` given, an instance of none of its types is not retried;
4. anything else is retried while ``retries`` last.

Timeouts (the attempt overran its ``timeout``) and lost workers are not the
task's exceptions and are not classified here.
"""

from __future__ import annotations

from keepgoing.errors import NonRetryableError

__all__ = [
    "GIVE_UP_ON",
    "NOT_IN_RETRY_ON",
    "RAISED_NON_RETRYABLE",
    "ErrorTypes",
    "check_overlap",
    "describe",
    "exception_types",
    "not_retried",
]

ErrorTypes = tuple[type[BaseException], ...]

#: The causes an attempt not retried records (``TaskAttemptFailed.cause``).
RAISED_NON_RETRYABLE = "raised_non_retryable"
GIVE_UP_ON = "give_up_on"
NOT_IN_RETRY_ON = "not_in_retry_on"

_WORDS = {
    RAISED_NON_RETRYABLE: "not retried: the task raised a NonRetryableError",
    GIVE_UP_ON: "not retried: {error} is in the task's give_up_on",
    NOT_IN_RETRY_ON: "not retried: {error} is not in the task's retry_on",
}


def describe(cause: str | None, error_type: str) -> str:
    """Why an attempt with reason ``"non_retryable"`` was not retried, in words."""
    words = _WORDS.get(cause or "", "not retried: the error cannot succeed on a retry")
    return words.format(error=error_type.rsplit(".", 1)[-1] or "the error")


def exception_types(value: object, what: str, name: str) -> ErrorTypes:
    """``retry_on``/``give_up_on`` as a tuple of exception classes, or a clear error.

    Accepts one exception class or a tuple/list/set/frozenset of them; refuses
    anything else (an instance, a string, an empty collection) naming the value.
    """
    where = f"{what} of task {name!r}"
    items: tuple[object, ...]
    if isinstance(value, type):
        items = (value,)
    elif isinstance(value, tuple | list | set | frozenset):
        items = tuple(value)
        if not items:
            raise TypeError(f"{where} is empty; leave it out to retry every error")
    else:
        raise TypeError(
            f"{where} must be an exception class or a tuple of them, not {type(value).__name__} "
            f"{_shown(value)}"
        )
    for item in items:
        if not isinstance(item, type) or not issubclass(item, BaseException):
            raise TypeError(
                f"{where} must hold exception classes; {_shown(item)} is not one "
                f"(write the class, such as ValueError, not an instance or a name)"
            )
    return tuple(dict.fromkeys(items))  # type: ignore[arg-type]


def check_overlap(retry_on: ErrorTypes | None, give_up_on: ErrorTypes | None, name: str) -> None:
    """Refuse a type that is both retried and given up on (or whose base is), and a
    ``NonRetryableError`` in ``retry_on``, which would never be retried anyway."""
    if retry_on is None:
        return
    if any(issubclass(kept, NonRetryableError) for kept in retry_on):
        raise TypeError(
            f"retry_on of task {name!r} names a NonRetryableError, which is never retried"
        )
    for kept in retry_on:
        for dropped in give_up_on or ():
            if issubclass(kept, dropped) or issubclass(dropped, kept):
                raise TypeError(
                    f"task {name!r} names {kept.__name__} in retry_on and {dropped.__name__} in "
                    "give_up_on, which overlap; a type must be in one of them only"
                )


def not_retried(
    exc: BaseException, retry_on: ErrorTypes | None, give_up_on: ErrorTypes | None
) -> str | None:
    """The cause for which ``exc`` is not retried, or None when it may be.

    Only ``isinstance`` checks run: no method of the task's exception is called.
    """
    if isinstance(exc, NonRetryableError):
        return RAISED_NON_RETRYABLE
    if give_up_on is not None and isinstance(exc, give_up_on):
        return GIVE_UP_ON
    if retry_on is not None and not isinstance(exc, retry_on):
        return NOT_IN_RETRY_ON
    return None


def _shown(value: object) -> str:
    try:
        text = repr(value)
    except Exception:  # a hostile __repr__: name the type instead
        return f"<a {type(value).__name__}>"
    return text if len(text) <= 80 else text[:77] + "..."
