"""Markdown that runs (issues 16 and 35): every `sh` and `python` block of a page (README.md, or a page
of the manual in docs/), in order, against a `dovecote dev` of its own on a free port, found the way a
reader's CLI finds it after `make dev` (the `dev` profiles, the `.dovecote/dev-tokens.json` of the
working directory). tests/e2e/test_readme.py runs the README with it, tests/e2e/test_docs_run.py each
page of the manual.

The conventions, which docs/development.md states:
- `<name>` in a command stands for the field `name` of the latest JSON printed before it (in this
  block or an earlier one of the page), so the command that produces it prints `--json`. A shell block
  is run in pieces cut before each such line, so its variables and background jobs do not reach past it.
- A block whose fence says `not-run="<why>"` after its language (```` ```sh not-run="it needs AWS" ````)
  is not run: the reason is in the fence, which neither GitHub nor the site shows, and the test reports
  it as a skip with the page, the line and the reason, never dropped silently.
- Any other block must run: one that fails, outlives its own commands (a worker left running), or does
  not finish in time fails the test, naming its page and line. `text`, `json` and `toml` blocks are not
  commands (`json` and `toml` must parse); any other language fails, so a block cannot escape by being
  spelled `bash`.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import tomllib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from tests.conftest import ROOT

RUN = ("sh", "python")
NOT_COMMANDS = ("", "text", "json", "toml")
NOT_RUN = re.compile(r'\bnot-run="(?P<why>[^"]*)"')
# The old in-line mark, now refused: a reader should not meet test plumbing in a command's comment.
OLD_MARK = re.compile(r"not run by the \w+ test", re.IGNORECASE)
PLACEHOLDER = re.compile(r"<([a-z][a-z0-9_]*)>")
# Something a reader would take for a placeholder but the test cannot fill (`<relation id>`, `<Ref>`).
LOOSE_PLACEHOLDER = re.compile(r"<[A-Za-z][^<>]*>")
# A line of a `text` or untyped block that is a command in disguise: it would escape the test.
COMMAND_LIKE = re.compile(r"^\s*(\$ |\.venv/bin/|dovecote |make |curl |python3? )")
SEGMENT_TIMEOUT = 120.0  # `tasks wait` gives up at 60 s by default
EXIT_GRACE = 20.0  # a worker stopped with `kill %1` releases its leases before it exits
# Set in every shell block: stop at the first failing command and say its line, and keep the line of the
# command running now in a file (for a block that hangs). The script is padded so that $LINENO is the
# page's line number.
PRELUDE = "set -eEo pipefail; trap 's=$?; echo \"{page}:$LINENO: exit $s\" >&2' ERR; trap 'echo $LINENO > {at}' DEBUG"
PYTHON = "import sys; exec(compile(open(sys.argv[1]).read(), sys.argv[2], 'exec'), {'__name__': '__main__'})"


@dataclass(frozen=True)
class Block:
    page: str  # the page's path from the clone's root: README.md, docs/services/notes.md
    lang: str
    fence: int  # the page's line of the opening fence
    lines: tuple[str, ...]  # the content, de-indented; line i is the page's line fence + 1 + i
    section: str
    info: str = ""  # the whole info string: the language and its attributes

    @property
    def where(self) -> str:
        return f"the {self.lang or 'untyped'} block at {self.page}:{self.fence} ({self.section})"

    @property
    def not_run(self) -> str | None:
        """Why the block is not run, when its fence says so."""
        found = NOT_RUN.search(self.info)
        return found["why"].strip() if found else None

    @property
    def runs(self) -> bool:
        return self.lang in RUN and self.not_run is None

    def numbered(self) -> Iterator[tuple[int, str]]:
        for i, line in enumerate(self.lines):
            yield self.fence + 1 + i, line


def read_blocks(path: Path) -> list[Block]:
    """Every fenced block of the page, with the heading it sits under (markdown-it, the parser rich
    already depends on: fences inside list items and longer fences are its business, not a regex's)."""
    page = path.relative_to(ROOT).as_posix()
    tokens = MarkdownIt("commonmark").parse(path.read_text())
    section = "top"
    out = []
    for i, token in enumerate(tokens):
        if token.type == "heading_open":
            section = tokens[i + 1].content
        elif token.type == "fence" and token.map:
            info = token.info.strip()
            lang = info.split(" ", 1)[0] if info else ""
            out.append(Block(page, lang, token.map[0] + 1, tuple(token.content.splitlines()), section, info))
    return out


def split_comment(line: str) -> tuple[str, str]:
    """(command, comment): the comment starts at a `#` that begins a word outside quotes."""
    quote = ""
    for i, char in enumerate(line):
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i], line[i:]
    return line, ""


