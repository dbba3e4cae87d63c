"""`dovecote recall …`: push transcripts and recall them.

push walks `~/.claude/projects` (Claude Code) and `~/.codex/sessions` (Codex CLI) style trees (or the
files and trees named; a name that does not exist is a usage error), sniffs each `.jsonl` file's
format (Claude Code, Codex, or the generic form of any other tool: dovecote.client.generic), asks
the server which files it lacks (`POST /v1/transcripts/check`) and sends those
(dovecote.client.capture). Small files are indexed inline; large ones go through a presigned upload
and are indexed asynchronously. `--json` prints the HTTP answer of the read verbs (search, read,
outline, topics, rebuild) and a summary of push.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer

from dovecote.cli.common import EXIT_USAGE, CliError, client, err, note, out, print_json, print_table, say
from dovecote.cli.groups import new_app
from dovecote.client.capture import (
    DEFAULT_LOG,
    DEFAULT_STATE,
    FORMATS,
    Outcome,
    TranscriptPusher,
    Watcher,
    hook_files,
    log_line,
    log_outcomes,
    private_umask,
    project_folder,
    sniff_format,
    transcript_files,
)
from dovecote.client.errors import UNAVAILABLE, DovecoteError

app = new_app("Recall past conversations: push transcripts, search for refs, read around a ref, outline a session.")
Json = Annotated[bool, typer.Option("--json", help="Print the HTTP answer's JSON.")]
IncludeTools = Annotated[bool, typer.Option(help="Include tool calls and their output.")]
IncludeThinking = Annotated[bool, typer.Option(help="Include the assistant's thinking.")]

__all__ = ["app", "project_folder", "sniff_format"]


# ---- push, watch, hook --------------------------------------------------------------------------


def _summary(outcomes: list[Outcome], files: int) -> dict[str, Any]:
    count = {
        status: sum(o.status == status for o in outcomes) for status in ("pushed", "unchanged", "skipped", "failed")
    }
    return {
        "files": files,
        **count,
        "messages": sum(o.messages for o in outcomes),
        "queued": sum(o.queued for o in outcomes),
        "failures": [{"file": o.path, "error": o.reason} for o in outcomes if o.status == "failed"],
    }


@app.command("push")
def push(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(metavar="PATHS", help="Files or trees (default: ~/.claude/projects ~/.codex/sessions)."),
    ] = None,
    fmt: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="Force a format instead of sniffing each file: claude-code-jsonl, codex-jsonl, or generic (any "
            'other tool\'s conversation: JSON lines {"role", "text" or "content", "timestamp"?}, or the '
            "POST /v1/transcripts body; docs/services/recall.md).",
        ),
    ] = None,
    project: Annotated[str | None, typer.Option(help="Project label for every file (default: from the cwd).")] = None,
    state: Annotated[
        Path, typer.Option(help="Where the SHA-256 of pushed files is kept (used when the server cannot say).")
    ] = DEFAULT_STATE,
    force: Annotated[bool, typer.Option(help="Push even files the server already has.")] = False,
    watch: Annotated[
        bool, typer.Option("--watch", help="Keep running: push new and changed files as they appear (Ctrl-C stops).")
    ] = False,
    interval: Annotated[float, typer.Option(help="Seconds between polls with --watch.", min=0.05)] = 2.0,
    log: Annotated[Path, typer.Option(help="With --watch, where failures and pushes are logged.")] = DEFAULT_LOG,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print a JSON summary (with --watch: a line per poll).")
    ] = False,
) -> None:
    """Send the transcripts the server lacks (new, changed, or never sent to this server and
    authority), with a progress bar (bytes, files, messages)."""
    private_umask()  # the state and the log are the user's only
    if fmt is not None and fmt not in FORMATS:
        raise CliError(f"--format must be one of {', '.join(FORMATS)}", EXIT_USAGE)
    for given in paths or []:
        if not given.expanduser().exists():
            raise CliError(f"no such file or directory: {given}", EXIT_USAGE, details={"file": str(given)})
    roots = paths or [Path("~/.claude/projects"), Path("~/.codex/sessions")]
    if not paths and not any(root.expanduser().exists() for root in roots):
        note("no ~/.claude/projects or ~/.codex/sessions here: name files or trees to push")
    pusher = TranscriptPusher(client(), state, fmt=fmt, project=project, force=force)
    if watch:
        _watch(pusher, roots, interval, log, as_json)
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn

    files = list(transcript_files(roots))
    pusher.check(files)
    outcomes: list[Outcome] = []
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TextColumn("{task.fields[files]} files"),
        TextColumn("{task.fields[messages]} messages"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=err.console(), disable=as_json) as progress:
        task = progress.add_task(
            "push", total=sum(f.stat().st_size for f in files), files=f"0/{len(files)}", messages=0
        )
        for number, path in enumerate(files, 1):
            outcome = pusher.push(path)
            if outcome.code == UNAVAILABLE and outcome.http_status == 0:
                # Dovecote is unreachable: every other file would fail the same way.
                progress.stop()
                raise DovecoteError(0, UNAVAILABLE, outcome.message)
            outcomes.append(outcome)
            messages = sum(o.messages for o in outcomes)
            progress.update(task, advance=outcomes[-1].size, files=f"{number}/{len(files)}", messages=messages)
    summary = _summary(outcomes, len(files))
    if as_json:
        print_json(summary)
    else:
        say(
            f"{summary['pushed']} pushed ({summary['messages']} messages, {summary['queued']} queued for indexing), "
            f"{summary['unchanged']} unchanged (the server has them), {summary['skipped']} not transcripts, "
            f"{summary['failed']} failed"
        )
        for failure in summary["failures"]:
            note(f"failed {failure['file']}: {failure['error']}")
    if summary["failures"]:
        raise typer.Exit(1)


def _watch(pusher: TranscriptPusher, roots: list[Path], interval: float, log: Path, as_json: bool) -> None:
    """Poll until interrupted. A failure is logged and retried at the next poll; nothing here ends the
    loop but Ctrl-C or SIGTERM, so the agent beside it is never held up. SIGTERM lets a pass in
    progress finish and report what it pushed (it was reported lost when the signal cut the pass);
    Ctrl-C stops at once."""
    import signal
    import threading

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    watcher = Watcher(pusher, roots)
    note(f"watching {', '.join(str(r) for r in roots)} every {interval:g}s (Ctrl-C stops)")
    try:
        while not stop.is_set():
            outcomes = watcher.poll()
            log_outcomes(log, "watch", outcomes)
            for outcome in outcomes:
                if as_json:
                    typer.echo(json.dumps(asdict(outcome)))  # one line per file: a stream to read
                elif outcome.status in ("pushed", "failed"):
                    detail = f"{outcome.messages} messages" if outcome.status == "pushed" else outcome.reason
                    note(f"{outcome.status} {outcome.path}: {detail}")
            stop.wait(interval)
    except KeyboardInterrupt:
        return


@app.command("hook")
def hook(
    state: Annotated[Path, typer.Option(help="Where the SHA-256 of pushed files is kept.")] = DEFAULT_STATE,
    log: Annotated[Path, typer.Option(help="Where pushes and failures are logged.")] = DEFAULT_LOG,
    timeout: Annotated[float, typer.Option(help="Seconds per request before giving up (no retries).")] = 10.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON summary on stdout.")] = False,
) -> None:
    """A Claude Code hook (SessionEnd, PreCompact): push the transcript named by the hook's JSON on
    stdin, with its subagents. Always exits 0; why a push failed is in the log."""
    private_umask()  # the state and the log are the user's only
    summary: dict[str, Any] = {"files": 0, "pushed": 0, "unchanged": 0, "skipped": 0, "failed": 0, "failures": []}
    try:
        summary = _run_hook(sys.stdin.read(), state, log, timeout)
    except Exception as exc:  # noqa: BLE001 - a hook must never fail the agent; the reason is logged
        log_line(log, f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')} hook failed: {type(exc).__name__}: {exc}")
        summary["failed"] = 1
        summary["failures"] = [{"file": "", "error": f"{type(exc).__name__}: {exc}"}]
    if as_json:
        typer.echo(json.dumps(summary))


def _run_hook(raw: str, state: Path, log: Path, timeout: float) -> dict[str, Any]:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    try:
        payload = json.loads(raw or "null")
    except ValueError:
        payload = None
    transcript = payload.get("transcript_path") if isinstance(payload, dict) else None
    if not isinstance(transcript, str) or not transcript:
        log_line(log, f"{stamp} hook failed: stdin is not a hook payload naming transcript_path")
        return {**_summary([], 0), "failed": 1, "failures": [{"file": "", "error": "no transcript_path"}]}
    event = str(payload.get("hook_event_name") or "hook")
    try:
        sdk = client(timeout=timeout, max_attempts=1)
    except DovecoteError as exc:
        log_line(log, f"{stamp} {event} failed {transcript}: {exc.code}: {exc.message}")
        return {**_summary([], 1), "failed": 1, "failures": [{"file": transcript, "error": exc.message}]}
    with sdk:
        pusher = TranscriptPusher(sdk, state, fmt="claude-code-jsonl")
        files = hook_files(Path(transcript).expanduser())
        pusher.check(files)  # a refused token or no server: every file fails with the reason, and is logged
        outcomes = [pusher.push(path) for path in files]
    log_outcomes(log, event, outcomes)
    return _summary(outcomes, len(files))


# ---- search, read, outline, topics, rebuild ---------------------------------------------------------


def _answer(answer: dict[str, Any], as_json: bool) -> bool:
    """With --json, the HTTP answer is printed and the command is done (True)."""
    if as_json:
        print_json(answer)
    return as_json


@app.command("search")
def search(
    q: Annotated[str, typer.Argument(metavar="QUERY", help="Words (OR-ed, ranked by coverage) or a boolean query.")],
    limit: Annotated[int | None, typer.Option(help="Results (one per conversation).")] = None,
    role: Annotated[str, typer.Option(help="Only messages of this role.")] = "",
    sort: Annotated[str, typer.Option(help="newest or oldest, or leave empty for relevance")] = "",
    since: Annotated[str, typer.Option(help="inclusive: a date or an RFC 3339 instant")] = "",
    before: Annotated[str, typer.Option(help="inclusive: a date or an RFC 3339 instant")] = "",
    min_messages: Annotated[int | None, typer.Option(help="Only conversations with this many messages.")] = None,
    project: Annotated[str, typer.Option(help="Only this project.")] = "",
    source: Annotated[str, typer.Option(help="Only this source (claude-code, codex, …).")] = "",
    include_path: Annotated[str, typer.Option(help="RE2 over the working directory")] = "",
    exclude_path: Annotated[str, typer.Option(help="RE2 over the working directory")] = "",
    current_session: Annotated[str, typer.Option(help="your live session (id or 8+ prefix)")] = "",
    include_tools: IncludeTools = False,
    include_subagents: Annotated[bool, typer.Option(help="Also search subagent threads.")] = False,
    ranker: Annotated[str, typer.Option(help="session-doc (default), session, top2, message, passage, fused")] = "",
    semantic: Annotated[str, typer.Option(help="on or off: the semantic tier (default: the deployment's)")] = "",
    as_json: Annotated[bool, typer.Option("--json", help="Print the SearchEnvelope.")] = False,
    oneline: Annotated[bool, typer.Option("--oneline", help="<ref>\\t<ISO>\\t<project>\\t<snippet> per hit.")] = False,
) -> None:
    """Ranked conversation refs, with how complete the answer is. Refs are printed whole: each one
    works in `recall read`."""
    options = {
        "limit": limit,
        "role": role,
        "sort": sort,
        "since": since,
        "before": before,
        "min_messages": min_messages,
        "project": project,
        "source": source,
        "include_path": include_path,
        "exclude_path": exclude_path,
        "current_session": current_session,
        "include_tools": include_tools,
        "include_subagents": include_subagents,
        "ranker": ranker,
        "semantic": semantic,
    }
    sdk = client()
    if oneline:
        sys.stdout.write(sdk.recall_search_oneline(q, **options))  # raw: tabs stay tabs
        return
    envelope = sdk.recall_search(q, **options)
    if _answer(envelope, as_json):
        return
    columns = [
        ("ref", lambda hit: hit["read_ref"]),
        ("time", lambda hit: hit["iso"]),
        ("project", lambda hit: hit["project"]),
        ("snippet", lambda hit: " ".join(hit["snippet"].split())[:160]),
    ]
    print_table(envelope["results"], columns)
    more = "at least " if envelope["total_is_lower_bound"] else ""
    status = "complete" if envelope["complete"] else "INCOMPLETE"
    say(f"{envelope['count']} of {more}{envelope['total_matches']} conversations; {status}")
    vectors = envelope.get("vector_coverage") or {}
    if vectors.get("ran"):
        say(f"semantic tier: {vectors['vectored_msgs']} of {vectors['candidate_msgs']} messages embedded")
    for warning in envelope["warnings"]:
        note(f"{warning['code']}: {warning['message']}")
    if envelope["next_command"]:
        say(f"more: {envelope['next_command']}")


def _print_messages(messages: list[dict[str, Any]], anchor: str = "") -> None:
    for message in messages:
        mark = "▶ " if message["uuid"] == anchor else "  "
        out.print(
            f"{mark}[bold]{message['role']}[/bold] {message['kind']} {message['timestamp']} {message['uuid'][:8]}",
            highlight=False,
        )
        out.print(message["text"], highlight=False, markup=False)


@app.command("read")
def read(
    ref: Annotated[str, typer.Argument(metavar="REF", help="<session8>:<uuid8> as printed by search")],
    budget: Annotated[int | None, typer.Option(help="characters (default: no cap)")] = None,
    more: Annotated[int | None, typer.Option(help="level n: radius (n + 1) × 8")] = None,
    around: Annotated[int | None, typer.Option(help="re-centre N messages after the anchor")] = None,
    window: Annotated[int | None, typer.Option(help="an explicit radius")] = None,
    include_tools: IncludeTools = False,
    include_thinking: IncludeThinking = False,
    as_json: Json = False,
) -> None:
    """A bounded excerpt around a ref."""
    result = client().recall_read(
        ref,
        budget=budget,
        more=more,
        around=around,
        window=window,
        include_tools=include_tools,
        include_thinking=include_thinking,
    )
    if _answer(result, as_json):
        return
    say(f"{result['project']} {result['session_id']} ({result['read_ref']})")
    _print_messages(result["messages"], result["anchor_uuid"])
    if result["truncated"]:
        note(
            f"trimmed {result['trimmed_chars']} characters in {result['trimmed_msgs']} messages; "
            f"{result['next_command']}"
        )


@app.command("outline")
def outline(
    session: Annotated[str, typer.Argument(metavar="SESSION", help="a session id or prefix (<session8>)")],
    include_tools: IncludeTools = False,
    include_thinking: IncludeThinking = False,
    include_subagents: Annotated[
        bool, typer.Option("--include-subagents/--no-include-subagents", "--subagents/--no-subagents")
    ] = False,
    as_json: Json = False,
) -> None:
    """A session's arc: its first and last messages, topics and subagent threads."""
    result = client().recall_outline(
        session, include_tools=include_tools, include_thinking=include_thinking, include_subagents=include_subagents
    )
    if _answer(result, as_json):
        return
    say(
        f"{result['project']} {result['session_id']}: {result['message_count']} messages, "
        f"{result['started_at']} → {result['iso']}"
    )
    _print_messages(result["start"])
    if result["mid_count"]:
        say(f"  … {result['mid_count']} more …")
    _print_messages(result["end"])
    for topic in result["topics"]:
        say(f"topic: {topic}")
    for thread in result["subagents"]:
        say(f"subagent: {thread['session_id']} ({thread['message_count']} messages) {thread['title']}")


