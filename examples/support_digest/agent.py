# /// script
# dependencies = ["keepgoing"]
# ///
"""A support-digest agent: a week of tickets in, a routed digest and its lessons out.

Every tool call (the helpdesk, the customer directory) and every model call
(classify, summarise, route, the report) is a ``@task``: a checkpointed step.
Kill the worker mid-step and a fresh one retries that step alone; finished steps
are never run again. Between batches the agent waits on a durable timer, during
which its scale-to-zero group runs no worker at all.

The customer directory allows two lookups a second. The agent looks up a batch's
customers at once, and the named limit ``directory`` (the same two a second, shared
by every worker) holds the lookups back until their turn, instead of sending them
to be refused with 429 and retried.

Its memory is the volume ``support-digest``: ``scratchpad.md`` (a line per
ticket), ``notes.md`` (a section per batch), ``report.md`` and ``lessons.md``.
Every write is a version, committed with the step that made it, and the next
run starts by reading the lessons of the last one.

The model is ``$DIGEST_MODEL`` through the keepgoing gateway: by default the
offline ``scripted`` model (deterministic, not a language model), or any alias
of ``keepgoing.toml``'s ``[gateway.models]`` (a real provider) with no change here.

Run it in this process::

    python examples/support_digest/agent.py

or call it directly, as a test would (a private store in memory; the tools read the
``tickets.json`` beside this file, since that store's inbox volume is empty)::

    asyncio.run(support_digest("k", ["FH-1041"]))

Deploy it as a worker group and trigger it: ``deploy.py`` next to this file.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from keepgoing import Volume, gateway, limits, task, workflow

MEMORY = "support-digest"  # the agent's memory volume
INBOX = "support-inbox"  # the helpdesk's export of the week (see load_inbox)
CATEGORIES = ["outage", "billing", "bug", "account", "feature", "question"]
QUEUES = {  # category -> (queue, first response target)
    "outage": ("incident", "30 minutes"),
    "billing": ("finance", "4 hours"),
    "bug": ("engineering", "1 business day"),
    "account": ("identity", "4 hours"),
    "feature": ("product", "1 week"),
    "question": ("success", "1 business day"),
}


class RateLimitedError(Exception):
    """The customer directory answered 429 Too Many Requests."""


# --- the model, through the gateway -----------------------------------------------------


def _model() -> str:
    return os.environ.get("DIGEST_MODEL") or "scripted"


def _ask(prompt: str, *, tools: list[dict[str, Any]] | None = None) -> gateway.ChatResponse:
    """One model call. ``DIGEST_PACE`` (seconds) is the least a call takes: the
    scripted model answers at once, and the demo paces it like a real one."""
    started = time.monotonic()
    answer = gateway.chat(
        model=_model(),
        messages=[
            {"role": "system", "content": "You triage support tickets for a small SaaS team."},
            {"role": "user", "content": prompt},
        ],
        tools=tools,
        max_tokens=200,
    )
    rest = float(os.environ.get("DIGEST_PACE", "0") or 0) - (time.monotonic() - started)
    if rest > 0:
        time.sleep(rest)
    return answer


def _tool(name: str, description: str, field: str, options: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {field: {"type": "string", "enum": options}},
                "required": [field],
            },
        },
    }


def _choice(answer: gateway.ChatResponse, field: str, options: list[str]) -> str | None:
    for call in answer.tool_calls:
        try:
            value = json.loads(call["function"]["arguments"]).get(field)
        except (KeyError, TypeError, ValueError):
            continue
        if value in options:
            return str(value)
    text = (answer.text or "").lower()
    return next((option for option in options if option in text), None)


# --- the tools ---------------------------------------------------------------------------


SHIPPED = Path(__file__).with_name("tickets.json")  # the week's export, beside this file


def _export_files(source: Path) -> tuple[str, dict[str, Any]]:
    """The week's name and the inbox's files (``tickets/<id>.json``, ``customers/<id>.json``)
    of a helpdesk export."""
    week = json.loads(source.read_text(encoding="utf-8"))
    files = {f"tickets/{t['id']}.json": t for t in week["tickets"]}
    files.update({f"customers/{c['id']}.json": c for c in week["customers"]})
    return str(week["week"]), files


def load_inbox(path: str | os.PathLike[str] | None = None, *, store: Any = None) -> int:
    """Put the week's helpdesk export (``tickets.json``) in the ``support-inbox`` volume,
    where every worker's tools read it. Writes a version only if it changed; returns
    the number of tickets."""
    week, files = _export_files(Path(path) if path is not None else SHIPPED)
    inbox = Volume(INBOX, store=store)
    changed = {
        name: json.dumps(value, indent=1, ensure_ascii=False)
        for name, value in files.items()
        if not inbox.exists(name) or json.loads(inbox.read_text(name)) != value
    }
    if changed:
        with inbox.batch_upload(message=f"helpdesk export {week}"):
            for name, text in sorted(changed.items()):
                inbox.put_file(name, text)
    return sum(name.startswith("tickets/") for name in files)


def _inbox_file(name: str) -> dict[str, Any] | None:
    """One file of the helpdesk export, or None when the export has no such file.

    The tools read the ``support-inbox`` volume. A volume no export was ever loaded
    into (a direct call, ``await support_digest(...)``, runs on a private store of its
    own) is read from the ``tickets.json`` shipped beside this file instead, when it is
    there: a deployed group's copy of this file has none, so its tools only ever read
    the volume."""
    inbox = Volume(INBOX)
    if inbox.latest_version() is None:
        if not SHIPPED.is_file():
            return None
        found: dict[str, Any] | None = _export_files(SHIPPED)[1].get(name)
        return found
    if not inbox.exists(name):
        return None
    value: dict[str, Any] = json.loads(inbox.read_text(name))
    return value


DIRECTORY_PER_SECOND = 2  # the customer directory's quota: 2 lookups a second, all callers
# The same quota on our side: a named limit every worker on the store shares, so the
# lookups wait for their turn (holding no worker) instead of being refused.
limits.define("directory", rate=f"{DIRECTORY_PER_SECOND}/s")


def _directory_state() -> Path:
    folder = Path(os.environ.get("SUPPORT_DIGEST_STATE") or tempfile.gettempdir())
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _directory_admits(customer_id: str) -> bool:
    """The customer directory's own rate limiter, as a service runs one: a token bucket
    of :data:`DIRECTORY_PER_SECOND` lookups a second (up to as many at once), over
    every caller. Its state is ``directory.json`` in ``$SUPPORT_DIGEST_STATE``, read and
    updated under a file lock and saved atomically, so every worker process meets the
    same quota; each answer (200 or 429) is a line of ``directory.log``."""
    folder = _directory_state()
    with open(folder / "directory.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        state_file = folder / "directory.json"
        now = time.time()
        try:
            state = json.loads(state_file.read_text(encoding="utf-8"))
            tokens, then = float(state["tokens"]), float(state["at"])
        except (OSError, ValueError, KeyError, TypeError):
            tokens, then = float(DIRECTORY_PER_SECOND), now  # a fresh directory: a full bucket
        tokens = min(DIRECTORY_PER_SECOND, tokens + max(0.0, now - then) * DIRECTORY_PER_SECOND)
        admitted = tokens >= 1
        if admitted:
            tokens = max(0.0, tokens - 1)
        saving = state_file.with_name(f".directory.{os.getpid()}.json")
        saving.write_text(json.dumps({"tokens": tokens, "at": now}), encoding="utf-8")
        os.replace(saving, state_file)  # atomic: a reader sees the old state or the new
        with open(folder / "directory.log", "a", encoding="utf-8") as log:
            log.write(f"{now:.3f} {customer_id} {200 if admitted else 429}\n")
    return admitted


@task(retries=2, retry_delay="1s", timeout="30s")
def fetch_ticket(ticket_id: str) -> dict[str, Any]:
    """Tool: the helpdesk's copy of one ticket."""
    ticket = _inbox_file(f"tickets/{ticket_id}.json")
    if ticket is None:
        raise LookupError(f"the helpdesk has no ticket {ticket_id}")
    return ticket