def shape_problems(blocks: list[Block]) -> list[str]:
    """What is wrong with a page's blocks, found without a runtime."""
    problems = []
    for block in blocks:
        if block.lang not in RUN + NOT_COMMANDS:
            problems.append(f"{block.where}: `{block.lang}` is neither run ({', '.join(RUN)}) nor a non-command")
        elif block.not_run is not None and (block.lang not in RUN or not block.not_run):
            problems.append(f"{block.where}: not-run needs a reason, and belongs on an sh or python block")
        elif block.lang in ("", "text"):
            problems += [
                f"{block.page}:{n}: a command in {block.where}: make it an sh block (not-run if it cannot run)"
                for n, line in block.numbered()
                if COMMAND_LIKE.match(line)
            ]
        elif block.lang == "json":
            try:
                json.loads("\n".join(block.lines))
            except ValueError as exc:
                problems.append(f"{block.where}: not JSON: {exc}")
        elif block.lang == "toml":
            try:
                tomllib.loads("\n".join(block.lines))
            except ValueError as exc:
                problems.append(f"{block.where}: not TOML: {exc}")
        for number, line in block.numbered():
            if OLD_MARK.search(line):
                problems.append(f'{block.page}:{number}: say it in the fence instead: ```sh not-run="why"')
        if not block.runs:
            continue
        for number, line in block.numbered():
            command = split_comment(line)[0]
            loose = [p for p in LOOSE_PLACEHOLDER.findall(command) if not PLACEHOLDER.fullmatch(p)]
            if loose:
                problems.append(f"{block.page}:{number}: {loose[0]} cannot be filled: write <field> of the JSON above")
            if block.lang == "sh" and "&&" in command:
                problems.append(f"{block.page}:{number}: one command per line (a shell ignores a failure left of &&)")
            if re.search(r"\bsleep\b", command):
                problems.append(f"{block.page}:{number}: no sleep: wait for the state (`tasks wait`, `wait_for`)")
    return problems


# ---- running it --------------------------------------------------------------------------------


def json_documents(output: str) -> list[Any]:
    """The JSON documents a command printed (one per line with --json; curl's may run together)."""
    decoder = json.JSONDecoder()
    docs = []
    for line in output.splitlines():
        pos = 0
        stripped = line.strip()
        while pos < len(stripped) and stripped[pos] in "{[":
            try:
                doc, end = decoder.raw_decode(stripped, pos)
            except ValueError:
                break
            docs.append(doc)
            pos = end
    return docs


def field(doc: Any, name: str) -> Any:
    """The first value of key `name` in `doc`, in document order (None when absent)."""
    if isinstance(doc, dict):
        if name in doc:
            return doc[name]
        children: list[Any] = list(doc.values())
    elif isinstance(doc, list):
        children = doc
    else:
        return None
    for child in children:
        found = field(child, name)
        if found is not None:
            return found
    return None


def segments(block: Block) -> list[list[tuple[int, str]]]:
    """The block cut before each line with a placeholder: that line's value comes from what ran before."""
    out: list[list[tuple[int, str]]] = []
    for number, line in block.numbered():
        if not out or PLACEHOLDER.search(split_comment(line)[0]):
            out.append([])
        out[-1].append((number, line))
    return out


