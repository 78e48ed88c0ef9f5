# /// script
# dependencies = ["keepgoing"]
# ///
"""OP-4C01, update a customer record in a CRM whose connection may drop after a write.

The write task records ``operation_id()`` before it sends the request, and
sends it along. When the answer is lost:

* a CRM that can look operations up (``crm="lookup"``): the retry's
  ``reconcile=`` asks the CRM what the operation did and recovers the
  confirmed result without sending the write again;
* a CRM with neither lookup nor idempotency (``crm="legacy"``): nobody can
  tell whether the write was applied, so the task raises ``UncertainOutcome``.
  The step goes to review and the run waits, holding no worker, until a
  reviewer approves (with what the CRM shows), retries or fails it.

    python -m keepgoing._demo.services.crm --folder /tmp/crm --kind legacy --port 8765 &
    curl -X POST localhost:8765/admin/drop-after-apply -d '{"count": 1}'   # arm the switch
    keepgoing worker crm_sync.py
    keepgoing run update_customer_record -i '{"customer_id": "CUS-5521", "crm": "legacy",
        "changes": {"email": "Dana@Example.com"}, "crm_url": "http://127.0.0.1:8765"}'
    keepgoing reviews                                  # the run waits for a reviewer
    keepgoing review OPERATION_ID approve --result '{"version": 1}'
"""

from __future__ import annotations

import http.client
import json
import os
import urllib.parse
from typing import Any

from keepgoing import UncertainOutcome, operation_id, task, workflow


def _journal(step: str, key: str) -> None:
    path = os.environ.get("DEMO_JOURNAL")
    if path:
        line = {"step": step, "key": key, "pid": os.getpid(), "operation": operation_id()}
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")


class _Unanswered(ConnectionError):
    """The request was sent and the connection closed before an answer came."""


def _call(
    crm_url: str, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    """One request; ``_Unanswered`` when the request went out but no answer came back."""
    url = urllib.parse.urlsplit(crm_url)
    conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port or 80, timeout=5)
    try:
        data = None if body is None else json.dumps(body)
        conn.request(
            method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})}
        )
        try:  # from here on, the CRM has the request
            answer = conn.getresponse()
        except (http.client.RemoteDisconnected, ConnectionResetError, TimeoutError) as exc:
            raise _Unanswered(
                f"{method} {path} was sent; the connection closed with no answer ({exc})"
            ) from exc
        return answer.status, json.loads(answer.read() or b"null")
    finally:
        conn.close()


@task(timeout="10s")
def prepare_update(customer_id: str, changes: dict[str, str]) -> dict[str, str]:
    """Normalise the change set (e-mail addresses in lower case, no blank fields)."""
    _journal("prepare_update", customer_id)
    fields = {k: v.strip() for k, v in changes.items() if v.strip()}
    if "email" in fields:
        fields["email"] = fields["email"].lower()
    return fields


def find_write(op: str, crm_url: str, customer_id: str, fields: dict[str, str]) -> Any:
    """``reconcile=``: what the CRM did with operation ``op``, or None if it never saw it."""
    status, body = _call(crm_url, "GET", f"/operations/{urllib.parse.quote(op)}")
    if status == 404:
        return None  # never applied: the retry sends the write
    if status != 200:
        raise RuntimeError(f"the CRM's lookup answered {status}: {body}")
    print(f"operation {op} was applied by the CRM: version {body['version']}; not sent again")
    return {**body, "recovered_by_lookup": True}


@task(retries=3, retry_delay="200ms", timeout="10s", reconcile=find_write)
def write_record(crm_url: str, customer_id: str, fields: dict[str, str]) -> dict[str, Any]:
    """Write the record to a CRM that can look operations up."""
    op = operation_id()
    _journal("write_record", op)  # recorded before the request goes out
    print(f"recorded operation {op}; sending PUT /customers/{customer_id}")
    status, body = _call(
        crm_url, "PUT", f"/customers/{customer_id}", {"fields": fields}, {"X-Operation-Id": op}
    )
    if status != 200:
        raise RuntimeError(f"the CRM answered {status}: {body}")
    return {**body, "recovered_by_lookup": False}


@task(retries=2, retry_delay="200ms", timeout="10s")
def write_record_legacy(crm_url: str, customer_id: str, fields: dict[str, str]) -> dict[str, Any]:
    """Write the record to a CRM with neither lookup nor idempotency."""
    op = operation_id()
    _journal("write_record_legacy", op)
    print(f"recorded operation {op}; sending PUT /customers/{customer_id} (no lookup, no key)")
    try:
        status, body = _call(crm_url, "PUT", f"/customers/{customer_id}", {"fields": fields})
    except _Unanswered as exc:
        # Sending it again could apply it twice; failing could hide a write that happened.
        raise UncertainOutcome(
            f"{exc}. This CRM offers no lookup and no idempotency key, so the write of "
            f"{json.dumps(fields)} to {customer_id} may or may not have been applied. "
            "Check the CRM: approve with what it shows, retry to send it again, or fail."
        ) from exc
    if status != 200:
        raise RuntimeError(f"the CRM answered {status}: {body}")
    return body  # type: ignore[no-any-return]


@task(timeout="10s")
def notify_account_team(customer_id: str, result: dict[str, Any]) -> str:
    """Tell the account team which version the CRM now holds."""
    _journal("notify_account_team", customer_id)
    return f"{customer_id} is at CRM version {result.get('version', '?')}"


@workflow
async def update_customer_record(
    customer_id: str, changes: dict[str, str], crm_url: str, crm: str = "lookup"
) -> dict[str, Any]:
    fields = await prepare_update(customer_id, changes)
    if crm == "lookup":
        written = await write_record(crm_url, customer_id, fields)
    else:
        written = await write_record_legacy(crm_url, customer_id, fields)
    note = await notify_account_team(customer_id, written)
    return {"customer_id": customer_id, "crm": written, "note": note}
