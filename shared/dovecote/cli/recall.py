"""`dovecote recall …`: push transcripts and recall them (mounted by the main CLI as `recall`).

push walks `~/.claude/projects` (Claude Code) and `~/.codex/sessions` (Codex CLI) style trees, sniffs
each `.jsonl` file's format, and sends only what changed since the last push (SHA-256 per file, kept
in a local state file per endpoint). Small files are indexed inline; large ones go through a
presigned upload and are indexed asynchronously.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from dovecote.client import DovecoteError
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
from dovecote.client.errors import UNAVAILABLE

recall_app = typer.Typer(
    help="Recall past conversations: push transcripts, search for refs, read around a ref, outline a session.",
    no_args_is_help=True,
)
out = Console()
err = Console(stderr=True)

__all__ = ["project_folder", "recall_app", "sniff_format"]


def _client(role: str = "caller") -> Any:
    from dovecote.client.recall import recall_client_class

    return recall_client_class().from_env(role)


def _fail(exc: DovecoteError) -> None:
    """The error as one line on stderr with the documented exit code (1 an API error; 4 unreachable
    or not configured), exactly as `dovecote.cli.main` reports every other command's."""
    from dovecote.cli import describe

    code, line = describe(exc)
    err.print(" ".join(line.split()), highlight=False, markup=False, soft_wrap=True)
    raise typer.Exit(code)


def _call(verb: Callable[..., dict[str, Any]], *args: Any, as_json: bool = False, **options: Any) -> dict[str, Any]:
    """One verb of the SDK: an error is reported as every command reports one (and exits); with
    --json the answer is printed whole and the command ends here (typer.Exit(0))."""
    try:
        result = verb(*args, **options)
    except DovecoteError as exc:
        _fail(exc)
        raise  # _fail exits; this keeps the type checker sure of it
    if as_json:
        out.print_json(json.dumps(result))
        raise typer.Exit(0)
    return result


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


@recall_app.command("push")
def push(
    paths: Annotated[
        list[Path] | None, typer.Argument(help="Files or trees (default: ~/.claude/projects ~/.codex/sessions).")
    ] = None,
    fmt: Annotated[str | None, typer.Option("--format", help="Force a format instead of sniffing each file.")] = None,
    project: Annotated[str | None, typer.Option(help="Project label for every file (default: from the cwd).")] = None,
    state: Annotated[Path, typer.Option(help="Where the SHA-256 of pushed files is kept.")] = DEFAULT_STATE,
    force: Annotated[bool, typer.Option(help="Push even files whose SHA-256 is unchanged.")] = False,
    watch: Annotated[
        bool, typer.Option("--watch", help="Keep running: push new and changed files as they appear (Ctrl-C stops).")
    ] = False,
    interval: Annotated[float, typer.Option(help="Seconds between polls with --watch.", min=0.05)] = 2.0,
    log: Annotated[Path, typer.Option(help="With --watch, where failures and pushes are logged.")] = DEFAULT_LOG,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print a JSON summary (with --watch: a line per poll).")
    ] = False,
) -> None:
    """Send new and changed transcripts, with a progress bar (bytes, files, messages)."""
    private_umask()  # the state and the log are the user's only
    if fmt is not None and fmt not in FORMATS:
        err.print(f"[red]--format must be one of {', '.join(FORMATS)}[/red]")
        raise typer.Exit(2)
    roots = paths or [Path("~/.claude/projects"), Path("~/.codex/sessions")]
    pusher = TranscriptPusher(_client(), state, fmt=fmt, project=project, force=force)
    if watch:
        _watch(pusher, roots, interval, log, as_json)
        return
    files = list(transcript_files(roots))
    outcomes: list[Outcome] = []
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TextColumn("{task.fields[files]} files"),
        TextColumn("{task.fields[messages]} messages"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=err, disable=as_json) as progress:
        task = progress.add_task(
            "push", total=sum(f.stat().st_size for f in files), files=f"0/{len(files)}", messages=0
        )
        for number, path in enumerate(files, 1):
            outcome = pusher.push(path)
            if outcome.code == UNAVAILABLE and outcome.http_status == 0:
                # Dovecote is unreachable: every other file would fail the same way.
                progress.stop()
                _fail(DovecoteError(0, UNAVAILABLE, outcome.message))
            outcomes.append(outcome)
            messages = sum(o.messages for o in outcomes)
            progress.update(task, advance=outcomes[-1].size, files=f"{number}/{len(files)}", messages=messages)
    summary = _summary(outcomes, len(files))
    if as_json:
        out.print_json(json.dumps(summary))
    else:
        out.print(
            f"{summary['pushed']} pushed ({summary['messages']} messages, {summary['queued']} queued for indexing), "
            f"{summary['unchanged']} unchanged, {summary['skipped']} not transcripts, {summary['failed']} failed",
            highlight=False,
        )
        for failure in summary["failures"]:
            err.print(f"[red]failed[/red] {failure['file']}: {failure['error']}", highlight=False)
    if summary["failures"]:
        raise typer.Exit(1)


