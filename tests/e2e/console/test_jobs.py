"""The console's six jobs, end to end: a person in a real browser against `dovecote dev`, beside
agents on the SDK. Each test writes the screenshot of its view for docs/clients/console.md."""

from __future__ import annotations

import time
import uuid
from typing import Any

from dovecote.client import DovecoteClient
from tests.e2e.console.conftest import PERSON, Watch, console_link, new_link, screenshot, sign_in

DIFF = "diff --git a/widget.py b/widget.py\n--- a/widget.py\n+++ b/widget.py\n@@ -1 +1 @@\n-old = 1\n+new = 2\n"


def client(runtime: dict[str, Any], role: str = "caller") -> DovecoteClient:
    return DovecoteClient(runtime["endpoint"], runtime["tokens"][role])


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def test_the_sign_in_link_signs_in_once_and_leaves_the_url(console_runtime: dict[str, Any], browser: Any) -> None:
    link = console_link(console_runtime)
    assert "#link=dvc_" in link
    context = browser.new_context()
    page = context.new_page()
    page.goto(link)
    page.get_by_role("heading", name="Task board").wait_for()
    assert "link=" not in page.url and "dvc_" not in page.url
    # The entry the link opened was rewritten in place (history.replaceState), so going back finds no token.
    page.go_back()
    assert "dvc_" not in page.url
    held = page.evaluate("JSON.parse(sessionStorage.getItem('dovecote.console.tokens'))")
    assert sorted(t["whoami"]["role"] for t in held) == ["admin", "caller", "worker"]
    assert {t["whoami"].get("worker") for t in held} >= {PERSON}
    assert page.evaluate("localStorage.length") == 0 and page.evaluate("document.cookie") == ""
    # The same link again, in another tab: spent.
    again = context.new_page()
    again.goto(link)
    again.get_by_text("This sign-in link was used already").wait_for()
    assert "dvc_" not in again.url
    # Signing out revokes what the link minted.
    page.get_by_role("button", name="Sign out").click()
    page.get_by_role("heading", name="Sign in").wait_for()
    minted = [t["token"] for t in held]
    with DovecoteClient(console_runtime["endpoint"], minted[0], max_attempts=1) as spent:
        try:
            spent.whoami()
        except Exception as exc:  # noqa: BLE001 - DovecoteError: 403 from the authorizer
            assert "403" in str(exc) or getattr(exc, "status", 0) == 403
        else:
            raise AssertionError("a token the console minted still works after signing out")
    context.close()


def test_a_person_claims_and_completes_a_task_an_agent_created(
    console_runtime: dict[str, Any], page: Any, watch: Watch
) -> None:
    task_id = unique("seat")
    with client(console_runtime) as agent:
        agent.create_task(task_id, "Rename old to new in widget.py", context="console-seat", workspace=unique("ws"))
        sign_in(page, console_runtime["endpoint"], console_runtime["person_worker"], view="worker")
        page.get_by_role("button", name=f"Take task {task_id}").click()
        page.get_by_text("Your moves").wait_for()
        assert page.locator(".holder").inner_text() == PERSON
        page.get_by_role("button", name="Accept").click()
        page.get_by_label("Final message").fill("Renamed it; the diff is attached.")
        page.get_by_label("Paste the artifact").fill(DIFF)
        page.get_by_role("button", name="Complete").click()
        page.get_by_text("Completed, with artifact").wait_for()
        done = agent.wait_for(task_id, "completed", timeout=20)
        assert done["artifact"] and done["submission"]
        last = agent.messages(task_id)["items"][-1]
        assert last["parts"][0]["text"] == "Renamed it; the diff is attached."
        artifact = agent.get_artifact(done["workspace"], done["artifact"])
        assert artifact["payload"]["text"] == DIFF
        # The timeline shows the terminal event, and the diff is drawn as a diff on the board.
        page.locator("[data-testid=timeline] li", has_text="completed").wait_for()
        screenshot(page, "worker-seat")
        page.goto(f"{console_runtime['endpoint']}/console/#/board/{task_id}")
        page.locator("pre.diff .add", has_text="+new = 2").wait_for()
    watch.assert_clean()


def test_a_person_fails_a_task_saying_why_and_the_caller_reads_the_reason(
    console_runtime: dict[str, Any], page: Any, watch: Watch
) -> None:
    task_id = unique("fail")
    # Agents' text is hostile by default: the reason is shown as text, never as markup.
    reason = "The build server is down <img src=x onerror=alert('xss-reason')>; try tomorrow."
    with client(console_runtime) as agent:
        agent.create_task(task_id, "Deploy the widget", context="console-fail")
        sign_in(page, console_runtime["endpoint"], console_runtime["person_worker"], view="worker")
        page.get_by_role("button", name=f"Take task {task_id}").click()
        page.get_by_text("Your moves").wait_for()
        page.get_by_role("button", name="Accept").click()
        page.get_by_label("Why it failed (optional, shown to the caller)").fill(reason)
        page.get_by_role("button", name="Fail the task").click()
        page.get_by_text("Failed, with your reason on the timeline.").wait_for()
        failed = agent.wait_for(task_id, "failed", timeout=20)
        assert failed["state"] == "failed"
        last = agent.events(task_id)["items"][-1]
        assert (last["type"], last["reason"]) == ("task_failed", reason)
        # The caller's board shows the reason on the timeline, as the text it is.
        page.goto(f"{console_runtime['endpoint']}/console/#/board/{task_id}")
        shown = page.locator("[data-testid=timeline] li .reason q")
        shown.wait_for()
        assert shown.inner_text() == reason
        assert page.locator("main img").count() == 0
    watch.assert_clean()


