"""The README runs (issue 16): every `sh` and `python` block of README.md, in order, against a
`dovecote dev` of its own on a free port, found the way a reader's CLI finds it after `make dev`
(the `dev` profiles, the `.dovecote/dev-tokens.json` of the working directory).

The conventions, which README.md states under Development:
- `<name>` in a command stands for the field `name` of the latest JSON printed before it (in this
  block or an earlier one), so the command that produces it prints `--json`. A shell block is run in
  pieces cut before each such line, so its variables and background jobs do not reach past it.
- A line whose comment says `not run by the README test: <why>` is not run; when that comment is the
  block's first line, the whole block is not run. Each one is reported as a skipped test with its line
  and reason, never dropped silently.
- Any other block must run: one that fails, outlives its own commands (a worker left running), or does
  not finish in time fails the test, naming its README line. `text`, `json` and `toml` blocks are not
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
from tests.e2e.conftest import start_dev

README = ROOT / "README.md"
RUN = ("sh", "python")
NOT_COMMANDS = ("", "text", "json", "toml")
NO_RUN = re.compile(r"\bnot run by the README test:\s*(?P<why>.*?)\)?\s*$")
PLACEHOLDER = re.compile(r"<([a-z][a-z0-9_]*)>")
# Something a reader would take for a placeholder but the test cannot fill (`<relation id>`, `<Ref>`).
LOOSE_PLACEHOLDER = re.compile(r"<[A-Za-z][^<>]*>")
# A line of a `text` or untyped block that is a command in disguise: it would escape the test.
COMMAND_LIKE = re.compile(r"^\s*(\$ |\.venv/bin/|dovecote |make |curl |python3? )")
SEGMENT_TIMEOUT = 120.0  # `tasks wait` gives up at 60 s by default
EXIT_GRACE = 20.0  # a worker stopped with `kill %1` releases its leases before it exits
# Set in every shell block: stop at the first failing command and say its README line, and keep the line
# of the command running now in a file (for a block that hangs). The script is padded so that $LINENO is
# the README's line number.
PRELUDE = (
    "set -eEo pipefail; trap 's=$?; echo \"README.md:$LINENO: exit $s\" >&2' ERR; trap 'echo $LINENO > {at}' DEBUG"
)
PYTHON = "import sys; exec(compile(open(sys.argv[1]).read(), 'README.md', 'exec'), {'__name__': '__main__'})"


@dataclass(frozen=True)
class Block:
    lang: str
    fence: int  # README line of the opening fence
    lines: tuple[str, ...]  # the content, de-indented; line i is README line fence + 1 + i
    section: str

    @property
    def where(self) -> str:
        return f"the {self.lang or 'untyped'} block at README.md:{self.fence} ({self.section})"

    def numbered(self) -> Iterator[tuple[int, str]]:
        for i, line in enumerate(self.lines):
            yield self.fence + 1 + i, line


@dataclass(frozen=True)
class Mark:
    """A README line, or a whole block, that the test does not run, and why."""

    line: int
    why: str
    whole_block: bool
    text: str


def read_blocks(text: str) -> list[Block]:
    """Every fenced block of the README, with the heading it sits under (markdown-it, the parser rich
    already depends on: fences inside list items and longer fences are its business, not a regex's)."""
    tokens = MarkdownIt("commonmark").parse(text)
    section = "top"
    out = []
    for i, token in enumerate(tokens):
        if token.type == "heading_open":
            section = tokens[i + 1].content
        elif token.type == "fence" and token.map:
            lang = token.info.strip().split(" ", 1)[0] if token.info.strip() else ""
            out.append(Block(lang, token.map[0] + 1, tuple(token.content.splitlines()), section))
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


def marks_of(block: Block) -> list[Mark]:
    if block.lang not in RUN:
        return []
    out = []
    for number, line in block.numbered():
        found = NO_RUN.search(split_comment(line)[1])
        if found:
            whole = number == block.fence + 1 and line.lstrip().startswith("#")
            commands = [c for c in (split_comment(x)[0].strip() for x in block.lines) if c]
            what = (commands[0] + (" …" if len(commands) > 1 else "")) if whole else split_comment(line)[0].strip()
            out.append(Mark(number, found["why"].strip(), whole, what))
    return out


BLOCKS = read_blocks(README.read_text())
MARKS = [mark for block in BLOCKS for mark in marks_of(block)]


def runnable(block: Block) -> list[tuple[int, str]]:
    """The block's lines as it runs: every line a mark excludes is blank (the numbering is kept)."""
    marks = marks_of(block)
    if any(mark.whole_block for mark in marks):
        return []
    skipped = {mark.line for mark in marks}
    return [(number, "" if number in skipped else line) for number, line in block.numbered()]


# ---- the README's shape: checked without a runtime ----------------------------------------------


def test_every_block_is_run_or_says_why() -> None:
    problems = []
    for block in BLOCKS:
        if block.lang not in RUN + NOT_COMMANDS:
            problems.append(f"{block.where}: `{block.lang}` is neither run ({', '.join(RUN)}) nor a non-command")
        elif block.lang in ("", "text"):
            problems += [
                f"README.md:{n}: a command in {block.where}: make it an sh block (marked if it cannot run)"
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
        else:
            problems += [f"README.md:{m.line}: a not-run mark without its reason" for m in marks_of(block) if not m.why]
            for number, line in runnable(block):
                command = split_comment(line)[0]
                loose = [p for p in LOOSE_PLACEHOLDER.findall(command) if not PLACEHOLDER.fullmatch(p)]
                if loose:
                    problems.append(f"README.md:{number}: {loose[0]} cannot be filled: write <field> of the JSON above")
                if block.lang == "sh" and "&&" in command:
                    problems.append(f"README.md:{number}: one command per line (a shell ignores a failure left of &&)")
                if re.search(r"\bsleep\b", command):
                    problems.append(f"README.md:{number}: no sleep: wait for the state (`tasks wait`, `wait_for`)")
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)
    assert [b for b in BLOCKS if b.lang in RUN and runnable(b)], "the README has no block to run"


@pytest.mark.parametrize("mark", MARKS, ids=[f"README.md:{m.line}" for m in MARKS])
def test_what_the_readme_test_does_not_run(mark: Mark) -> None:
    """Reported, not dropped: each line or block marked in the README shows as a skip with its reason."""
    assert mark.why and mark.text.strip()
    pytest.skip(
        reason=f"README.md:{mark.line} not run ({'block' if mark.whole_block else 'line'} `{mark.text}`): {mark.why}"
    )


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
    for number, line in runnable(block):
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
        self.env = clean | {"HOME": str(self.home), "XDG_CONFIG_HOME": str(runtime["config_home"])}
        self.documents: list[Any] = []
        self.runs = 0

    def own_files(self) -> None:
        """What the README assumes the reader has: a plan, a patch, one Claude Code session."""
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
                f"README.md:{number}: {match[0]} in {block.where}: no JSON printed above has a field "
                f'"{name}" (the command that prints it needs --json)',
                pytrace=False,
            )

        return PLACEHOLDER.sub(value, command) + comment

    @staticmethod
    def culprit(block: Block, segment: list[tuple[int, str]], code: int | None, stderr: str, at: Path) -> int:
        """The README line to blame: the failing command (the shell's ERR trap, Python's traceback), the
        command running at a timeout, or the one that started what was left running."""
        if code:
            failed = re.findall(r"README\.md(?::|\", line )(\d+)", stderr)
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
            prelude = PRELUDE.format(at=shlex.quote(str(at_path)))
            argv = ["bash", "--noprofile", "--norc", "-c", prelude + "\n" * (first - 1) + body]
        else:
            script = self.scratch / f"{self.runs}.py"
            script.write_text("\n" * (first - 1) + body + "\n")
            argv = [sys.executable, "-c", PYTHON, str(script)]
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
        print(f"README.md:{first}-{segment[-1][0]} ({block.lang}): {time.monotonic() - started:.1f} s")
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
            f"README.md:{line}: {what}, in {block.where}\n  {text}\n"
            f"--- stdout (last 2000 characters) ---\n{stdout[-2000:]}\n"
            f"--- stderr (last 2000 characters) ---\n{stderr[-2000:]}",
            pytrace=False,
        )


def test_the_readme_runs(tmp_path: Path) -> None:
    runtime_dir = tmp_path / "runtime"
    runtime_dir.mkdir()
    with start_dev(runtime_dir) as runtime:
        reader = Reader(tmp_path, runtime)
        reader.own_files()
        ran = 0
        for block in BLOCKS:
            if block.lang not in RUN:
                continue
            for segment in segments(block):
                reader.run(block, segment)
                ran += 1
    assert ran >= len([b for b in BLOCKS if b.lang in RUN and runnable(b)])