def _watch(pusher: TranscriptPusher, roots: list[Path], interval: float, log: Path, as_json: bool) -> None:
    """Poll until interrupted. A failure is logged and retried at the next poll; nothing here ends the
    loop but Ctrl-C or SIGTERM, so the agent beside it is never held up."""
    import signal

    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    watcher = Watcher(pusher, roots)
    err.print(f"watching {', '.join(str(r) for r in roots)} every {interval:g}s (Ctrl-C stops)", highlight=False)
    try:
        while True:
            outcomes = watcher.poll()
            log_outcomes(log, "watch", outcomes)
            for outcome in outcomes:
                if as_json:
                    typer.echo(json.dumps(asdict(outcome)))  # one line per file: a stream to read
                elif outcome.status in ("pushed", "failed"):
                    detail = f"{outcome.messages} messages" if outcome.status == "pushed" else outcome.reason
                    err.print(f"{outcome.status} {outcome.path}: {detail}", highlight=False)
            time.sleep(interval)
    except KeyboardInterrupt:
        return


@recall_app.command("hook")
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
    from dovecote.client import DovecoteClient, DovecoteError

    try:
        client = DovecoteClient.from_env("caller", timeout=timeout, max_attempts=1)
    except DovecoteError as exc:
        log_line(log, f"{stamp} {event} failed {transcript}: {exc.code}: {exc.message}")
        return {**_summary([], 1), "failed": 1, "failures": [{"file": transcript, "error": exc.message}]}
    with client:
        pusher = TranscriptPusher(client, state, fmt="claude-code-jsonl")
        files = hook_files(Path(transcript).expanduser())
        outcomes = [pusher.push(path) for path in files]
    log_outcomes(log, event, outcomes)
    return _summary(outcomes, len(files))


# ---- search, read, outline, topics, rebuild ---------------------------------------------------------


@recall_app.command("search")
def search(
    query: Annotated[str, typer.Argument(help="Words (OR-ed, ranked by coverage) or a boolean query.")],
    limit: Annotated[int | None, typer.Option()] = None,
    role: Annotated[str, typer.Option()] = "",
    sort: Annotated[str, typer.Option(help="newest or oldest, or leave empty for relevance")] = "",
    since: Annotated[str, typer.Option(help="inclusive: a date or an RFC 3339 instant")] = "",
    before: Annotated[str, typer.Option(help="inclusive: a date or an RFC 3339 instant")] = "",
    min_messages: Annotated[int | None, typer.Option()] = None,
    project: Annotated[str, typer.Option()] = "",
    source: Annotated[str, typer.Option()] = "",
    include_path: Annotated[str, typer.Option(help="RE2 regex over the working directory")] = "",
    exclude_path: Annotated[str, typer.Option(help="RE2 regex over the working directory")] = "",
    current_session: Annotated[str, typer.Option(help="your live session (id or 8+ prefix)")] = "",
    include_tools: Annotated[bool, typer.Option()] = False,
    include_subagents: Annotated[bool, typer.Option(help="Also search subagent threads.")] = False,
    ranker: Annotated[str, typer.Option(help="message, top2, session or fused")] = "",
    as_json: Annotated[bool, typer.Option("--json", help="Print the SearchEnvelope.")] = False,
    oneline: Annotated[bool, typer.Option("--oneline", help="<ref>\\t<ISO>\\t<project>\\t<snippet> per hit.")] = False,
) -> None:
    """Ranked conversation refs, with how complete the answer is."""
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
    }
    client = _client()
    try:
        if oneline:
            typer.echo(client.recall_search_oneline(query, **options), nl=False)  # raw: tabs stay tabs
            return
        envelope = client.recall_search(query, **options)
    except DovecoteError as exc:
        _fail(exc)
        return
    if as_json:
        out.print_json(json.dumps(envelope))
        return
    table = Table("ref", "time", "project", "snippet", show_lines=False)
    for hit in envelope["results"]:
        table.add_row(hit["read_ref"], hit["iso"], hit["project"], " ".join(hit["snippet"].split())[:160])
    out.print(table)
    more = "at least " if envelope["total_is_lower_bound"] else ""
    status = "complete" if envelope["complete"] else "INCOMPLETE"
    out.print(f"{envelope['count']} of {more}{envelope['total_matches']} conversations; {status}", highlight=False)
    for warning in envelope["warnings"]:
        err.print(f"[yellow]{warning['code']}[/yellow] {warning['message']}", highlight=False)
    if envelope["next_command"]:
        out.print(f"more: {envelope['next_command']}", highlight=False, soft_wrap=True)