def test_a_person_answers_the_input_a_worker_asked_for_and_sees_the_rest_live(
    console_runtime: dict[str, Any], page: Any, watch: Watch
) -> None:
    task_id = unique("ask")
    with client(console_runtime) as caller, client(console_runtime, "worker") as worker:
        caller.create_task(task_id, "Summarise the design doc", context="console-ask")
        grant = worker.acquire(task_id)
        working = worker.accept(task_id, 1, grant["fence"])
        asked = worker.request_input(task_id, working["revision"], grant["fence"], "Which sections?")
        sign_in(page, console_runtime["endpoint"], console_runtime["tokens"]["caller"], view=f"board/{task_id}")
        page.get_by_text("Which sections?").wait_for()
        # dovecote dev serves GET /v1/tasks/{id}/stream: the timeline follows it, not a poll.
        page.get_by_text("Live (streamed).").wait_for()
        page.get_by_label("Your answer").fill("All of them, briefly.")
        page.get_by_role("button", name="Reply").click()
        page.locator("[data-testid=timeline] li", has_text="working").nth(1).wait_for()
        replied = worker.get_task(task_id)
        assert replied["state"] == "working" and replied["revision"] == asked["revision"] + 1
        assert worker.messages(task_id)["items"][-1]["parts"][0]["text"] == "All of them, briefly."
        # The worker finishes; the open page shows it without a reload, within about a second.
        started = time.monotonic()
        worker.complete(task_id, replied["revision"], grant["fence"], "Here is the summary.")
        page.locator("[data-testid=timeline] li", has_text="completed").wait_for(timeout=5_000)
        page.get_by_text("Here is the summary.").wait_for(timeout=5_000)
        seen_after = time.monotonic() - started
        print(f"live: the completion appeared {seen_after:.2f} s after the command returned (streamed)")
        screenshot(page, "board-task")
    watch.assert_clean()


def test_a_person_confirms_a_memory_candidate_and_the_api_shows_the_judgment(
    console_runtime: dict[str, Any], page: Any, watch: Watch
) -> None:
    scope = f"team/{unique('infra')}"
    with client(console_runtime) as agent:
        agent.remember(scope, "the db host is db-1.internal", tags=["subject:db-host"], wait=30)
        second = agent.remember(scope, "the db host is db-2.internal", tags=["subject:db-host"], wait=30)
        assert second["evidence"]["candidates"], second
        sign_in(page, console_runtime["endpoint"], console_runtime["tokens"]["caller"], view=f"memory?scope={scope}")
        candidate = page.locator(".candidate").first
        candidate.get_by_text("the db host is db-1.internal").wait_for()
        candidate.get_by_text("the db host is db-2.internal").wait_for()
        candidate.get_by_label("Your note").fill("moved in March")
        screenshot(page, "memory")
        candidate.get_by_role("button", name="Confirm").click()
        page.get_by_role("heading", name="Past judgments (1)").wait_for()
        judged = agent.memory_relations(scope, status="confirmed")["items"]
        assert len(judged) == 1
        assert judged[0]["judgment"]["decision"] == "confirmed" and judged[0]["judgment"]["note"] == "moved in March"
        assert agent.memory_relations(scope, status="pending")["items"] == []
    watch.assert_clean()


def test_recall_search_shows_its_completeness_widens_an_excerpt_and_outlines_a_session(
    console_runtime: dict[str, Any], page: Any, watch: Watch
) -> None:
    session = unique("sess")
    turns = [
        ("user", "The zebrafish test is flaky on CI, can you look?"),
        ("assistant", "The zebrafish test races the cache warmup; a retry hides it."),
        ("user", "Fix the race rather than retry."),
        ("assistant", "Done: the warmup is awaited before the zebrafish assertions."),
    ]
    messages = [
        {"uuid": f"{session}-{i}", "role": role, "text": text, "timestamp": f"2026-11-0{i + 1}T10:00:00Z"}
        for i, (role, text) in enumerate(turns)
    ]
    with client(console_runtime) as agent:
        agent.ingest_messages(session, messages, source="generic", project="widget")
    sign_in(page, console_runtime["endpoint"], console_runtime["tokens"]["caller"], view="recall")
    page.get_by_label("Search transcripts").fill("zebrafish")
    page.get_by_role("button", name="Search").click()
    page.locator(".completeness").wait_for()
    assert "matching conversation" in page.locator(".completeness").inner_text()
    page.get_by_role("button", name="Read the excerpt").first.click()
    page.locator(".excerpt .turn").first.wait_for()
    before = page.locator(".excerpt .turn").count()
    page.get_by_role("button", name="Widen the excerpt").click()
    page.wait_for_function("n => document.querySelectorAll('.excerpt .turn').length >= n", arg=before)
    page.get_by_role("button", name="Outline the session").first.click()
    page.get_by_role("heading", name="How it starts").wait_for()
    screenshot(page, "recall")
    watch.assert_clean()


