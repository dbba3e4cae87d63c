"""`dovecote tokens …`: create, list (`ls`), revoke (admin token), bootstrap (AWS credentials); and
`dovecote whoami` (any token). create, list and revoke are built from the verb table."""

from __future__ import annotations

import json
import os
from typing import Annotated

import typer

from dovecote.cli.common import (
    EXIT_API,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    CliError,
    Json,
    TokenAgent,
    TokenWorker,
    client,
    emit,
    fields,
    note,
    print_json,
)
from dovecote.cli.groups import new_app
from dovecote.cli.verbs import Did, Pages, Show, Verb, param, register

app = new_app("Bearer tokens: mint, list, revoke (admin).")
whoami_app = new_app("Who the token is.", no_args_is_help=False)

Role = Annotated[str, typer.Option(help="caller, worker or admin.")]


def token_id_of(value: str) -> str:
    """TOKEN_ID; a whole token given instead is a usage error that names its id (never the secret)."""
    from dovecote.admin.model import TOKEN_ID, claimed_id

    token_id = claimed_id(value)
    if not TOKEN_ID.fullmatch(value) and token_id is not None:
        raise CliError(
            "TOKEN_ID is a token's id (16 hex digits, as `dovecote tokens list` shows), not the token: this "
            f"token's id is {token_id}",
            EXIT_USAGE,
            details={"argument": "TOKEN_ID", "token_id": token_id},
        )
    return value


@whoami_app.command("whoami")
def whoami(
    role: Annotated[
        str, typer.Option(help="Which token to use where the configuration has one per role (caller, worker, admin).")
    ] = "caller",
    as_json: Json = False,
) -> None:
    """Who the token is (`GET /v1/whoami`): authority, role, worker, agent claim, token id, expiry,
    then the endpoint that answered and where the settings came from (the environment, a profile, a
    tokens file; --json prints the HTTP answer alone). A refused token is `403 forbidden`; the
    authorizer's log line says why (malformed, unknown, expired, revoked)."""
    sdk = client(role)
    answer = sdk.whoami()
    emit(answer if as_json else {**answer, "endpoint": sdk.endpoint, "settings": sdk.settings}, as_json)


register(
    app,
    (
        Verb(
            "create",
            "POST /v1/admin/tokens",
            "Mint a token with an admin token. It is shown once.",
            (
                param(
                    "authority",
                    Annotated[
                        str | None,
                        typer.Option(help="Authority the token acts in: the admin's own (default: read from whoami)."),
                    ],
                    None,
                ),
                param("role", Role, "caller"),
                param("worker", TokenWorker, None),
                param("agent", TokenAgent, None),
                param("expires_in_days", Annotated[int | None, typer.Option(help="Lifetime in days.")], None),
            ),
            lambda c, v: c.create_token(
                v["authority"] or c.whoami()["authority"],  # the only one the API accepts: one more read
                v["role"],
                v["worker"],
                agent=v["agent"],
                expires_in_days=v["expires_in_days"],
            ),
            Show(note="the token is shown once: keep it now"),
            role="admin",
        ),
        Verb(
            "list",
            "GET /v1/admin/tokens",
            "The authority's tokens, newest first (ids and claims; never a secret or a hash).",
            (),
            lambda c, v: lambda cursor: c.list_tokens(v["limit"], cursor),
            Pages(fields("token_id", "role", "worker", "agent", "created_at", "expires_at", "minted_by", "revoked_at")),
            role="admin",
        ),
        Verb(
            "revoke",
            "DELETE /v1/admin/tokens/{token_id}",
            "Revoke a token. It stops working once the authorizer's cache expires (5 minutes by default).",
            (
                param(
                    "token_id",
                    Annotated[str, typer.Argument(metavar="TOKEN_ID", help="The token's id (from `tokens list`).")],
                ),
            ),
            lambda c, v: c.revoke_token(token_id_of(v["token_id"])),
            Did(lambda v: {"token_id": v["token_id"], "revoked": True}, lambda v: f"revoked {v['token_id']}"),
            role="admin",
        ),
    ),
)


@app.command("bootstrap")
def tokens_bootstrap(
    authority: Annotated[str, typer.Option(help="Authority the token acts in.")],
    table: Annotated[str, typer.Option(help="The deployed tokens table (stack output TokensTable).")],
    role: Annotated[str, typer.Option(help="admin, caller or worker.")] = "admin",
    worker: TokenWorker = None,
    agent: TokenAgent = None,
    expires_in_days: Annotated[
        int | None, typer.Option(help="Lifetime; default 7 days for admin, 90 otherwise.")
    ] = None,
    region: Annotated[
        str | None, typer.Option(help="AWS region (default: AWS_DEFAULT_REGION, or the AWS config's region).")
    ] = None,
    as_json: Json = False,  # accepted everywhere; bootstrap always prints JSON
) -> None:
    """Mint a token with AWS credentials instead of a bearer token: the way to the first admin token
    of an authority. Uses the standard AWS credential chain (and AWS_ENDPOINT_URL, if set). Prints
    the minted token as JSON on stdout (always: it is what scripts capture); audit lines go to stderr."""
    from dataclasses import asdict

    import boto3
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError

    from dovecote.admin.dynamo import DynamoTokenStore
    from dovecote.admin.model import MintedToken
    from dovecote.admin.service import TokenService
    from dovecote.platform.errors import DomainError

    try:
        # botocore itself reads only AWS_DEFAULT_REGION and the AWS config; AWS_REGION (Lambda's) works too.
        region = region or os.environ.get("AWS_REGION") or None
        dynamodb = boto3.client("dynamodb", region_name=region) if region else boto3.client("dynamodb")
        service = TokenService(
            DynamoTokenStore(table=table, dynamodb=dynamodb),
            # The audit line goes to stderr: stdout carries only the minted token's JSON.
            audit=lambda event, facts: note(json.dumps({"audit": event, **facts})),
        )
        # The same gate as the API: an agent claim on an admin or worker token is invalid_argument.
        token, record = service.mint(None, authority, role, worker, agent=agent, expires_in_days=expires_in_days)
    except NoRegionError:
        raise CliError(
            "no AWS region: pass --region, or set AWS_REGION or AWS_DEFAULT_REGION (or region in the AWS config)",
            EXIT_UNREACHABLE,
            code="configuration",
        ) from None
    except NoCredentialsError:
        raise CliError(
            "no AWS credentials: configure the AWS credential chain (AWS_PROFILE, AWS_ACCESS_KEY_ID, …)",
            EXIT_UNREACHABLE,
            code="configuration",
        ) from None
    except DomainError as exc:
        cause = exc.__cause__
        if isinstance(cause, NoRegionError | NoCredentialsError):
            raise CliError(f"AWS is not configured: {cause}", EXIT_UNREACHABLE, code="configuration") from None
        raise CliError(f"{exc.code}: {exc.message}", EXIT_API, code=exc.code, details=exc.details) from None
    except ClientError as exc:
        aws_code = str(exc.response.get("Error", {}).get("Code"))
        raise CliError(f"AWS {aws_code}: {exc}", EXIT_API, code="aws_error", details={"aws_code": aws_code}) from None
    except BotoCoreError as exc:
        raise CliError(f"cannot reach AWS: {exc}", EXIT_UNREACHABLE, code="unavailable") from None
    print_json(asdict(MintedToken.of(token, record)))  # with or without --json: scripts capture this document