@task(retries=4, retry_delay="1s", timeout="20s", rate_limit="directory")
def lookup_customer(customer_id: str) -> dict[str, Any]:
    """Tool: the customer directory, which refuses callers over its quota (429). The
    ``directory`` limit holds the lookups back to that quota before they are sent; a
    429 can still happen (the directory counts other callers too), and the task's
    retries cover it."""
    if not _directory_admits(customer_id):
        raise RateLimitedError("429 Too Many Requests from the customer directory; retry in 1s")
    customer = _inbox_file(f"customers/{customer_id}.json")
    if customer is None:
        raise LookupError(f"the customer directory has no customer {customer_id}")
    return customer


# --- the model steps -----------------------------------------------------------------------


HINTS = (  # the team's keyword rules, given to the model as a hint (checked in this order)
    ("outage", ("502", "outage", "incident", "all twelve offices", "cannot get in")),
    ("account", ("password", "log in", "locked", "two-factor", "sso", "login", "invite")),
    ("billing", ("charged", "refund", "quote", "seats", "vat", "credit note", "payment")),
    ("feature", ("feature request", "would love", "idea", "would help", "planned")),
    ("bug", ("crash", "fail", "not ", "stopped", "timeout", "missing", "duplicat", "wrong")),
)


def _hint(ticket: dict[str, Any]) -> str:
    text = f"{ticket['subject']} {ticket['body']}".lower()
    return next((c for c, words in HINTS if any(w in text for w in words)), "question")


