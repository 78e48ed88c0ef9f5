"""A supervisor and its assistant child, talking through messages (docs: Child workflows).

Run on a worker (send_message needs the orchestrator):
    keepgoing worker examples/supervisor.py
    python -c "from keepgoing import Client; print(Client().trigger_workflow(
        'supervisor', {'questions': ['ping', 'status']}, wait=True, timeout=60))"
Or in this process, with every step recorded:  python examples/supervisor.py
"""

from __future__ import annotations

from datetime import timedelta

from keepgoing import Client, send_message, start_child, task, wait_for_message, workflow


@task
def answer_question(question: str) -> str:
    return f"answer to {question!r}"


@workflow
async def assistant() -> int:
    answered = 0
    while True:
        ask = await wait_for_message("ask", timeout=timedelta(hours=1))
        if ask.payload.get("stop"):
            return answered
        answer = await answer_question(ask.payload["question"])
        await send_message(ask.sender_id, "answer", {"answer": answer})
        answered += 1


@workflow
async def supervisor(questions: list[str]) -> list[str]:
    helper = await start_child(assistant)
    answers = []
    for question in questions:
        await helper.send_message("ask", {"question": question})
        reply = await wait_for_message("answer", timeout=timedelta(minutes=30))
        answers.append(reply.payload["answer"])
    await helper.send_message("ask", {"stop": True})
    await helper
    return answers


if __name__ == "__main__":
    with Client(store="sqlite:///.keepgoing/examples.db") as client:
        print(client.run_workflow(supervisor, {"questions": ["ping", "status"]}))