def _print_messages(messages: list[dict[str, Any]], anchor: str = "") -> None:
    for message in messages:
        mark = "▶ " if message["uuid"] == anchor else "  "
        out.print(
            f"{mark}[bold]{message['role']}[/bold] {message['kind']} {message['timestamp']} {message['uuid'][:8]}",
            highlight=False,
        )
        out.print(message["text"], highlight=False, markup=False)


@recall_app.command("read")
def read(
    ref: Annotated[str, typer.Argument(help="<session8>:<uuid8> as printed by search")],
    budget: Annotated[int | None, typer.Option(help="characters (default: no cap)")] = None,
    more: Annotated[int | None, typer.Option(help="level n: radius (n + 1) × 8")] = None,
    around: Annotated[int | None, typer.Option(help="re-centre N messages after the anchor")] = None,
    window: Annotated[int | None, typer.Option(help="an explicit radius")] = None,
    include_tools: Annotated[bool, typer.Option()] = False,
    include_thinking: Annotated[bool, typer.Option()] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """A bounded excerpt around a ref."""
    result = _call(
        _client().recall_read,
        ref,
        as_json=as_json,
        budget=budget,
        more=more,
        around=around,
        window=window,
        include_tools=include_tools,
        include_thinking=include_thinking,
    )
    out.print(f"{result['project']} {result['session_id']} ({result['read_ref']})", highlight=False)
    _print_messages(result["messages"], result["anchor_uuid"])
    if result["truncated"]:
        err.print(
            f"[yellow]trimmed[/yellow] {result['trimmed_chars']} characters in {result['trimmed_msgs']} messages; "
            f"{result['next_command']}",
            highlight=False,
        )


@recall_app.command("outline")
def outline(
    session: Annotated[str, typer.Argument(help="a session id or prefix (<session8>)")],
    include_tools: Annotated[bool, typer.Option()] = False,
    include_thinking: Annotated[bool, typer.Option()] = False,
    subagents: Annotated[bool, typer.Option(help="List subagent threads.")] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """A session's arc: its first and last messages, topics and subagent threads."""
    result = _call(
        _client().recall_outline,
        session,
        as_json=as_json,
        include_tools=include_tools,
        include_thinking=include_thinking,
        include_subagents=subagents,
    )
    out.print(
        f"{result['project']} {result['session_id']}: {result['message_count']} messages, "
        f"{result['started_at']} → {result['iso']}",
        highlight=False,
    )
    _print_messages(result["start"])
    if result["mid_count"]:
        out.print(f"  … {result['mid_count']} more …", highlight=False)
    _print_messages(result["end"])
    for topic in result["topics"]:
        out.print(f"topic: {topic}", highlight=False)
    for thread in result["subagents"]:
        out.print(f"subagent: {thread['session_id']} ({thread['message_count']} messages) {thread['title']}")


@recall_app.command("topics")
def topics(
    query: Annotated[str, typer.Argument(help="words, OR-ed; empty lists the latest labels")] = "",
    limit: Annotated[int | None, typer.Option()] = None,
    project: Annotated[str, typer.Option()] = "",
    label: Annotated[str | None, typer.Option(help="Instead: label the segment starting at --ref.")] = None,
    ref: Annotated[str | None, typer.Option(help="With --label: where the segment starts.")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Find labelled segments (the topic layer), or label one with --ref REF --label TEXT."""
    client = _client()
    try:
        if label is not None or ref is not None:
            if not label or not ref:
                err.print("[red]give both --ref and --label[/red]")
                raise typer.Exit(2)
            result = client.recall_label(ref, label)
        else:
            result = client.recall_topics(query, limit=limit, project=project)
    except DovecoteError as exc:
        _fail(exc)
        return
    if as_json or "hits" not in result:
        out.print_json(json.dumps(result))
        return
    for hit in result["hits"]:
        out.print(f"{hit['read_ref']}\t{hit['project']}\t{hit['topic']}", highlight=False)
    if result["note"]:
        err.print(result["note"], highlight=False)


@recall_app.command("rebuild")
def rebuild(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Admin: re-create this authority's index from the archived transcripts."""
    result = _call(_client("admin").recall_rebuild, as_json=as_json)
    out.print(
        f"rebuilt {result['sessions']} sessions ({result['messages']} messages) from {result['transcripts']} "
        f"transcripts; {result['topics']} topics; {len(result['failed'])} failed",
        highlight=False,
    )


if __name__ == "__main__":  # `python -m dovecote.cli.recall …`
    recall_app()