def group_alive(pgid: int) -> bool:
    """A process of the group still runs (zombies do not count: nothing here may reap orphans)."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        return True
    for stat in proc.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            return True
    return False


class Reader:
    """A reader after `make dev`: a directory that looks like the clone, a home of its own."""

    def __init__(self, tmp: Path, runtime: dict[str, Any]) -> None:
        self.work = tmp / "clone"
        self.home = tmp / "home"
        self.scratch = tmp / "runs"
        for path in (self.work / ".dovecote", self.home, self.scratch):
            path.mkdir(parents=True)
        # The clone's directories (.venv, examples, …), not its files: what a block writes at the top
        # (plan.md, patch.diff) stays in this directory and never reaches the checkout.
        for entry in ROOT.iterdir():
            if entry.is_dir() and entry.name not in (".git", ".dovecote"):
                (self.work / entry.name).symlink_to(entry)
        (self.work / ".dovecote" / "dev-tokens.json").symlink_to(runtime["tokens_file"])
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "DOVECOTE_", "XDG_"))}
        # The profiles `dovecote dev` wrote (dev, dev-worker, dev-admin) are the reader's configuration.
        # TMPDIR of its own: a page's `${TMPDIR:-/tmp}/s1-watch.jsonl` is not another run's (two runs
        # of one page at once, e.g. two checkouts' tests on one machine, once removed each other's).
        (self.home / "tmp").mkdir(exist_ok=True)
        self.env = clean | {
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(runtime["config_home"]),
            "TMPDIR": str(self.home / "tmp"),
        }
        self.documents: list[Any] = []
        self.runs = 0
        self.own_files()

    def own_files(self) -> None:
        """What a page assumes the reader has: a plan, a patch, one Claude Code session."""
        (self.work / "plan.md").write_text("plan A: harden the widget\n")
        (self.work / "patch.diff").write_text("--- a/widget\n+++ b/widget\n@@ -1 +1 @@\n-soft\n+hard\n")
        project = self.home / ".claude" / "projects" / "-home-reader-widget"
        project.mkdir(parents=True)
        session = str(uuid.uuid4())
        start = datetime.now(UTC)
        turns = [
            ("user", "test_upload is flaky in CI, one run in five fails. Should we add a retry?"),
            ("assistant", "A retry would hide the race: the flaky test sleeps instead of waiting for the upload."),
            ("user", "then wait for it, and keep the retry for transient 503s only"),
            ("assistant", "Done: the test waits for the upload; the client retry covers transient errors."),
        ]
        rows, parent = [], None
        for i, (role, text) in enumerate(turns):
            row_id = str(uuid.uuid4())
            content: Any = text if role == "user" else [{"type": "text", "text": text}]
            rows.append(
                {
                    "parentUuid": parent,
                    "isSidechain": False,
                    "type": role,
                    "cwd": "/home/reader/widget",
                    "sessionId": session,
                    "uuid": row_id,
                    "timestamp": (start + timedelta(seconds=i)).isoformat().replace("+00:00", "Z"),
                    "message": {"role": role, "content": content},
                }
            )
            parent = row_id
        (project / f"{session}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))

    def fill(self, block: Block, number: int, line: str) -> str:
        command, comment = split_comment(line)

        def value(match: re.Match[str]) -> str:
            name = match[1]
            for doc in reversed(self.documents):
                found = field(doc, name)
                if isinstance(found, str | int) and not isinstance(found, bool):
                    return shlex.quote(str(found)) if block.lang == "sh" else str(found)
            pytest.fail(
                f"{block.page}:{number}: {match[0]} in {block.where}: no JSON printed above has a field "
                f'"{name}" (the command that prints it needs --json)',
                pytrace=False,
            )

        return PLACEHOLDER.sub(value, command) + comment

    @staticmethod
    def culprit(block: Block, segment: list[tuple[int, str]], code: int | None, stderr: str, at: Path) -> int:
        """The line to blame: the failing command (the shell's ERR trap, Python's traceback), the
        command running at a timeout, or the one that started what was left running."""
        if code:
            page = re.escape(block.page)
            failed = re.findall(rf"{page}(?::|\", line )(\d+)", stderr)
            if failed:
                return int(failed[0] if block.lang == "sh" else failed[-1])
        elif code is None:
            running = at.read_text().strip() if at.exists() else ""
            if running.isdigit():
                return int(running)
        else:
            commands = [(n, split_comment(line)[0].rstrip()) for n, line in segment]
            started = [n for n, cmd in commands if cmd.endswith("&") and not cmd.endswith("&&")]
            if started:
                return started[-1]
        return next((n for n, line in segment if split_comment(line)[0].strip()), segment[0][0])

    def run(self, block: Block, segment: list[tuple[int, str]]) -> None:
        first = segment[0][0]
        body = "\n".join(self.fill(block, number, line) for number, line in segment)
        self.runs += 1
        out_path, err_path = self.scratch / f"{self.runs}.out", self.scratch / f"{self.runs}.err"
        at_path = self.scratch / f"{self.runs}.at"
        if block.lang == "sh":
            prelude = PRELUDE.format(page=block.page, at=shlex.quote(str(at_path)))
            argv = ["bash", "--noprofile", "--norc", "-c", prelude + "\n" * (first - 1) + body]
        else:
            script = self.scratch / f"{self.runs}.py"
            script.write_text("\n" * (first - 1) + body + "\n")
            argv = [sys.executable, "-c", PYTHON, str(script), block.page]
        started = time.monotonic()
        with out_path.open("w") as out, err_path.open("w") as err:
            process = subprocess.Popen(
                argv,
                cwd=self.work,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,  # its own process group: whatever it starts is found and stopped
            )
            try:
                code: int | None = process.wait(timeout=SEGMENT_TIMEOUT)
            except subprocess.TimeoutExpired:
                code = None
            deadline = time.monotonic() + EXIT_GRACE
            while group_alive(process.pid) and time.monotonic() < deadline and code is not None:
                time.sleep(0.2)
            left_running = group_alive(process.pid)
            if left_running or code is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        stdout, stderr = out_path.read_text(), err_path.read_text()
        print(f"{block.page}:{first}-{segment[-1][0]} ({block.lang}): {time.monotonic() - started:.1f} s")
        if code == 0 and not left_running:
            self.documents += json_documents(stdout)
            return
        if code is None:
            what = f"did not finish in {SEGMENT_TIMEOUT:.0f} s"
        elif code:
            what = f"exit {code}"
        else:
            what = f"left a process running {EXIT_GRACE:.0f} s after its last command (bound it, or mark it)"
        line = self.culprit(block, segment, code, stderr, at_path)
        text = dict(segment).get(line, "").strip()
        pytest.fail(
            f"{block.page}:{line}: {what}, in {block.where}\n  {text}\n"
            f"--- stdout (last 2000 characters) ---\n{stdout[-2000:]}\n"
            f"--- stderr (last 2000 characters) ---\n{stderr[-2000:]}",
            pytrace=False,
        )

    def run_page(self, blocks: list[Block]) -> int:
        """Every block of the page that runs, in order; the number of pieces run. A page whose blocks
        break the conventions is not run at all (a mark the test does not know would run its block)."""
        problems = shape_problems(blocks)
        if problems:
            pytest.fail("\n".join(problems), pytrace=False)
        ran = 0
        for block in blocks:
            if block.runs:
                for segment in segments(block):
                    self.run(block, segment)
                    ran += 1
        return ran


def skip_reason(block: Block) -> str:
    commands = [c for c in (split_comment(x)[0].strip() for x in block.lines) if c]
    what = (commands[0] + (" …" if len(commands) > 1 else "")) if commands else "(empty)"
    return f"{block.page}:{block.fence} not run (`{what}`): {block.not_run}"
