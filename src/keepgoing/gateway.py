"""Model calls through the keepgoing gateway, for use inside tasks.

Every call is recorded in the usage ledger next to the step that made it (run
id, step, attempt and ``operation_id()``), and its row is settled with the
attempt's outcome: a retried attempt's earlier calls are kept, marked as a
failed (or lost) attempt, and never count as the step's success.

Where the call goes:

* ``KEEPGOING_URL`` set: to that server's OpenAI-compatible ``/v1`` API, with
  ``KEEPGOING_TOKEN`` (a token with ``gateway.use``), whose key limits apply;
* otherwise: the gateway runs in this process on ``keepgoing.toml``
  (``KEEPGOING_CONFIG``) and records into the task's store.

Example::

    import keepgoing
    from keepgoing import gateway

    @keepgoing.task(retries=2)
    def draft(topic: str) -> str:
        answer = gateway.chat(
            model="scripted",
            messages=[{"role": "user", "content": f"Summarize: {topic}. More later."}],
        )
        return answer.text or ""

A key over one of its limits raises :class:`BudgetExceededError` (its
``limit`` says which, ``resets_at`` when it frees up).
"""

from __future__ import annotations

from keepgoing._gateway.client import ChatResponse, EmbedResponse, achat, aembed, chat, embed
from keepgoing.errors import BudgetExceededError, CassetteMissError, GatewayError

__all__ = [
    "BudgetExceededError",
    "CassetteMissError",
    "ChatResponse",
    "EmbedResponse",
    "GatewayError",
    "achat",
    "aembed",
    "chat",
    "embed",
]
