"""`dovecote recall …`: push transcripts and recall them (mounted by the main CLI as `recall`).

push walks `~/.claude/projects` (Claude Code) and `~/.codex/sessions` (Codex CLI) style trees, sniffs
each `.jsonl` file's format, and sends only what changed since the last push (SHA-256 per file, kept
in a local state file per endpoint). Small files are indexed inline; large ones go through a
presigned upload and are indexed asynchronously.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from dovecote.client import DovecoteError
from dovecote.client.errors import UNAVAILABLE

recall_app = typer.Typer(
    help="Recall past conversations: push transcripts, search for refs, read around a ref, outline a session.",
    no_args_is_help=True,
)
out = Console()
err = Console(stderr=True)

DEFAULT_STATE = Path("~/.dovecote/recall-push.json")
FORMAT_CHOICES = ("claude-code-jsonl", "codex-jsonl")


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


# ---- push -------------------------------------------------------------------------------------------


def sniff_format(path: Path) -> str | None:
    """The transcript format from the first JSON line (None when it is neither)."""
    try:
        with path.open("rb") as handle:
            for raw in handle:
                if not raw.strip():
                    continue
                first = json.loads(raw)
                break
            else:
                return None
    except (OSError, ValueError):
        return None
    if not isinstance(first, dict):
        return None
    if "payload" in first and "type" in first or "record_type" in first:
        return "codex-jsonl"
    if "id" in first and "timestamp" in first and "type" not in first:
        return "codex-jsonl"  # the legacy rollout header
    if "sessionId" in first or first.get("type") in ("summary", "user", "assistant", "system", "file-history-snapshot"):
        return "claude-code-jsonl"
    return None


def project_folder(path: Path) -> str:
    """`~/.claude/projects/<folder>/…`: the folder names the project when a file has no cwd."""
    parts = path.parts
    if "projects" in parts:
        index = len(parts) - 1 - parts[::-1].index("projects")
        if index + 1 < len(parts) - 1:
            return parts[index + 1]
    return ""


def transcript_files(paths: list[Path]) -> Iterator[Path]:
    seen: set[Path] = set()
    for root in paths:
        root = root.expanduser()
        candidates = [root] if root.is_file() else sorted(root.rglob("*.jsonl"))
        for candidate in candidates:
            resolved = candidate.resolve()
            if resolved not in seen and resolved.is_file():
                seen.add(resolved)
                yield resolved


def _load_state(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _save_state(path: Path, state: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=1, sort_keys=True))
    tmp.replace(path)


@recall_app.command("push")
def push(
    paths: Annotated[
        list[Path] | None, typer.Argument(help="Files or trees (default: ~/.claude/projects ~/.codex/sessions).")
    ] = None,
    fmt: Annotated[str | None, typer.Option("--format", help="Force a format instead of sniffing each file.")] = None,
    project: Annotated[str | None, typer.Option(help="Project label for every file (default: from the cwd).")] = None,
    state: Annotated[Path, typer.Option(help="Where the SHA-256 of pushed files is kept.")] = DEFAULT_STATE,
    force: Annotated[bool, typer.Option(help="Push even files whose SHA-256 is unchanged.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON summary.")] = False,
) -> None:
    """Send new and changed transcripts, with a progress bar (bytes, files, messages)."""
    if fmt is not None and fmt not in FORMAT_CHOICES:
        err.print(f"[red]--format must be one of {', '.join(FORMAT_CHOICES)}[/red]")
        raise typer.Exit(2)
    roots = paths or [Path("~/.claude/projects"), Path("~/.codex/sessions")]
    files = list(transcript_files([p for p in roots if p.expanduser().exists()]))
    client = _client()
    state_path = state.expanduser()
    pushed_state = _load_state(state_path)
    known: dict[str, str] = pushed_state.setdefault(client.endpoint, {})
    summary = {"files": len(files), "pushed": 0, "unchanged": 0, "skipped": 0, "failed": 0, "messages": 0, "queued": 0}
    failures: list[dict[str, str]] = []
    total_bytes = sum(f.stat().st_size for f in files)
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TextColumn("{task.fields[files]} files"),
        TextColumn("{task.fields[messages]} messages"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=err, disable=as_json) as progress:
        task = progress.add_task("push", total=total_bytes, files=f"0/{len(files)}", messages=0)
        for number, path in enumerate(files, 1):
            data = path.read_bytes()
            digest = hashlib.sha256(data).hexdigest()
            file_format = fmt or sniff_format(path)
            if file_format is None:
                summary["skipped"] += 1
            elif known.get(str(path)) == digest and not force:
                summary["unchanged"] += 1
            else:
                try:
                    result = client.push_transcript(
                        path, file_format, project=project, project_folder=project_folder(path) or None
                    )
                except DovecoteError as exc:
                    if exc.status == 0 and exc.code == UNAVAILABLE:
                        _fail(exc)  # Dovecote is unreachable: every other file would fail the same way
                    summary["failed"] += 1
                    failures.append({"file": str(path), "error": f"{exc.status} {exc.code}: {exc.message}"})
                else:
                    known[str(path)] = digest
                    summary["pushed"] += 1
                    summary["queued"] += int(bool(result.get("queued")))
                    summary["messages"] += int(result.get("messages_indexed") or 0)
                    _save_state(state_path, pushed_state)  # a crash mid-push keeps what got through
            progress.update(task, advance=len(data), files=f"{number}/{len(files)}", messages=summary["messages"])
    if as_json:
        out.print_json(json.dumps({**summary, "failures": failures}))
    else:
        out.print(
            f"{summary['pushed']} pushed ({summary['messages']} messages, {summary['queued']} queued for indexing), "
            f"{summary['unchanged']} unchanged, {summary['skipped']} not transcripts, {summary['failed']} failed",
            highlight=False,
        )
        for failure in failures:
            err.print(f"[red]failed[/red] {failure['file']}: {failure['error']}", highlight=False)
    if failures:
        raise typer.Exit(1)


# ---- search, read, outline, topics, rebuild ---------------------------------------------------------


@recall_app.command("search")
def search(
    query: Annotated[str, typer.Argument(help="Words (OR-ed, ranked by coverage) or a boolean query.")],
    limit: Annotated[int | None, typer.Option()] = None,
    role: Annotated[str, typer.Option()] = "",
    sort: Annotated[str, typer.Option(help="newest, or leave empty for relevance")] = "",
    since: Annotated[str, typer.Option(help="inclusive: a date or an RFC 3339 instant")] = "",
    before: Annotated[str, typer.Option(help="inclusive: a date or an RFC 3339 instant")] = "",
    min_messages: Annotated[int | None, typer.Option()] = None,
    project: Annotated[str, typer.Option()] = "",
    source: Annotated[str, typer.Option()] = "",
    include_path: Annotated[str, typer.Option(help="regex over the working directory")] = "",
    exclude_path: Annotated[str, typer.Option(help="regex over the working directory")] = "",
    current_session: Annotated[str, typer.Option(help="your live session (id or 8+ prefix)")] = "",
    include_tools: Annotated[bool, typer.Option()] = False,
    ranker: Annotated[str, typer.Option(help="message, top2 or session")] = "",
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
    try:
        result = _client().recall_read(
            ref,
            budget=budget,
            more=more,
            around=around,
            window=window,
            include_tools=include_tools,
            include_thinking=include_thinking,
        )
    except DovecoteError as exc:
        _fail(exc)
        return
    if as_json:
        out.print_json(json.dumps(result))
        return
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
    subagents: Annotated[bool, typer.Option(help="List subagent threads.")] = True,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """A session's arc: its first and last messages, topics and subagent threads."""
    try:
        result = _client().recall_outline(
            session, include_tools=include_tools, include_thinking=include_thinking, include_subagents=subagents
        )
    except DovecoteError as exc:
        _fail(exc)
        return
    if as_json:
        out.print_json(json.dumps(result))
        return
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
    try:
        result = _client("admin").recall_rebuild()
    except DovecoteError as exc:
        _fail(exc)
        return
    if as_json:
        out.print_json(json.dumps(result))
        return
    out.print(
        f"rebuilt {result['sessions']} sessions ({result['messages']} messages) from {result['transcripts']} "
        f"transcripts; {result['topics']} topics; {len(result['failed'])} failed",
        highlight=False,
    )


if __name__ == "__main__":  # `python -m dovecote.cli.recall …` until the main CLI mounts it
    os.environ.setdefault("COLUMNS", "160")
    recall_app()
