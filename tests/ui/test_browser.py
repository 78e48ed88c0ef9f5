"""The web UI in a real browser, against a real server and two real workers.

The tests run in file order and share one server: the run whose worker the
kill test kills is the recording the replay test plays back.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import re
import signal
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from ._recording import WORKFLOW, record_long_run
from ._stack import UiStack, wait_until
from .conftest import shoot, sign_in

pytestmark = pytest.mark.timeout(120)

SHARED: dict[str, str] = {}


def expect_text(page: Any, selector: str, pattern: str, timeout: float = 20_000) -> None:
    page.wait_for_function(
        "([s, p]) => { const n = document.querySelector(s);"
        " return n && new RegExp(p).test(n.textContent); }",
        arg=[selector, pattern],
        timeout=timeout,
    )


def step_row(page: Any, name: str) -> Any:
    return page.locator(".tl-row", has=page.locator(".tl-label", has_text=re.compile(f"^{name}")))


def test_sign_in_see_a_run_appear_and_its_steps_go_live(context: Any, stack: UiStack) -> None:
    page = sign_in(context, stack, stack.admin)
    page.wait_for_selector("#runs-body")
    stack.start("live-1", ticket="L-1", hold=True)
    # The list refreshes by itself (SSE, or the bounded refresh): no reload here.
    page.wait_for_selector("tr[data-workflow-id='live-1']")
    shoot(page, "runs")
    page.click("tr[data-workflow-id='live-1'] a.run-link")
    page.wait_for_selector(".tl-row")
    wait_until((stack.root / "holding-L-1").exists, 30, "enrich to be held")
    step_row(page, "intake").locator(".bar-completed").wait_for()
    step_row(page, "enrich").locator(".bar-running").wait_for()  # live: the open attempt
    stack.release("L-1")
    step_row(page, "route").locator(".bar-completed").wait_for()
    expect_text(page, "#run-title", "completed")
    assert page.errors == []


def test_the_inspector_shows_a_steps_checkpoint(context: Any, stack: UiStack) -> None:
    stack.start("insp-1", ticket="I-1")
    stack.wait_status("insp-1", "completed")
    page = sign_in(context, stack, stack.admin, "/run?id=insp-1")
    step_row(page, "enrich").click()
    expect_text(page, "#inspector-title", "enrich")
    inputs = json.loads(page.text_content("#insp-inputs"))
    assert inputs["args"][0] == "I-1" and inputs["args"][1]["customer"] == "C-42"
    assert json.loads(page.text_content("#insp-output"))["plan"] == "refund"
    run_id = stack.run("insp-1")["run_id"]
    assert f"op-{run_id}-" in page.text_content("#inspector dl")
    rows = page.locator("#insp-attempts tbody tr")
    assert rows.count() == 1 and "completed" in rows.first.text_content()
    link = page.locator("#insp-memory a")
    assert link.text_content() == "notes-I-1 v1"
    shoot(page, "inspector")
    link.click()
    page.wait_for_selector("#versions-body tr")
    assert page.locator("#files-title").text_content() == "Files at v1"
    # Keyboard: the timeline is a listbox; arrows move, Enter opens the step.
    page.goto(f"{stack.url}/run?id=insp-1")
    page.wait_for_selector(".tl-row")
    page.focus(".tl-view")
    page.keyboard.press("Home")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    expect_text(page, "#inspector-title", "route")


def test_kill_the_worker_then_the_retry_completes_elsewhere(context: Any, stack: UiStack) -> None:
    stack.start("kill-1", ticket="K-1", hold=True)
    holding = stack.root / "holding-K-1"
    wait_until(holding.exists, 30, "enrich to be held")
    victim = int(holding.read_text())
    page = sign_in(context, stack, stack.admin, "/run?id=kill-1")
    step_row(page, "enrich").locator(".bar-running").wait_for()
    button = page.locator("#kill-worker")
    if stack.offers("/api/v1/runs/{workflow_id}/kill-worker"):
        button.wait_for(state="visible")
        shoot(page, "run-live")
        asked: list[str] = []
        page.once("dialog", lambda d: (asked.append(d.message), d.accept()))
        button.click()
        wait_until(lambda: asked, 10, "the kill to ask for confirmation")
        assert "SIGKILL the worker running step enrich" in asked[0]
    else:  # the server side of the button is not merged yet: kill it as the button would
        assert button.count() == 1  # the control is there for an admin
        os.kill(victim, signal.SIGKILL)
    wait_until(lambda: not _alive(victim), 30, "the worker to die")
    lost = step_row(page, "enrich").locator(".bar-worker_lost")
    lost.wait_for(timeout=40_000)
    dead = lost.get_attribute("data-worker")
    assert dead and dead in lost.text_content()
    done = step_row(page, "enrich").locator(".bar-completed")
    done.wait_for(timeout=40_000)
    assert done.get_attribute("data-worker") not in ("", dead)  # another worker retried it
    expect_text(page, "#run-title", "completed", 40_000)
    step_row(page, "enrich").click()
    attempts = page.locator("#insp-attempts tbody tr")
    assert attempts.count() == 2
    assert f"worker lost ({dead})" in attempts.nth(0).text_content()
    assert "completed" in attempts.nth(1).text_content()
    if stack.offers("/api/v1/runs/{workflow_id}/kill-worker"):
        expect_text(page, "#insp-attempts .killed", "worker killed from the UI by root")
        assert "worker killed from the UI by root" in lost.text_content()
        assert lost.get_attribute("data-cause") == "killed_by_request"
    step_row(page, "intake").click()
    expect_text(page, "#inspector .reused", "Replacement worker reused the saved output")
    shoot(page, "worker-lost")
    SHARED["recovered"] = "kill-1"
    stack.start_ui_worker("worker-c")  # two workers again for the tests that follow


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A killed child stays a zombie until reaped; it holds no lease any more.
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ")[-1].startswith("Z"))


def test_browse_volume_versions_diff_and_roll_back(context: Any, stack: UiStack) -> None:
    stack.start("vol-1", ticket="V-1")
    stack.wait_status("vol-1", "completed")
    page = sign_in(context, stack, stack.admin, "/memory")
    page.click("a.volume-link:text-is('notes-V-1')")
    page.wait_for_selector("#versions-body tr[data-version='2']")
    writer = page.locator("#versions-body tr[data-version='1'] a.writer")
    assert "step #2 attempt 1" in page.locator("#versions-body tr[data-version='1']").text_content()
    assert writer.count() == 1
    page.click("button[data-path='notes.md']")
    assert "routed to billing" in page.text_content("#file-content")
    page.check("input[data-version='1']")
    page.check("input[data-version='2']")
    page.click("#diff-selected")
    expect_text(page, "#vol-diff-summary", "added 1 · removed 0 · changed 1")
    diff = page.locator("pre[data-path='notes.md'] .diff-add")
    assert any("routed to billing" in t for t in diff.all_text_contents())
    page.on("dialog", lambda d: d.accept())
    page.click("button.rollback[data-version='1']")
    page.wait_for_selector("#versions-body tr[data-version='3']")
    expect_text(page, "#files-title", "Files at v3")
    page.wait_for_selector("button[data-path='notes.md']")
    assert page.locator("button[data-path='decision.md']").count() == 0  # v1 had no decision
    page.click("button[data-path='notes.md']")
    expect_text(page, "#file-view h3", "at v3")
    assert "routed" not in page.text_content("#file-content")
    with stack.api(stack.admin) as api:
        audit = api.get("/api/v1/audit", params={"action": "volume.rollback"}).json()["entries"]
    assert audit[0]["actor_id"] == "root" and audit[0]["detail"]["version"] == 1
    # The writer link names the run id; it leads to that run's page.
    writer.click()
    expect_text(page, "#run-title", "vol-1")


def test_replay_a_recorded_run_to_its_retried_step(context: Any, stack: UiStack) -> None:
    recovered = SHARED.get("recovered")
    if recovered is None:
        pytest.fail("the kill test did not leave a recovered run to replay")
    page = sign_in(context, stack, stack.admin, f"/replay?id={recovered}")
    page.wait_for_selector("#scrubber:not([hidden])")
    page.click("#to-retry")
    expect_text(page, "#playhead-text", "TaskCompleted")
    # At this point: intake done, enrich lost its worker once and completed on retry,
    # route not yet scheduled.
    assert step_row(page, "intake").locator(".bar-completed").count() == 1
    assert step_row(page, "enrich").locator(".bar-worker_lost").count() == 1
    assert step_row(page, "enrich").locator(".bar-completed").count() == 1
    assert step_row(page, "route").count() == 0
    expect_text(page, "#inspector-title", "enrich")
    assert page.locator("#insp-attempts tbody tr").count() == 2
    assert "notes-K-1 v1" in page.text_content("#replay-memory-list")
    shoot(page, "replay")
    # Back to the start: nothing has run yet.
    page.fill("#playhead", "1")
    page.dispatch_event("#playhead", "input")
    assert page.locator(".tl-row").count() == 0
    # Play to the end.
    page.select_option("#speed", "60")
    page.click("#play")
    expect_text(page, "#play", "Play")  # it pauses itself at the end
    step_row(page, "route").locator(".bar-completed").wait_for()


def test_replay_a_history_file_by_upload_and_by_url(
    context: Any, stack: UiStack, tmp_path: Path
) -> None:
    recovered = SHARED.get("recovered")
    if recovered is None:
        pytest.fail("the kill test did not leave a recovered run to replay (run the whole file)")
    with stack.api(stack.admin) as api:
        events = api.get(f"/api/v1/runs/{recovered}/history").json()["events"]
    recording = tmp_path / "run.history.json"
    recording.write_text(json.dumps({"events": events}))
    page = sign_in(context, stack, stack.admin, "/replay")
    page.set_input_files("#src-file", str(recording))
    expect_text(page, "#replay-status", f"run.history.json: {len(events)} events")
    page.click("#to-retry")
    page.wait_for_selector(".tl-row")
    # Not JSON at all, or JSON that is not a history: a clear message.
    bad = tmp_path / "bad.json"
    bad.write_text('{"rows": [1, 2]}')
    page.set_input_files("#src-file", str(bad))
    expect_text(page, "#replay-status", "not a keepgoing history")
    # A URL on this server loads; one on another origin is refused by the page itself
    # (its policy is connect-src 'self') with a message saying what to do instead.
    page.fill("#src-url-input", f"/api/v1/runs/{recovered}/history")
    page.click("#src-url button[type=submit]")
    expect_text(page, "#replay-status", f"{len(events)} events")
    with _serving({"/rec.json": json.dumps({"events": events})}) as base:
        page.fill("#src-url-input", f"{base}/rec.json")
        page.click("#src-url button[type=submit]")
        expect_text(page, "#replay-status", "this page loads only from this server")


class _Files(BaseHTTPRequestHandler):
    files: ClassVar[dict[str, str]] = {}

    def do_GET(self) -> None:
        body = self.files.get(self.path)
        if body is None:
            self.send_response(404)
            self.end_headers()
            return
        data = body.encode()
        self.send_response(200)
        kind = "text/html" if self.path.endswith(".html") else "application/json"
        self.send_header("Content-Type", kind)
        self.send_header("Access-Control-Allow-Origin", "*")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


class _serving:
    """A throwaway HTTP server on another origin (127.0.0.2 is another site than 127.0.0.1)."""

    def __init__(self, files: dict[str, str]) -> None:
        handler = type("Files", (_Files,), {"files": files})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        return f"http://localhost:{self.httpd.server_address[1]}"

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_diff_two_runs(context: Any, stack: UiStack) -> None:
    stack.start("diff-a", ticket="D-1")
    stack.start("diff-b", ticket="D-2")
    stack.wait_status("diff-a", "completed")
    stack.wait_status("diff-b", "completed")
    page = sign_in(context, stack, stack.admin, "/diff?a=diff-a&b=diff-b")
    page.wait_for_selector("#diff-steps tbody tr")
    assert page.locator("#diff-steps tbody tr").count() == 3
    assert "D-1" in page.text_content("#diff-input-a")
    assert "D-2" in page.text_content("#diff-input-b")
    assert "differs" in (page.locator("#diff-input-a").locator("..").get_attribute("class") or "")
    summary = page.text_content("#diff-summary")
    assert "3 of 3 steps differ" in summary and "Inputs differ" in summary
    page.fill("#diff-b", "no-such-run")
    page.click("#diff-form button[type=submit]")
    expect_text(page, "#diff-out .error", "no run has workflow id 'no-such-run'")


def test_a_token_without_runs_cancel_sees_no_cancel_and_gets_403(
    context: Any, stack: UiStack
) -> None:
    stack.start("perm-1", ticket="P-1", hold=True)
    wait_until((stack.root / "holding-P-1").exists, 30, "enrich to be held")
    reader = stack.token("reader", "runs.read")
    page = sign_in(context, stack, reader, "/run?id=perm-1")
    step_row(page, "enrich").locator(".bar-running").wait_for()
    assert page.locator("#cancel-run").count() == 0
    assert page.locator("#kill-worker").count() == 0
    assert page.locator("#send-form").count() == 0
    assert page.locator("nav a[href='/audit']").count() == 0
    # Posting anyway, with a valid CSRF token from the page: the server refuses.
    answer = page.evaluate(
        """async () => {
            const csrf = JSON.parse(document.getElementById("kg-page").textContent).csrf;
            const r = await fetch("/api/v1/runs/perm-1/cancel", {method: "POST",
                headers: {"Content-Type": "application/json", "X-CSRF-Token": csrf}, body: "{}"});
            return [r.status, (await r.json()).code];
        }"""
    )
    assert answer == [403, "permission_denied"]
    assert stack.run("perm-1")["status"] == "running"
    stack.release("P-1")
    stack.wait_status("perm-1", "completed")


def test_a_cross_site_post_without_csrf_is_refused(context: Any, stack: UiStack) -> None:
    stack.start("csrf-b", ticket="C-1", hold=True)
    wait_until((stack.root / "holding-C-1").exists, 30, "enrich to be held")
    page = sign_in(context, stack, stack.admin, "/")
    # Same page, the session cookie, no CSRF token: refused.
    answer = page.evaluate(
        """async () => {
            const r = await fetch("/api/v1/runs/csrf-b/cancel", {method: "POST",
                headers: {"Content-Type": "application/json"}, body: "{}"});
            return [r.status, (await r.json()).code];
        }"""
    )
    assert answer == [403, "csrf_failed"]
    # Another site's page posting a form at the server: refused (the cookie is
    # SameSite=Strict, so it is not even sent), and nothing is cancelled.
    form = f"""<form id="f" method="post" action="{stack.url}/api/v1/runs/csrf-b/cancel"
        enctype="application/x-www-form-urlencoded"><input name="reason" value="x"></form>
        <script>document.getElementById("f").submit()</script>"""
    with _serving({"/attack.html": form}) as base:
        attacker = context.new_page()
        with attacker.expect_navigation(url=re.compile(r"/cancel$")):
            attacker.goto(f"{base}/attack.html")
        assert attacker.url.endswith("/cancel")
        assert '"code":"unauthenticated"' in attacker.content().replace(" ", "")
    assert stack.run("csrf-b")["status"] == "running"
    stack.release("C-1")
    stack.wait_status("csrf-b", "completed")


def test_workers_and_audit_pages(context: Any, stack: UiStack) -> None:
    stack.start("audit-1", ticket="T-audit")  # a workflow.trigger entry of this test's own
    stack.wait_status("audit-1", "completed")
    page = sign_in(context, stack, stack.admin, "/workers")
    page.wait_for_selector("#workers-body tr[data-worker]")
    assert page.locator("#workers-body tr[data-worker]").count() >= 2
    assert "support" in page.text_content("#workers-body")
    page.goto(f"{stack.url}/audit")
    page.wait_for_selector("#audit-body tr[data-action]")
    page.fill("#a-action", "workflow.trigger")
    page.click("#audit-form button[type=submit]")
    # The filtered page replaces the table: wait until every row is one the filter keeps.
    page.wait_for_function(
        "() => { const rs = [...document.querySelectorAll('#audit-body tr[data-action]')];"
        " return rs.length > 0 && rs.every(r => r.dataset.action === 'workflow.trigger'); }",
        timeout=20_000,
    )
    actions = {
        a
        for a in page.locator("#audit-body tr").evaluate_all("rs => rs.map(r => r.dataset.action)")
    }
    assert actions == {"workflow.trigger"}


def test_readable_on_a_phone(browser: Any, stack: UiStack) -> None:
    ctx = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    try:
        page = sign_in(ctx, stack, stack.admin, "/run?id=insp-1")
        page.wait_for_selector(".tl-row")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"the page scrolls sideways on a phone ({width}px wide)"
        step_row(page, "enrich").click()
        expect_text(page, "#inspector-title", "enrich")
        shoot(page, "phone")
        labels = page.evaluate(
            """() => [...document.querySelectorAll("input, select, textarea, button")]
                .filter((n) => n.type !== "hidden" && n.offsetParent !== null)
                .filter((n) => !(n.labels && n.labels.length) && !n.getAttribute("aria-label")
                    && !n.textContent.trim())
                .map((n) => n.outerHTML)"""
        )
        assert labels == []
    finally:
        ctx.close()


def test_a_run_of_10000_events_opens_with_only_the_rows_in_view(
    context: Any, stack: UiStack
) -> None:
    """Prints the time to open (``bench.ui_open`` collects it; no assertion on time)
    and checks what makes it fast: the timeline and the history draw only a window."""
    with stack.api(stack.admin) as api:
        answer = api.post("/api/v1/runs", json={"workflow": WORKFLOW, "workflow_id": "long-1"})
        assert answer.status_code == 201, answer.text
    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # Playwright holds this loop
        pool.submit(record_long_run, stack.store_url, 4998).result()
    with stack.api(stack.admin) as api:
        events = api.get("/api/v1/runs/long-1/history").json()["events"]
    assert len(events) == 10_000
    page = sign_in(context, stack, stack.admin, "/run?id=long-1")
    opened = []
    for _ in range(5):
        page.goto(f"{stack.url}/run?id=long-1")
        page.wait_for_selector("body[data-opened-ms]", timeout=30_000)
        opened.append(int(page.get_attribute("body", "data-opened-ms") or 0))
    print(f"UI_OPEN_MS events={len(events)} opened_ms={','.join(map(str, opened))}")
    expect_text(page, "#tl-summary", "4998 steps")
    drawn = page.locator(".tl-row").count()
    assert 0 < drawn < 120, f"{drawn} rows in the DOM for 4998 steps"
    page.eval_on_selector(".tl-view", "v => { v.scrollTop = v.scrollHeight; }")
    page.wait_for_selector(".tl-row[data-cmd='4998']")
    page.click("#tab-history")
    expect_text(page, "#panel-history .pager", f"{len(events)} of {len(events)} events")
    assert page.locator("#hist-body tbody tr").count() == 200  # a page, not 10,000 rows
    page.fill("#hist-filter", "WorkflowCompleted")
    expect_text(page, "#panel-history .pager", f"1 of {len(events)} events")


def test_send_a_message_and_see_it_in_the_lineage_with_its_sender(
    context: Any, stack: UiStack
) -> None:
    stack.start("msg-1", ticket="M-1", hold=True)
    wait_until((stack.root / "holding-M-1").exists, 30, "enrich to be held")
    page = sign_in(context, stack, stack.admin, "/run?id=msg-1")
    page.click("#send-box summary")
    page.fill("#msg-name", "note")
    page.fill("#msg-payload", "{not json")
    page.click("#send-form button[type=submit]")
    expect_text(page, "#toast", "The payload is not JSON")
    page.fill("#msg-payload", '{"priority": "high"}')
    page.click("#send-form button[type=submit]")
    expect_text(page, "#toast", "Sent message")
    page.click("#tab-lineage")
    expect_text(page, "#lineage-messages", "user root", 30_000)
    assert '"priority":"high"' in page.text_content("#lineage-messages").replace(" ", "")
    assert "This run" in page.text_content("#lineage-runs")
    stack.release("M-1")
    stack.wait_status("msg-1", "completed")


def test_the_review_list_shows_a_waiting_run_with_its_evidence_and_approving_resumes_it(
    context: Any, stack: UiStack
) -> None:
    reviewer = stack.token("rev-ui", "runs.read", "messages.send")
    reader = stack.token("read-ui", "runs.read")
    stack.start("crm-rev-1", workflow="crm_update", customer="CUS-7", fields={"tier": "gold"})
    page = sign_in(context, stack, reviewer, "/reviews")
    card = page.locator("article.review[data-workflow-id='crm-rev-1']")
    card.wait_for(timeout=30_000)
    run_id = stack.run("crm-rev-1")["run_id"]
    assert card.get_attribute("data-operation") == f"op-{run_id}-1"
    assert (
        "closed the connection after PUT /customers/CUS-7"
        in card.locator(".evidence").text_content()
    )
    assert json.loads(card.locator(".evidence-inputs").text_content())["args"][0] == "CUS-7"
    assert "sent PUT /customers/CUS-7" in card.locator(".evidence-logs").text_content()
    shoot(page, "reviews")
    card.locator("textarea.review-result").fill("{not json")
    card.locator("button[data-decision='approve']").click()
    expect_text(page, "#toast", "The result is not JSON")
    card.locator("textarea.review-result").fill('{"tier": "gold", "version": 4}')
    card.locator("input.review-reason").fill("the CRM shows version 4")
    card.locator("button[data-decision='approve']").click()
    expect_text(page, "#toast", "Sent approve")
    stack.wait_status("crm-rev-1", "completed")
    assert stack.run("crm-rev-1")["result"] == {
        "customer": "CUS-7",
        "crm": {"tier": "gold", "version": 4},
    }
    page.wait_for_selector("#no-reviews")
    with stack.api(stack.admin) as api:
        (audit,) = api.get(
            "/api/v1/audit", params={"action": "operation.review", "workflow_id": "crm-rev-1"}
        ).json()["entries"]
    assert audit["actor_id"] != "root" and audit["detail"]["decision"] == "approve"
    assert audit["detail"]["reason"] == "the CRM shows version 4"
    # A token that may only read sees the evidence, not the choice.
    stack.start("crm-rev-2", workflow="crm_update", customer="CUS-8", fields={})
    readonly = sign_in(context.browser.new_context(), stack, reader, "/reviews")
    readonly.locator("article.review[data-workflow-id='crm-rev-2']").wait_for(timeout=30_000)
    assert readonly.locator("article.review[data-workflow-id='crm-rev-2'] button").count() == 0
    assert page.errors == [] and readonly.errors == []


def test_group_revisions_with_their_pinned_runs_and_a_runs_revision(
    context: Any, stack: UiStack
) -> None:
    from keepgoing._clock import system_clock  # noqa: PLC0415
    from keepgoing._store.records import StartRequest  # noqa: PLC0415
    from server._support import run_store  # noqa: PLC0415

    spec = json.dumps({"group": "wf-ui-pinned", "revision": 0})
    queue = "workflows.wf-ui-pinned"

    async def setup(store: Any) -> None:
        # A Kubernetes group: the server's autoscaler leaves it alone (KEDA's job).
        kw = {"task_queue": queue, "backend": "kubernetes", "parent": None, "spec": spec}
        await store.deploy_group(name="wf-ui-pinned", now=system_clock.now(), **kw)
        await store.start_run(
            StartRequest(
                run_id="run-ui-pinned",
                workflow_id="ui-pinned",
                workflow_name="never_served",
                input={"args": [], "kwargs": {}},
                task_queue=queue,
                code_version="",
                now=system_clock.now(),
            )
        )
        await store.deploy_group(name="wf-ui-pinned", now=system_clock.now(), **kw)

    # Playwright's loop runs on this thread: the store is set up from another one.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(run_store, stack.store_url, setup).result(timeout=30)
    page = sign_in(context, stack, stack.admin, "/workers")
    page.wait_for_selector('#groups-body [data-group="wf-ui-pinned"] tr[data-revision="1"]')
    card = '#groups-body [data-group="wf-ui-pinned"]'
    expect_text(page, f'{card} tr[data-revision="1"]', "pinned: 1 run")
    expect_text(page, f'{card} tr[data-revision="2"]', "current")
    page.click(f'{card} tr[data-revision="1"] a')
    page.wait_for_selector('#runs-body tr:has-text("ui-pinned")')
    assert page.input_value("#f-revision") == "1"
    page.goto(f"{stack.url}/run?id=ui-pinned")
    expect_text(page, "#run-revision", "Revision 1")
    expect_text(page, "#run-patches", "Patches none")