@task(retries=2, retry_delay="2s", timeout="2m")
def classify_ticket(ticket: dict[str, Any], lessons: str) -> dict[str, str]:
    """Model: the ticket's category. (The scripted model, not a language model,
    follows the keyword hint; a real one weighs it against the text.)"""
    tool = _tool("set_category", "Record the ticket's category", "category", CATEGORIES)
    prompt = (
        f"Ticket {ticket['id']} ({ticket['product']}): {ticket['subject']}. {ticket['body']}\n"
        f"Keyword rules suggest: {_hint(ticket)}."
    )
    if lessons:
        prompt += f"\n\nWhat earlier digests learned:\n{lessons[-1500:]}"
    answer = _ask(prompt, tools=[tool])
    category = _choice(answer, "category", CATEGORIES) or "question"
    return {"category": category, "model": answer.model}


@task(retries=2, retry_delay="2s", timeout="2m")
def summarise_ticket(ticket: dict[str, Any]) -> str:
    answer = _ask(f"Summarize: {ticket['body']}")
    text = (answer.text or ticket["subject"]).strip()
    return text.removeprefix("Summary:").strip()


@task(retries=2, retry_delay="2s", timeout="2m")
def route_ticket(ticket: dict[str, Any], category: str, customer: dict[str, Any]) -> dict[str, Any]:
    queue, target = QUEUES[category]
    queues = sorted(q for q, _ in QUEUES.values())
    tool = _tool("route", "Send the ticket to a queue", "queue", queues)
    prompt = (
        f"Route ticket {ticket['id']} ({category}, priority {ticket['priority']}) from a "
        f"{customer['plan']} customer. Team policy: {category} tickets go to the {queue} queue."
    )
    answer = _ask(prompt, tools=[tool])
    chosen = _choice(answer, "queue", queues) or queue
    escalate = ticket["priority"] == "urgent" or (
        ticket["priority"] == "high" and customer["plan"] == "enterprise"
    )
    return {"queue": chosen, "respond_within": target, "escalate": escalate}


# --- memory ---------------------------------------------------------------------------


@task(retries=2, timeout="30s")
def open_memory(run_key: str) -> str:
    """Read what earlier runs learned, and start this run's scratchpad and notes."""
    memory = Volume(MEMORY)
    lessons = memory.read_text("lessons.md") if memory.exists("lessons.md") else ""
    memory.put_file("scratchpad.md", f"# Scratchpad: {run_key}\n\n")
    memory.put_file("notes.md", f"# Notes: {run_key}\n")
    return lessons


@task(retries=2, timeout="30s")
def jot(entry: dict[str, Any]) -> int:
    """Append one ticket's line to the scratchpad (one version per ticket)."""
    memory = Volume(MEMORY)
    text = memory.read_text("scratchpad.md")
    flag = " ESCALATE" if entry["escalate"] else ""
    again = f" (follow-up of {entry['follow_up_of']})" if entry["follow_up_of"] else ""
    text += (
        f"- {entry['id']} [{entry['category']} -> {entry['queue']}]{flag} "
        f"{entry['customer']}{again}: {entry['summary']}\n"
    )
    memory.put_file("scratchpad.md", text)
    return text.count("\n- ")


@task(retries=2, timeout="30s")
def write_notes(batch: int, entries: list[dict[str, Any]]) -> str:
    memory = Volume(MEMORY)
    queues: dict[str, int] = {}
    for entry in entries:
        queues[entry["queue"]] = queues.get(entry["queue"], 0) + 1
    lines = [f"\n## Batch {batch}: {len(entries)} tickets"]
    lines += [f"- {queue}: {count}" for queue, count in sorted(queues.items())]
    escalated = [e["id"] for e in entries if e["escalate"]]
    if escalated:
        lines.append(f"- escalated: {', '.join(escalated)}")
    section = "\n".join(lines) + "\n"
    memory.put_file("notes.md", memory.read_text("notes.md") + section)
    return section


