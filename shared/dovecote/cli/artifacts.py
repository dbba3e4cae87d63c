"""`dovecote artifacts …`: a workspace's artifacts, its head and the apply receipts (docs/services/artifacts.md,
workspaces
and artifacts), as a caller. Freezing is a worker verb (`dovecote worker freeze`).

`get` prints the artifact's metadata, or with `--output FILE` writes its payload (streamed from the
download URL when large, with a progress bar on a terminal) after checking it against the artifact's
`payload_digest`: a mismatch exits 1 with an `integrity` error and leaves no file. `receipt record`
reads the artifact first and fills its digest, base and result (and, for success, the observed
revision) unless given."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dovecote.cli.common import EXIT_API, EXIT_USAGE, CliError, CommandId, Json, client, emit, note, transfer
from dovecote.cli.groups import new_app
from dovecote.tasks.limits import DECISIONS

app = new_app("Artifacts of a workspace (caller): read one, its workspace head, its apply receipt.")
receipt_app = new_app("An artifact's apply receipt: record it, or read it.")
app.add_typer(receipt_app, name="receipt")

Workspace = Annotated[str, typer.Argument(metavar="WORKSPACE", help="The workspace.")]
ArtifactId = Annotated[str, typer.Argument(metavar="ARTIFACT", help="The artifact's id.")]


def _missing(message: str, **details: str) -> CliError:
    return CliError(f"404 not_found: {message}", EXIT_API, code="not_found", details=details)


@app.command("get")
def artifacts_get(
    workspace: Workspace,
    artifact_id: ArtifactId,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write the payload to FILE (its SHA-256 checked) instead."),
    ] = None,
    as_json: Json = False,
) -> None:
    """An artifact's metadata (state, base and result revisions, digests, size, media type); with
    --output its payload, verified. --json prints the API's answer (with the inline payload or
    download URL)."""
    c = client()
    if output is not None:
        if output.is_dir():
            raise CliError(f"{output} is a directory", EXIT_USAGE)
        with transfer(f"download {output.name}") as progress:
            meta = c.download_artifact(workspace, artifact_id, output, progress=progress)
        if as_json:
            emit(meta, True, "artifact")
        else:
            note(f"wrote {output} ({meta['payload_size']} bytes, {meta['payload_digest']})")
        return
    answer = c.get_artifact(workspace, artifact_id)
    emit(answer if as_json else answer["artifact"], as_json)


@app.command("head")
def artifacts_head(workspace: Workspace, as_json: Json = False) -> None:
    """The workspace's confirmed revision (moved by success receipts); exit 1 when it has none yet."""
    head = client().workspace_head(workspace)
    if head is None:
        raise _missing(f"workspace {workspace} has no head yet (no artifact was frozen in it)", workspace=workspace)
    emit(head, as_json)


@receipt_app.command("record")
def receipt_record(
    workspace: Workspace,
    artifact_id: ArtifactId,
    decision: Annotated[str, typer.Option(help=f"One of {', '.join(DECISIONS)}.")],
    observed_revision: Annotated[
        str | None,
        typer.Option(
            "--observed-revision",
            "--observed",
            help="The revision you observed (required for conflict; success defaults to the result).",
        ),
    ] = None,
    code: Annotated[str | None, typer.Option(help="A short code of your own (at most 128 bytes).")] = None,
    message: Annotated[str | None, typer.Option(help="A sentence (at most 4096 bytes).")] = None,
    receipt_id: Annotated[
        str | None,
        typer.Option(help="Default: derived from the artifact, so an identical repeat answers the stored receipt."),
    ] = None,
    command_id: CommandId = None,
    as_json: Json = False,
) -> None:
    """Record the one apply receipt of a published artifact (success moves the workspace head from
    the artifact's base to its result)."""
    if decision not in DECISIONS:
        raise CliError(f"unknown decision {decision!r}; one of {', '.join(DECISIONS)}", EXIT_USAGE)
    c = client()
    meta = c.get_artifact(workspace, artifact_id)["artifact"]
    # An artifact has one receipt, and a repeat is identical only with the same id: a person who runs
    # the command again (a new command id) gets the stored receipt, not 409 receipt_conflict.
    receipt_id = receipt_id or c.derived_id("r", "apply-receipt", workspace, artifact_id, meta["digest"])
    receipt = c.receipt_for(
        meta,
        decision,
        observed_revision=observed_revision,
        code=code,
        message=message,
        receipt_id=receipt_id,
        command_id=command_id,
    )
    emit(receipt, as_json, "receipt")


@receipt_app.command("get")
def receipt_get(workspace: Workspace, artifact_id: ArtifactId, as_json: Json = False) -> None:
    """The artifact's apply receipt; exit 1 when it has none yet."""
    receipt = client().get_receipt(workspace, artifact_id)
    if receipt is None:
        raise _missing(
            f"artifact {artifact_id} of {workspace} has no apply receipt yet", workspace=workspace, artifact=artifact_id
        )
    emit(receipt, as_json, "receipt")
