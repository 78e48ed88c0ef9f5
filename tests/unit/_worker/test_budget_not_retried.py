"""A step whose model call is over its key's budget fails at once: never retried blindly."""

from __future__ import annotations

from keepgoing._store.transitions import OVER_BUDGET, decide_failure
from keepgoing._worker.attempts import _reason
from keepgoing.errors import BudgetExceededError, UncertainOutcome


def test_an_attempt_over_budget_is_not_retried() -> None:
    error = BudgetExceededError("over the key's total budget of $1", limit="total_budget")
    assert _reason(error) == OVER_BUDGET
    assert _reason(RuntimeError("boom")) == "error"
    assert _reason(UncertainOutcome("maybe")) != OVER_BUDGET
    decision = decide_failure(
        reason=OVER_BUDGET,
        failures=0,
        worker_losses=0,
        retries=5,
        max_worker_losses=3,
        retry_delay=0.0,
        now=100.0,
    )
    assert decision.retry_at is None and decision.failures == 1


def test_budget_exceeded_is_public() -> None:
    import keepgoing  # noqa: PLC0415
    from keepgoing import errors, gateway  # noqa: PLC0415

    assert keepgoing.BudgetExceededError is errors.BudgetExceededError
    assert gateway.BudgetExceededError is errors.BudgetExceededError
    assert issubclass(errors.BudgetExceededError, errors.GatewayError)