@task(retries=2, retry_delay="2s", timeout="3m")
def draft_report(run_key: str, entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The report, written from the notes: one model call per queue, then report.md."""
    memory = Volume(MEMORY)
    notes = memory.read_text("notes.md")
    by_queue: dict[str, list[dict[str, Any]]] = {}
    for entry in entries:
        by_queue.setdefault(entry["queue"], []).append(entry)
    parts = [f"# Support digest {run_key}", "", f"{len(entries)} tickets this week.", ""]
    escalated = [e for e in entries if e["escalate"]]
    if escalated:
        parts += ["## Escalations", ""]
        parts += [f"- {e['id']} {e['customer']}: {e['summary']}" for e in escalated]
        parts.append("")
    for queue, items in sorted(by_queue.items(), key=lambda kv: -len(kv[1])):
        joined = " ".join(item["summary"].rstrip(".") + "." for item in items)
        lead = (_ask(f"Summarize: {joined}").text or "").removeprefix("Summary:").strip()
        parts += [f"## {queue} ({len(items)})", "", lead, ""]
        parts += [f"- {item['id']}: {item['summary']}" for item in items]
        parts.append("")
    repeats = [e for e in entries if e["follow_up_of"]]
    if repeats:
        parts += ["## Repeat contacts", ""]
        parts += [f"- {e['id']} follows {e['follow_up_of']} ({e['customer']})" for e in repeats]
        parts.append("")
    parts += ["## From the notes", "", notes.split("\n", 1)[1].strip(), ""]
    memory.put_file("report.md", "\n".join(parts))
    return {"sections": len(by_queue), "escalations": len(escalated), "repeats": len(repeats)}


@task(retries=2, timeout="30s")
def record_lessons(run_key: str, lessons: str, entries: list[dict[str, Any]]) -> list[str]:
    """Append what this run learned to lessons.md, for the next run to read first."""
    repeats: dict[str, int] = {}
    for entry in entries:
        if entry["follow_up_of"]:
            repeats[entry["customer"]] = repeats.get(entry["customer"], 0) + 1
    busiest = max(
        {e["queue"] for e in entries}, key=lambda q: sum(e["queue"] == q for e in entries)
    )
    learned = [f"{run_key}: the {busiest} queue was the busiest; staff it first."]
    for customer, count in sorted(repeats.items(), key=lambda kv: -kv[1])[:3]:
        learned.append(
            f"{run_key}: {customer} wrote {count + 1} times about one problem; "
            "reply to the first ticket before the follow-ups arrive."
        )
    text = lessons or "# Lessons\n"
    text += "\n" + "\n".join(f"- {line}" for line in learned) + "\n"
    Volume(MEMORY).put_file("lessons.md", text)
    return learned


# --- the agent ---------------------------------------------------------------------------


@workflow
async def support_digest(
    run_key: str, ticket_ids: list[str], batch_size: int = 8, pause_seconds: float = 30.0
) -> dict[str, Any]:
    """Triage ``ticket_ids`` in batches, with a durable back-off window between
    batches, then write the report and the lessons."""
    lessons = await open_memory(run_key)
    entries: list[dict[str, Any]] = []
    first_seen: dict[tuple[str, str], str] = {}
    for start in range(0, len(ticket_ids), batch_size):
        if start:
            await asyncio.sleep(pause_seconds)  # a durable timer: no worker is held
        batch: list[dict[str, Any]] = []
        tickets = [await fetch_ticket(t) for t in ticket_ids[start : start + batch_size]]
        # Every customer of the batch at once: the directory limit lets them through
        # two a second, and the rest wait their turn without holding a worker.
        wanted = sorted({ticket["customer_id"] for ticket in tickets})
        found = await asyncio.gather(*(lookup_customer(c) for c in wanted))
        customers = dict(zip(wanted, found, strict=True))
        for ticket in tickets:
            ticket_id, customer = ticket["id"], customers[ticket["customer_id"]]
            label, summary = await asyncio.gather(
                classify_ticket(ticket, lessons), summarise_ticket(ticket)
            )
            route = await route_ticket(ticket, label["category"], customer)
            key = (ticket["customer_id"], label["category"])
            entry = {
                "id": ticket_id,
                "customer": customer["name"],
                "category": label["category"],
                "summary": summary,
                "follow_up_of": first_seen.get(key),
                "model": label["model"],
                **route,
            }
            first_seen.setdefault(key, ticket_id)
            await jot(entry)
            batch.append(entry)
        await write_notes(start // batch_size + 1, batch)
        entries += batch
    report = await draft_report(run_key, entries)
    learned = await record_lessons(run_key, lessons, entries)
    return {
        "run_key": run_key,
        "tickets": len(entries),
        "started_with_lessons": bool(lessons),
        "lessons_learned": learned,
        "model": entries[0]["model"] if entries else None,
        **report,
    }


if __name__ == "__main__":
    from keepgoing import Client

    store = os.environ.get("KEEPGOING_STORE", "sqlite:///.keepgoing/examples.db")
    count = load_inbox(store=store)
    ids = [f"FH-{1041 + n}" for n in range(count)]
    with Client(store=store) as client:
        result = client.run_workflow(
            support_digest, {"run_key": "week-42", "ticket_ids": ids, "pause_seconds": 1}
        )
    print(json.dumps(result, indent=2))
    print(Volume(MEMORY, store=store).read_text("report.md"))