LABEL_HINT = "no topics tagged yet: label a segment with `dovecote recall topics --ref REF --label TEXT`"


@app.command("topics")
def topics(
    q: Annotated[str, typer.Argument(metavar="QUERY", help="words, OR-ed; empty lists the latest labels")] = "",
    limit: Annotated[int | None, typer.Option(help="Topics to return.")] = None,
    project: Annotated[str, typer.Option(help="Only this project.")] = "",
    label: Annotated[str | None, typer.Option(help="Instead: label the segment starting at --ref.")] = None,
    ref: Annotated[str | None, typer.Option(help="With --label: where the segment starts.")] = None,
    as_json: Json = False,
) -> None:
    """Find labelled segments (the topic layer), or label one with --ref REF --label TEXT."""
    sdk = client()
    if label is not None or ref is not None:
        if not label or not ref:
            raise CliError("give both --ref and --label", EXIT_USAGE)
        labelled = sdk.recall_label(ref, label)
        if not _answer(labelled, as_json):
            say(f"{labelled['read_ref']}\t{labelled['project']}\t{labelled['topic']}")
        return
    result = sdk.recall_topics(q, limit=limit, project=project)
    if _answer(result, as_json):
        return
    for hit in result["hits"]:
        say(f"{hit['read_ref']}\t{hit['project']}\t{hit['topic']}")
    if result["note"]:
        # The API's note names its own route; here the way to label is this command's options.
        note(LABEL_HINT if not result["hits"] else result["note"])


@app.command("rebuild")
def rebuild(as_json: Json = False) -> None:
    """Admin: re-create this authority's index from the archived transcripts."""
    result = client("admin").recall_rebuild()
    if _answer(result, as_json):
        return
    say(
        f"rebuilt {result['sessions']} sessions ({result['messages']} messages) from {result['transcripts']} "
        f"transcripts; {result['topics']} topics; {len(result['failed'])} failed"
    )
