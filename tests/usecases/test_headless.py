"""Each use case run headless to its end on real processes, its evidence read back."""

from __future__ import annotations

import time

import pytest

from keepgoing._demo.usecases import USE_CASES, Evidence

from ._stack import ProcessStack

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def _run(stack: ProcessStack, key: str) -> Evidence:
    (case,) = [c for c in USE_CASES if c.key == key]
    printed: list[str] = []
    evidence = case.headless(stack, printed.append)
    print("\n".join(printed))
    assert evidence.use_case == key
    assert evidence.ok, evidence.lines
    return evidence


def test_the_demo_offers_the_four_use_cases_in_order() -> None:
    assert [c.key for c in USE_CASES] == ["TKT-2418", "OP-4C01", "JOB-B772", "DIR-0429"]
    assert all(c.title and c.area and c.summary for c in USE_CASES)


def test_tkt_2418_reuses_the_customer_context_and_routing_after_a_kill(
    stack: ProcessStack,
) -> None:
    evidence = _run(stack, "TKT-2418")
    assert any(line.startswith("customer context reused: ran once") for line in evidence.lines)
    assert any(line.startswith("routing decision reused: ran once") for line in evidence.lines)


def test_op_4c01_leaves_one_crm_write_and_the_uncertain_variant_waits_for_review(
    stack: ProcessStack,
) -> None:
    evidence = _run(stack, "OP-4C01")
    assert any(line.startswith("CRM log shows 1 write for op-") for line in evidence.lines)
    reviews = stack.client.list_audit(action="operation.review")
    assert [(a.actor_kind, a.actor_id) for a in reviews] == [("user", "reviewer-dana")]


def test_job_b772_holds_no_replica_while_it_waits_and_resumes_on_the_event(
    stack: ProcessStack,
) -> None:
    evidence = _run(stack, "JOB-B772")
    assert any("holds 0 replicas" in line for line in evidence.lines)


def test_dir_0429_holds_the_lookups_back_instead_of_retrying_429s(stack: ProcessStack) -> None:
    evidence = _run(stack, "DIR-0429")
    assert any("held back before they were sent" in line for line in evidence.lines)
    said = "the run said: 'rate-limited by directory until "
    assert any(said in line for line in evidence.lines)
    # Measured apart from the evidence: the directory's own log, one line per request.
    log = (stack.workdir / "directory" / "directory.log").read_text().splitlines()
    answers = [line.split() for line in log]
    assert len(answers) >= 8 and sum(a[2] == "429" for a in answers) <= 1
    starts = sorted(float(a[0]) for a in answers if a[2] == "200")
    # Two a second with a bucket of one: no three requests went through within 0.9 s.
    assert all(later - first >= 0.9 for first, later in zip(starts, starts[2:], strict=False))


@pytest.mark.parametrize("key", ["OP-4C01", "JOB-B772", "DIR-0429"])
def test_on_postgresql(pg_stack: ProcessStack, key: str) -> None:
    _run(pg_stack, key)


def test_each_scenario_starts_live(stack: ProcessStack) -> None:
    """``start`` as the demo page calls it: side services up, the runs going on their own."""
    started = {c.key: c.start(stack) for c in USE_CASES}
    client = stack.client
    assert client.result(started["TKT-2418"], timeout=60)["routing"]["queue"] == "billing-refunds"
    assert client.result(started["JOB-B772"], timeout=60)["status"] == "reconciled"
    assert client.result(started["DIR-0429"], timeout=60)["tickets"] == 8
    review_id = started["OP-4C01"]
    lookup_id = review_id.removesuffix("-review") + "-lookup"
    assert client.result(lookup_id, timeout=60)["crm"]["recovered_by_lookup"] is True

    def waiting() -> list[str]:
        return [o.operation_id for o in client.list_reviews() if o.workflow_id == review_id]

    deadline = time.monotonic() + 60
    while not (ops := waiting()):
        assert time.monotonic() < deadline, f"{review_id} never waited for review"
        time.sleep(0.05)
    client.review_operation(ops[0], "retry", reason="send it again")
    # The retry writes again (this CRM cannot tell); the switch dropped only the first answer.
    assert client.result(review_id, timeout=60)["crm"]["version"] == 2