def test_notes_are_listed_by_coordinates_and_read(console_runtime: dict[str, Any], page: Any, watch: Watch) -> None:
    key = unique("harden:widget")
    with client(console_runtime) as agent:
        agent.put_note(key, 1, "fix_plan", "plan A: rename old to new", author="claude")
        agent.put_note(key, 1, "review", "looks right", author="codex")
        agent.put_note(key, 2, "fix_plan", "plan B", author="claude")
    sign_in(page, console_runtime["endpoint"], console_runtime["tokens"]["caller"], view="notes")
    page.get_by_label("Key").fill(key)
    page.get_by_label("Run").fill("1")
    page.get_by_role("button", name="List").click()
    rows = page.locator("table.notes-list tbody tr")
    rows.nth(1).wait_for()
    assert rows.count() == 2
    page.get_by_role("link", name="fix_plan").click()
    page.get_by_text("plan A: rename old to new").wait_for()
    screenshot(page, "notes")
    watch.assert_clean()


def test_an_admin_mints_lists_and_revokes_tokens_and_sees_whoami(
    console_runtime: dict[str, Any], page: Any, watch: Watch
) -> None:
    sign_in(page, console_runtime["endpoint"], console_runtime["tokens"]["admin"], view="admin")
    page.locator("table.whoami tbody tr").first.wait_for()
    assert "admin" in page.locator("table.whoami").inner_text()
    page.get_by_label("Role").select_option("caller")
    page.get_by_label("Agent").fill("reviewer")
    page.get_by_label("Expires in days").fill("2")
    page.get_by_role("button", name="Mint").click()
    secret = page.get_by_label("The secret").input_value()
    assert secret.startswith("dvc_")
    with DovecoteClient(console_runtime["endpoint"], secret, max_attempts=1) as minted:
        me = minted.whoami()
        assert me["role"] == "caller" and me["agent"] == "reviewer"
        screenshot(page, "admin")
        page.get_by_role("button", name="Done: forget it").click()
        assert page.get_by_label("The secret").count() == 0
        page.get_by_role("button", name=f"Revoke token {me['token_id']}…").click()
        page.get_by_role("button", name=f"Revoke {me['token_id']}").click()
        page.locator("table.tokens tr", has_text=me["token_id"]).locator("time").nth(2).wait_for()
        try:
            minted.whoami()
        except Exception as exc:  # noqa: BLE001 - the authorizer's 403
            assert getattr(exc, "status", 0) == 403, exc
        else:
            raise AssertionError("the revoked token still works")
    watch.assert_clean()


def test_a_refused_token_sends_the_person_back_to_sign_in_with_the_reason(
    console_runtime: dict[str, Any], browser: Any
) -> None:
    link = new_link(console_runtime)
    context = browser.new_context()
    page = context.new_page()
    page.goto(link)
    page.get_by_role("heading", name="Task board").wait_for()
    held = page.evaluate("JSON.parse(sessionStorage.getItem('dovecote.console.tokens'))")
    with client(console_runtime, "admin") as admin:
        for token in held:
            admin.revoke_token(token["whoami"]["token_id"])
    page.get_by_role("link", name="Worker seat").click()
    page.get_by_role("heading", name="Sign in").wait_for()
    page.get_by_text("The API refused the token (403").wait_for()
    assert page.evaluate("sessionStorage.getItem('dovecote.console.tokens')") is None
    context.close()


def test_the_board_headers_break_between_words_never_inside_one(
    console_runtime: dict[str, Any], page: Any, watch: Watch
) -> None:
    """Long unbroken ids squeeze the board's columns at 1280 px: a header may wrap at a space, but not
    mid-word ("Re/v", "Fenc/e")."""
    with client(console_runtime) as agent:
        for _ in range(2):
            agent.create_task(unique("x" * 100), "squeeze", context=unique("c" * 100))
        sign_in(page, console_runtime["endpoint"], console_runtime["tokens"]["caller"], view="board")
        page.locator("[data-testid=board] tbody tr").first.wait_for()
        lines = page.evaluate(
            """() => [...document.querySelectorAll('[data-testid=board] thead th')].map(th => {
                const range = document.createRange(); range.selectNodeContents(th);
                const tops = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
                return [th.textContent.trim(), tops.size];
            })"""
        )
    assert len(lines) == 9, lines
    broken = [(text, n) for text, n in lines if n > len(text.split())]
    assert not broken, broken
    watch.assert_clean()
