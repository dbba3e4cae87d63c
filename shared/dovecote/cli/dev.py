"""`dovecote dev`: run the whole service locally over moto, with API Gateway emulated (infra/local).

Once the runtime is ready it writes the tokens file (`.dovecote/dev-tokens.json`, the runtime's) and a
profile per role into ~/.config/dovecote/config.toml (0600): `dev` (the caller token), `dev-worker`
and `dev-admin`, so the CLI and the MCP server reach it from any directory (`--write-profile NAME`
picks another name, `--write-profile ''` writes none). A second runtime (another clone, another port)
never takes those names over from a first one that still answers: it writes `dev-PORT`,
`dev-PORT-worker` and `dev-PORT-admin` instead and says so (and writes none, saying why, when those
too point at another live runtime). Inside a clone the CLI uses the clone's own tokens file before
the `dev` profile (dovecote.client.config); a second runtime in the same clone likewise leaves that
file to the first while it answers and writes `dev-tokens-PORT.json` beside it.

`dev` is a group that runs the runtime when no subcommand is given, so local-only subcommands can sit
under it. The runtime is the checkout's (`infra/` is not installed): its root goes on the path.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

import typer

from dovecote.cli.common import EXIT_UNREACHABLE, EXIT_USAGE, CliError, say
from dovecote.cli.devtoken import dev_token
from dovecote.cli.groups import new_app
from dovecote.client.config import load_profiles, remove_profiles, save_profiles

app = new_app("Run the whole service locally.", no_args_is_help=False, invoke_without_command=True)
ROLES = ("caller", "worker", "admin")
app.command("token")(dev_token)  # a token of any authority from the running runtime (cli/devtoken.py)


def checkout() -> Path:
    """The clone this package runs from, on sys.path (infra/ and functions/ are imported from it)."""
    root = Path(__file__).resolve().parents[3]
    if not (root / "infra" / "local").is_dir():
        raise CliError(f"`dovecote dev` runs from a Dovecote checkout; {root} has no infra/local", EXIT_USAGE)
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return root


def answers(endpoint: str) -> bool:
    """Whether a Dovecote answers at `endpoint` now (`GET /v1/health`, one second at most)."""
    import httpx

    try:
        return httpx.get(endpoint.rstrip("/") + "/v1/health", timeout=1.0).status_code == 200
    except (httpx.HTTPError, ValueError):
        return False


def _names(name: str) -> list[str]:
    return [name if role == "caller" else f"{name}-{role}" for role in ROLES]


def _held_elsewhere(name: str, endpoint: str, live: Callable[[str], bool]) -> str:
    """The endpoint of another live runtime that profile `name` (or its -worker, -admin) points at, or ''."""
    existing = load_profiles()
    for profile in _names(name):
        other = existing.get(profile, {}).get("endpoint")
        if isinstance(other, str) and other.rstrip("/") != endpoint.rstrip("/") and live(other):
            return other
    return ""


def own_tokens_file(path: Path, port: int, *, live: Callable[[str], bool] = answers) -> tuple[Path, str]:
    """Where this runtime writes its tokens: `path`, unless it holds another runtime's that still
    answers (a second `dovecote dev` in the same clone), whose CLI would otherwise be pointed at
    this one and left pointing at nothing when it stops; then `<stem>-PORT.json` beside it, and why."""
    try:
        endpoint = json.loads(path.read_text())["endpoint"]
    except (OSError, ValueError, KeyError, TypeError):
        return path, ""
    if not isinstance(endpoint, str) or not live(endpoint):
        return path, ""
    own = path.with_name(f"{path.stem}-{port}{path.suffix}")
    return own, f"{path} holds the tokens of another running dovecote dev ({endpoint}), kept; this one's: {own}"


def forget_profiles(name: str, endpoint: str) -> list[str]:
    """At a stop, the `name-PORT` profiles this runtime wrote beside another one's (they name a port
    nothing serves once it stops), unless something else has rewritten them since."""
    if load_profiles().get(name, {}).get("endpoint") != endpoint:
        return []
    _, removed = remove_profiles(name)
    say(f"profiles: removed {', '.join(removed)} (they named this runtime)")
    return removed


def _free_port(host: str) -> int:
    import socket

    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def write_profiles(
    name: str, tokens_file: Path, *, live: Callable[[str], bool] = answers
) -> tuple[Path | None, list[str], str]:
    """`name` (the caller token), `name-worker` and `name-admin`, from the tokens file the runtime
    wrote: (the config file, the profiles written, why they are not `name`'s). Profiles that point at
    another runtime that still answers are never overwritten: `name-PORT` is written instead, or
    nothing when that is taken too."""
    written = json.loads(tokens_file.read_text())
    endpoint = str(written["endpoint"])
    chosen, why = name, ""
    other = _held_elsewhere(name, endpoint, live)
    if other:
        chosen = f"{name}-{urlsplit(endpoint).port}"
        why = f"the profiles {', '.join(_names(name))} point at another running dovecote dev ({other}), kept"
        taken = _held_elsewhere(chosen, endpoint, live)
        if taken:
            return None, [], f"{why}; so do {', '.join(_names(chosen))} ({taken}): no profile written"
    profiles = {
        (chosen if role == "caller" else f"{chosen}-{role}"): {"endpoint": endpoint, "token": token}
        for role, token in written["tokens"].items()
        if role in ROLES
    }
    return save_profiles(profiles), sorted(profiles), why


@app.callback()
def dev(
    ctx: typer.Context,
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to bind (0 picks a free one).")] = 8787,
    data: Annotated[
        Path, typer.Option(help="Keep state in DIR across restarts (notes, tasks, memory, transcripts, tokens).")
    ] = Path(".dovecote/data"),
    fresh: Annotated[bool, typer.Option(help="Start empty: wipe the --data DIR first.")] = False,
    tokens_file: Annotated[Path, typer.Option(help="Where to write the dev tokens.")] = Path(
        ".dovecote/dev-tokens.json"
    ),
    write_profile: Annotated[
        str,
        typer.Option(
            help="Write profiles NAME, NAME-worker and NAME-admin to ~/.config/dovecote/config.toml ('' for none)."
        ),
    ] = "dev",
    dispatch_interval: Annotated[
        float, typer.Option(help="Seconds between lease-dispatcher runs (0 turns it off).")
    ] = 1.0,
    faults: Annotated[
        bool, typer.Option(help="Honour X-Dovecote-Fault: drop-response (tests of retries that replay).")
    ] = False,
    quiet: Annotated[bool, typer.Option(help="No per-request log lines.")] = False,
    verbose: Annotated[bool, typer.Option(help="Also log the functions' metrics: one summary line a minute.")] = False,
    a2a_unauthenticated: Annotated[
        bool,
        typer.Option(
            help="Serve A2A requests that carry no token as the dev caller (local only: for A2A clients "
            "that cannot send one, such as the A2A TCK)."
        ),
    ] = False,
    allow_loopback_webhooks: Annotated[
        bool,
        typer.Option(
            help="Let webhooks be plain http to loopback receivers (127.0.0.1, ::1, localhost): the one "
            "switch for local receivers and tests. Every other private address stays refused."
        ),
    ] = False,
    embedder: Annotated[
        str,
        typer.Option(
            help="Recall's semantic tier: off, or local (all-MiniLM-L6-v2 from its PyPI wheel; messages are "
            "embedded in the background). Default: DOVECOTE_EMBEDDER, else off."
        ),
    ] = "",
) -> None:
    """Run the whole service locally over moto, with API Gateway emulated (`make dev ARGS="--port 9000"`).
    `dovecote dev token --authority A` mints a token of any authority from the running one."""
    if ctx.invoked_subcommand is not None:
        return
    import logging
    import signal

    checkout()
    if embedder:
        if embedder not in ("off", "local"):
            raise CliError(f"--embedder must be off or local, got {embedder!r}", EXIT_USAGE)
        os.environ["DOVECOTE_EMBEDDER"] = embedder  # the functions read their settings from the environment
    from infra.local.runtime import DataDirBusy, LocalRuntime, PortInUse, SnapshotOfAnotherMoto, UnsafeOptions

    # One line per request (method, path, status, code, ms) and the emulators' own notices. Its own
    # logger and handler: the functions' Powertools loggers ("dovecote", JSON) stay as in Lambda.
    dev_log = logging.getLogger("dovecote-dev")
    line = logging.StreamHandler(sys.stderr)
    line.setFormatter(logging.Formatter("%(asctime)s %(message)s", datefmt="%H:%M:%S"))
    dev_log.addHandler(line)
    dev_log.propagate = False
    dev_log.setLevel(logging.WARNING if quiet else logging.INFO)
    # Moved files are named after the port, so `--port 0` takes its port now: a name with 0 in it
    # would be the next `--port 0` runtime's too.
    named = port or _free_port(host)
    tokens_file, moved = own_tokens_file(tokens_file, named)
    if moved:
        port = named
    try:
        runtime = LocalRuntime(
            host=host,
            port=port,
            tokens_file=tokens_file,
            dispatch_interval=dispatch_interval,
            faults=faults,
            a2a_unauthenticated=a2a_unauthenticated,
            allow_loopback_webhooks=allow_loopback_webhooks,
            data_dir=data,
            fresh=fresh,
            verbose=verbose,
        ).start()
    except OSError as exc:
        if exc.filename:
            raise
        raise CliError(
            f"cannot serve on {host}:{port}: {exc.strerror or exc}", EXIT_UNREACHABLE, code="unavailable"
        ) from None
    except UnsafeOptions as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    except DataDirBusy as exc:
        raise CliError(f"{exc}: stop it first, or pass another --data", EXIT_USAGE) from None
    except SnapshotOfAnotherMoto as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    except PortInUse as exc:
        raise CliError(
            f"{exc}: stop it, or pass another port (`dovecote dev --port {port + 1}`, "
            f'`make dev ARGS="--port {port + 1}"`)',
            EXIT_UNREACHABLE,
            code="unavailable",
        ) from None
    say(f"Dovecote dev runtime ready at {runtime.endpoint}")
    if moved:
        say(f"tokens: {moved}")
    say(
        f"tokens: {tokens_file} (authority 'dev'; roles admin, caller, worker; the admin token lasts 7 days, "
        "renewed at a start when less than a day is left; the others 365)"
    )
    # `whoami` reaches this runtime as it stands, or, when another one keeps the clone's tokens file
    # and the `dev` profiles, through the profile this one wrote (or its endpoint and token).
    whoami = ".venv/bin/dovecote whoami"
    fallback = ""  # the `name-PORT` profiles written beside another runtime's: removed at the stop
    if moved:
        whoami = f"DOVECOTE_ENDPOINT={runtime.endpoint} DOVECOTE_TOKEN=<caller token in {tokens_file}> {whoami}"
    if write_profile:
        path, names, why = write_profiles(write_profile, tokens_file)
        if why:
            say(f"profiles: {why}")
        if path is not None:
            use = f"; use `--profile {names[0]}`" if why else ""
            say(f"profiles: {', '.join(names)} in {path} (the CLI and the MCP server work from any directory{use})")
            if moved or why:
                whoami = f".venv/bin/dovecote --profile {names[0]} whoami"
            fallback = names[0] if why else ""
    say(f"data: {data} (kept across restarts; --fresh starts empty)")
    say(runtime.console_line(to_terminal=sys.stdout.isatty()))
    say(f"try: {whoami}    stop: Ctrl-C")
    if os.environ.get("DOVECOTE_EMBEDDER", "off") not in ("", "off"):
        say(f"recall: semantic tier on ({os.environ['DOVECOTE_EMBEDDER']} embedder; messages embed in the background)")
    if allow_loopback_webhooks:
        say("webhooks: plain http to loopback receivers allowed (--allow-loopback-webhooks; local only)")
    if a2a_unauthenticated:
        card = f"{runtime.endpoint}/.well-known/agent-card.json"
        say(f"A2A: requests without a token run as the dev caller (card: {card})")

    def _terminate(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt  # SIGTERM stops as cleanly as Ctrl-C

    signal.signal(signal.SIGTERM, _terminate)
    try:
        while True:
            # Short sleeps: a signal the kernel hands to another thread only marks the handler due,
            # and it runs when this thread next wakes (a SIGTERM once waited out an hour's sleep).
            time.sleep(1)
    except KeyboardInterrupt:
        runtime.stop()
        if fallback:
            forget_profiles(fallback, runtime.endpoint)
