"""`dovecote login` (verify an endpoint and a token with `GET /v1/whoami`, then keep them as a profile
of ~/.config/dovecote/config.toml, 0600), `dovecote logout` (remove a profile) and `dovecote health`."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from dovecote.cli.common import EXIT_USAGE, CliError, Json, client, emit, note, print_json, say
from dovecote.cli.groups import new_app
from dovecote.client import DovecoteClient
from dovecote.client.config import check_profile_name, remove_profiles, save_profiles
from dovecote.client.errors import DovecoteError

app = new_app("Keep an endpoint and a token as a profile.", no_args_is_help=False)
health_app = new_app("Is the endpoint up?", no_args_is_help=False)
logout_app = new_app("Remove a profile.", no_args_is_help=False)


def who(answer: dict[str, str | None]) -> str:
    claims = "".join(f", {name} {answer[name]}" for name in ("worker", "agent") if answer.get(name))
    return f"{answer['role']} of authority {answer['authority']}{claims}"


@app.command("login")
def login(
    endpoint: Annotated[str, typer.Option(help="The API's URL (the stack output, or a `dovecote dev` endpoint).")],
    token: Annotated[str, typer.Option(help="The bearer token; - reads it from stdin (kept out of shell history).")],
    profile: Annotated[str, typer.Option("--profile", help="The profile's name.")] = "default",
    as_json: Json = False,
) -> None:
    """Check the token against the endpoint (`GET /v1/whoami`), print who it is, and write it as a
    profile (0600). Every command then uses it from any directory: `default` when none is named,
    another with `dovecote --profile NAME …` or DOVECOTE_PROFILE."""
    if token == "-":  # noqa: S105 - the stdin marker, not a password
        token = sys.stdin.readline().strip()
    if not token:
        raise CliError("the token is empty", EXIT_USAGE)
    check_profile_name(profile)
    with DovecoteClient(endpoint, token, max_attempts=2, source="--endpoint") as probe:
        answer = probe.whoami()  # a refused token is 403 forbidden: nothing is written
    path = save_profiles({profile: {"endpoint": probe.endpoint, "token": token}})
    if as_json:
        print_json(answer)
        note(f"profile {profile} written to {path}")
        return
    say(f"logged in to {probe.endpoint} as {who(answer)}; token {answer['token_id']} expires {answer['expires_at']}")
    say(f"profile {profile} written to {path}")


@logout_app.command("logout")
def logout(
    profile: Annotated[str, typer.Option("--profile", help="The profile to remove (with its -worker, -admin).")] = (
        "default"
    ),
    as_json: Json = False,
) -> None:
    """Remove a profile from ~/.config/dovecote/config.toml, with its role profiles NAME-worker and
    NAME-admin (`dovecote logout --profile dev` removes what `dovecote dev` wrote). The tokens
    themselves stay valid until they expire or an admin revokes them (`dovecote tokens revoke`)."""
    try:
        path, removed = remove_profiles(profile)
    except DovecoteError as exc:
        raise CliError(exc.message, EXIT_USAGE, details=exc.details) from None
    if as_json:
        print_json({"removed": removed, "config": str(path)})
        return
    say(
        f"removed the profiles {', '.join(removed)} from {path}"
        if len(removed) > 1
        else f"removed the profile {removed[0]} from {path}"
    )
    say("the tokens stay valid until they expire or are revoked (`dovecote tokens revoke TOKEN_ID`)")


@health_app.command("health")
def health(as_json: Json = False) -> None:
    """Is the endpoint up? (`GET /v1/health`, no token needed.) Prints the endpoint that answered and
    where the settings came from, as `whoami` does (--json: the HTTP answer alone)."""
    sdk = client()
    answer = sdk.health()
    emit(answer if as_json else {**answer, "endpoint": sdk.endpoint, "settings": sdk.settings}, as_json)
