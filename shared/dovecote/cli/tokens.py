"""`dovecote tokens …`: create, ls, revoke (admin token), bootstrap (AWS credentials); and
`dovecote whoami` (any token), registered on the root app."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from dovecote.cli.common import (
    EXIT_API,
    EXIT_UNREACHABLE,
    AllPages,
    CliError,
    Json,
    client,
    emit,
    emit_pages,
    err,
    field,
    keyset_pages,
    out,
    print_json,
)

tokens_app = typer.Typer(help="Bearer tokens: mint, list, revoke (admin).", no_args_is_help=True)


def whoami(
    role: Annotated[
        str, typer.Option(help="Which dev token to use when DOVECOTE_TOKEN is unset (caller, worker or admin).")
    ] = "caller",
    as_json: Json = False,
) -> None:
    """Who the token is (`GET /v1/whoami`): authority, role, worker, agent claim, token id, expiry.
    A refused token is `403 forbidden`; the authorizer's log line says why (malformed, unknown,
    expired, revoked)."""
    emit(client(role).whoami(), as_json)


@tokens_app.command("create")
def tokens_create(
    authority: Annotated[str, typer.Option(help="Authority the token acts in (the admin token's own).")],
    role: Annotated[str, typer.Option(help="caller, worker or admin.")] = "caller",
    worker: Annotated[str | None, typer.Option(help="Worker id (worker tokens).")] = None,
    agent: Annotated[
        str | None, typer.Option(help="Caller tokens only: the only note author the token may write as.")
    ] = None,
    expires_in_days: Annotated[int | None, typer.Option(help="Lifetime in days (default from settings).")] = None,
    as_json: Json = False,
) -> None:
    """Mint a token with an admin token (DOVECOTE_TOKEN, or the dev admin token). It is shown once."""
    created = client("admin").create_token(authority, role, worker, agent=agent, expires_in_days=expires_in_days)
    emit(created, as_json)
    if not as_json:
        err.print("the token is shown once: keep it now", highlight=False)


@tokens_app.command("ls")
def tokens_ls(
    limit: Annotated[int | None, typer.Option()] = None,
    cursor: Annotated[str | None, typer.Option()] = None,
    all_pages: AllPages = False,
    as_json: Json = False,
) -> None:
    """The authority's tokens, newest first (ids and claims; never a secret or a hash)."""
    c = client("admin")
    columns = [
        field(n) for n in ("token_id", "role", "worker", "agent", "created_at", "expires_at", "minted_by", "revoked_at")
    ]
    pages = keyset_pages(lambda cur: c.list_tokens(limit, cur), cursor)
    emit_pages(pages, as_json=as_json, all_pages=all_pages, columns=columns)


@tokens_app.command("revoke")
def tokens_revoke(
    token_id: Annotated[str, typer.Argument(help="The token's id (from `tokens ls`).")], as_json: Json = False
) -> None:
    """Revoke a token. It stops working once the authorizer's cache expires (5 minutes by default)."""
    client("admin").revoke_token(token_id)
    if as_json:
        print_json({"token_id": token_id, "revoked": True})
    else:
        out.print(f"revoked {token_id}", highlight=False)


@tokens_app.command("bootstrap")
def tokens_bootstrap(
    authority: Annotated[str, typer.Option(help="Authority the token acts in.")],
    table: Annotated[str, typer.Option(help="The deployed tokens table (stack output TokensTable).")],
    role: Annotated[str, typer.Option(help="admin, caller or worker.")] = "admin",
    worker: Annotated[str | None, typer.Option(help="Worker id (worker tokens).")] = None,
    agent: Annotated[
        str | None, typer.Option(help="Caller tokens only: the only note author the token may write as.")
    ] = None,
    expires_in_days: Annotated[
        int | None, typer.Option(help="Lifetime; default 7 days for admin, 90 otherwise.")
    ] = None,
    region: Annotated[str | None, typer.Option(help="AWS region (default: AWS_REGION / the AWS config).")] = None,
    as_json: Json = False,  # accepted everywhere; bootstrap always prints JSON
) -> None:
    """Mint a token with AWS credentials instead of a bearer token: the way to the first admin token
    of an authority. Uses the standard AWS credential chain (and AWS_ENDPOINT_URL, if set). Prints
    the minted token as JSON on stdout (always: it is what scripts capture); audit lines go to stderr."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError

    from dovecote.admin.dynamo import DynamoTokenStore
    from dovecote.admin.service import TokenService
    from dovecote.platform.errors import DomainError

    try:
        dynamodb = boto3.client("dynamodb", region_name=region) if region else boto3.client("dynamodb")
        service = TokenService(
            DynamoTokenStore(table=table, dynamodb=dynamodb),
            # The audit line goes to stderr: stdout carries only the minted token's JSON.
            audit=lambda event, facts: err.print(
                json.dumps({"audit": event, **facts}), highlight=False, soft_wrap=True
            ),
        )
        # The same gate as the API: an agent claim on an admin or worker token is invalid_argument.
        token, record = service.mint(None, authority, role, worker, agent=agent, expires_in_days=expires_in_days)
    except NoRegionError:
        raise CliError(
            "no AWS region: set AWS_REGION (or AWS_DEFAULT_REGION), or pass --region", EXIT_UNREACHABLE
        ) from None
    except NoCredentialsError:
        raise CliError(
            "no AWS credentials: configure the AWS credential chain (AWS_PROFILE, AWS_ACCESS_KEY_ID, …)",
            EXIT_UNREACHABLE,
        ) from None
    except DomainError as exc:
        cause = exc.__cause__
        if isinstance(cause, NoRegionError | NoCredentialsError):
            raise CliError(f"AWS is not configured: {cause}", EXIT_UNREACHABLE) from None
        raise CliError(f"error: {exc.code}: {exc.message}", EXIT_API) from None
    except ClientError as exc:
        raise CliError(f"error: AWS {exc.response.get('Error', {}).get('Code')}: {exc}", EXIT_API) from None
    except BotoCoreError as exc:
        raise CliError(f"cannot reach AWS: {exc}", EXIT_UNREACHABLE) from None
    p = record.principal
    minted: dict[str, Any] = {
        "token": token,
        "token_id": record.token_id,
        "authority": p.authority,
        "role": p.role,
        "worker": p.worker,
        "agent": p.agent,
        "expires_at": record.expires_at,
    }
    print_json(minted)  # with or without --json: scripts capture this document
