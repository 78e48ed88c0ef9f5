"""OP-4C01, update customer record (CRM synchronisation): a write whose answer is lost.

Two fake CRMs run as real HTTP services (``keepgoing._demo.services.crm``), each with its
drop-after-apply switch armed: the write is applied, then the connection is
closed with no answer.

* The CRM with a lookup: the task recorded ``operation_id()`` before the
  request; its retry's ``reconcile=`` looks the operation up and recovers the
  confirmed result. The CRM's own write log shows one write.
* The CRM with neither lookup nor idempotency: the task raises
  ``UncertainOutcome``, the step goes to review and the run waits. Headless,
  the demo plays the reviewer: it checks the CRM's log and approves with what
  it shows, as a message carrying its identity, audited. Live, the page's
  review list shows the run with its evidence and the approve/retry/fail choice.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from keepgoing._demo.services.crm import CrmService
from keepgoing._demo.usecases.base import DemoStack, Evidence, UseCase
from keepgoing._demo.usecases.common import (
    FLOWS,
    Facts,
    only_step,
    short_id,
    step_env,
    steps_of,
    wait_for,
)
from keepgoing._views.operations import Operation

__all__ = ["CRM"]

KEY = "OP-4C01"
GROUP = "uc-op-4c01"
CUSTOMER = "CUS-5521"
CHANGES = {"email": " Dana.Whitfield@Example.com ", "phone": "+44 20 7946 0958"}


def _services(stack: DemoStack, base: str) -> dict[str, CrmService]:
    folder = stack.workdir / "crm" / base
    found = {kind: CrmService(folder, kind) for kind in ("lookup", "legacy")}
    for service in found.values():
        stack.add_cleanup(service.stop)
        service.drop_after_apply(1)
    return found


def _trigger(stack: DemoStack, queue: str, service: CrmService, workflow_id: str) -> str:
    handle = stack.client.trigger_workflow(
        "update_customer_record",
        {"customer_id": CUSTOMER, "changes": CHANGES, "crm_url": service.url, "crm": service.kind},
        workflow_id=workflow_id,
        task_queue=queue,
        wait=False,
    )
    return str(handle.workflow_id)


def _deploy(stack: DemoStack) -> str:
    worker = stack.deploy(
        FLOWS / "crm_sync.py",
        GROUP,
        shutdown_delay_seconds=1 if stack.fast else 20,
        env=step_env(stack, KEY),
    )
    return worker.task_queue


def start(stack: DemoStack) -> str:
    """Start both variants; returns the workflow id of the one that waits for review
    (the lookup variant's id is the same with ``-lookup`` for ``-review``)."""
    base = short_id(KEY)
    services = _services(stack, base)
    queue = _deploy(stack)
    _trigger(stack, queue, services["lookup"], f"{base}-lookup")
    return _trigger(stack, queue, services["legacy"], f"{base}-review")


def _waiting(stack: DemoStack, workflow_id: str) -> Operation | None:
    mine = [o for o in stack.client.list_reviews() if o.workflow_id == workflow_id]
    return mine[0] if mine else None


def headless(stack: DemoStack, out: Callable[[str], None]) -> Evidence:
    out(f"{KEY} · Update customer record: the CRM drops the connection after applying the write")
    base = short_id(KEY)
    services = _services(stack, base)
    queue = _deploy(stack)
    facts = Facts(out)
    timeout = 120 if stack.fast else 600

    lookup_id = _trigger(stack, queue, services["lookup"], f"{base}-lookup")
    out(f"  {lookup_id}: a CRM that can look operations up")
    result = stack.client.result(lookup_id, timeout=timeout)
    _lookup_facts(stack, facts, services["lookup"], lookup_id, result)

    review_id = _trigger(stack, queue, services["legacy"], f"{base}-review")
    out(f"  {review_id}: a CRM with neither lookup nor idempotency")
    waiting = wait_for(
        lambda: _waiting(stack, review_id), timeout, f"{review_id} to wait for review"
    )
    writes = services["legacy"].writes(CUSTOMER)
    facts.check(
        waiting.status == "uncertain" and len(writes) == 1,
        f"operation {waiting.operation_id} is uncertain, waiting for review; the CRM's log "
        f"shows {len(writes)} write (applied, its answer lost)",
    )
    evidence = (waiting.error or {}).get("message", "")
    facts.note(f"evidence for the reviewer: {evidence[:160]}")
    approved = {
        "customer_id": CUSTOMER,
        "version": len(writes),
        "confirmed_from": "the CRM's write log",
    }
    stack.client.review_operation(
        waiting.operation_id,
        "approve",
        result=approved,
        reason="the CRM's write log shows it applied",
    )
    result = stack.client.result(review_id, timeout=timeout)
    _review_facts(stack, facts, services["legacy"], review_id, waiting, result)
    return Evidence(KEY, tuple(facts.lines), facts.ok)


def _lookup_facts(
    stack: DemoStack, facts: Facts, crm: CrmService, workflow_id: str, result: Any
) -> None:
    step = only_step(steps_of(stack.client, workflow_id), "write_record")
    writes = crm.writes(CUSTOMER)
    op = step.operation_id if step is not None else "?"
    facts.check(
        len(writes) == 1 and writes[0]["operation_id"] == op,
        f"CRM log shows {len(writes)} write for {op} (the id recorded before the request)",
    )
    attempts = step.attempts if step is not None else []
    lost = _message(attempts[0].error) if attempts else "?"
    facts.check(
        len(attempts) == 2
        and attempts[0].outcome == "error"
        and attempts[1].outcome == "completed",
        f"write_record: attempt 1 lost its answer ({lost}); "
        "attempt 2's reconcile= found the operation",
    )
    crm_result = result.get("crm", {}) if isinstance(result, dict) else {}
    facts.check(
        crm_result.get("recovered_by_lookup") is True,
        f"the confirmed result was recovered by lookup, not by writing again (version "
        f"{crm_result.get('version')})",
    )
    status = stack.client.get_operation(op) if step is not None else None
    facts.check(
        status is not None and status.status == "completed",
        f"get_operation({op}) → {status.status if status else '?'}",
    )


def _review_facts(
    stack: DemoStack,
    facts: Facts,
    crm: CrmService,
    workflow_id: str,
    waiting: Operation,
    result: Any,
) -> None:
    audit = stack.client.list_audit(action="operation.review", workflow_id=workflow_id)
    who = f"{audit[0].actor_kind}:{audit[0].actor_id}" if audit else "nobody"
    facts.check(
        len(audit) == 1 and audit[0].detail.get("decision") == "approve",
        f"the reviewer's approval was sent as a message and audited (operation.review by {who})",
    )
    done = stack.client.get_operation(waiting.operation_id)
    facts.check(
        done.status == "completed"
        and isinstance(result, dict)
        and result.get("crm") == done.result,
        "the run resumed on the reviewer's message: the step returned the approved result, "
        f"notify_account_team ran ({result.get('note') if isinstance(result, dict) else '?'})",
    )
    writes = crm.writes(CUSTOMER)
    facts.check(
        len(writes) == 1, f"the CRM's log still shows {len(writes)} write: nothing was sent twice"
    )


def _message(error: dict[str, Any] | None) -> str:
    text = str((error or {}).get("message", ""))
    return text if len(text) <= 110 else text[:109] + "…"


CRM = UseCase(
    key=KEY,
    title="Update customer record",
    area="CRM synchronisation",
    summary="Look up a customer record update by its original operation ID and recover the "
    "confirmed result; when the CRM cannot say, route the write to review.",
    start=start,
    headless=headless,
)
