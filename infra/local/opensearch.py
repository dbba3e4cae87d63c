"""A real OpenSearch 2.19.6 node on this machine, for the tests and the local runtime.

There is no Docker here, so the node is the in-repo launcher `infra/opensearch-node` (a Maven
project): OpenSearch's own jars from Maven Central, run in one JVM with the netty4, analysis-common
and painless modules loaded as classpath plugins. This module

- builds it (`mvn package`) when the jar is missing or the pom/sources changed (a stamp, like
  `infra/build.py`); the first build downloads ~85 MB of jars into ~/.m2, progress on stderr;
- starts it as a subprocess on a free loopback port with its own data directory, reads the bound
  URL from the launcher's `DOVECOTE_OPENSEARCH_URL=...` line, and waits for
  `GET /_cluster/health?wait_for_status=yellow`;
- stops it: SIGTERM (the node closes its shards), wait, then SIGKILL.

The JVM is tied to an owner process (`--owner-pid`, by default the process that starts it): when
the owner ends, however it ends, the node exits too.

`python -m infra.local.opensearch build` prebuilds; `... start` runs a node in the foreground and
prints `DOVECOTE_OPENSEARCH_URL=http://127.0.0.1:PORT`, the variable that points `dovecote dev`
(and the test suite) at it.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import httpx

ROOT = Path(__file__).resolve().parent.parent.parent
PROJECT = ROOT / "infra" / "opensearch-node"
TARGET = PROJECT / "target"
JAR = TARGET / "opensearch-node.jar"
LIB = TARGET / "lib"
STAMP = TARGET / ".dovecote-stamp"
MAIN_CLASS = "dev.dovecote.opensearch.LocalNode"
URL_LINE = "DOVECOTE_OPENSEARCH_URL="
JAVA_MAJOR = 17
INSTALL_HINT = "install Java 17 and Maven (Debian: apt-get install openjdk-17-jdk-headless maven)"

# A small heap, the serial collector and the C1 compiler only: the machines have 2 cores and other
# work, and a test node holds a few small indices for minutes. Measured on this machine (noisy):
# serial GC keeps ~100 MB less resident than G1 with fewer threads; C1-only starts faster and
# keeps ~35 MB less, with no search slowdown on test-sized data.
# The rest is what OpenSearch's launcher passes (SystemJvmOptions); the locale providers must be
# set before the JDK first formats a date, so they belong on the command line, not in main().
JVM_OPTIONS = (
    "-Xms256m",
    "-Xmx512m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Xss1m",
    "-XX:+ExitOnOutOfMemoryError",
    "-XX:-UsePerfData",
    "-XX:-OmitStackTraceInFastThrow",
    "-XX:+ShowCodeDetailsInExceptionMessages",
    "-Djava.awt.headless=true",
    "-Dfile.encoding=UTF-8",
    "-Djna.nosys=true",
    "-Djava.locale.providers=SPI,COMPAT",
)


def sized_options(heap: str, *, full_jit: bool = False) -> tuple[str, ...]:
    """JVM_OPTIONS with a fixed heap (-Xms = -Xmx = `heap`, e.g. "1g": no resizing during a
    measurement) and, with `full_jit`, the C2 compiler too (steady-state query speed, for
    benchmarks; tests keep C1 only, for a faster, smaller start)."""
    kept = [o for o in JVM_OPTIONS if not o.startswith(("-Xms", "-Xmx"))]
    if full_jit:
        kept.remove("-XX:TieredStopAtLevel=1")
    return (f"-Xms{heap}", f"-Xmx{heap}", *kept)


class OpenSearchUnavailable(RuntimeError):
    """Java or Maven is missing (or too old): the node cannot be built or run on this machine."""


class OpenSearchStartError(RuntimeError):
    """The build or the node failed; the message carries the tail of its output."""


# ---------------------------------------------------------------------------------------- tools


def find_java() -> str:
    """`$JAVA_HOME/bin/java`, else `java` on PATH; at least Java 17."""
    home = os.environ.get("JAVA_HOME")
    candidate = Path(home) / "bin" / "java" if home else None
    java = str(candidate) if candidate and candidate.is_file() else shutil.which("java")
    if java is None:
        raise OpenSearchUnavailable(f"no `java` on PATH (nor in $JAVA_HOME): {INSTALL_HINT}")
    probe = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)  # noqa: S603
    major = _java_major(probe.stderr + probe.stdout)
    if major is None or major < JAVA_MAJOR:
        found = "an unknown version" if major is None else f"Java {major}"
        raise OpenSearchUnavailable(f"{java} is {found}; OpenSearch 2.19 needs Java {JAVA_MAJOR}+: {INSTALL_HINT}")
    return java


def _java_major(version_text: str) -> int | None:
    # `openjdk version "17.0.15"`, `java version "1.8.0_392"`, `openjdk version "21" 2023-09-19`
    found = re.search(r'version "(\d+)(?:\.(\d+))?', version_text)
    if found is None:
        return None
    first = int(found.group(1))
    return int(found.group(2) or 0) if first == 1 else first


def find_maven() -> str:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise OpenSearchUnavailable(f"no `mvn` on PATH to build infra/opensearch-node: {INSTALL_HINT}")
    return mvn


# ---------------------------------------------------------------------------------------- build


def sources_digest() -> str:
    digest = hashlib.sha256()
    for path in [PROJECT / "pom.xml", *sorted((PROJECT / "src").rglob("*"))]:
        if path.is_file():
            digest.update(str(path.relative_to(PROJECT)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def is_built() -> bool:
    return JAR.is_file() and LIB.is_dir() and STAMP.is_file() and STAMP.read_text() == sources_digest()


@contextlib.contextmanager
def _build_lock() -> Iterator[None]:
    """Two processes (two pytest workers, a test run and `make dev`) never run Maven at once here."""
    TARGET.mkdir(parents=True, exist_ok=True)
    with open(TARGET / ".build.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# Maven lines worth showing while it works: the result and problems (downloads are counted).
_PROGRESS = re.compile(r"^\[(ERROR|WARNING)\]|BUILD (SUCCESS|FAILURE)|Total time")


def build(*, progress: IO[str] | None = None) -> Path:
    """Build the launcher jar and its `target/lib/` unless the stamp says they are current.

    Returns the jar. Raises OpenSearchUnavailable without Maven, OpenSearchStartError when Maven fails.
    """
    if is_built():
        return JAR
    out = sys.stderr if progress is None else progress
    with _build_lock():
        if is_built():  # another process built it while we waited
            return JAR
        mvn = find_maven()
        # A changed pom may drop or bump a jar: stale copies in lib/ would shadow the new ones.
        shutil.rmtree(LIB, ignore_errors=True)
        JAR.unlink(missing_ok=True)
        cached = (Path.home() / ".m2" / "repository" / "org" / "opensearch" / "opensearch").is_dir()
        print(
            "building infra/opensearch-node (OpenSearch 2.19.6)"
            + ("" if cached else "; the first build downloads ~85 MB from Maven Central")
            + " ...",
            file=out,
            flush=True,
        )
        started = time.monotonic()
        command = [mvn, "-B", "-Dstyle.color=never", "-f", str(PROJECT / "pom.xml"), "package"]
        process = subprocess.Popen(  # noqa: S603 (fixed argv: mvn from PATH, our pom)
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=PROJECT
        )
        assert process.stdout is not None
        tail: list[str] = []
        downloads = 0
        for line in process.stdout:
            tail = [*tail[-79:], line.rstrip()]
            if "Downloaded from" in line:
                downloads += 1
                if downloads % 25 == 0:  # a few hundred files on a cold cache: a line per 25
                    found = re.search(r"/([^/\s]+) \(", line)
                    name = found.group(1) if found else "?"
                    print(f"  mvn: {downloads} files downloaded (latest {name})", file=out, flush=True)
            elif _PROGRESS.search(line):
                print("  mvn: " + line.rstrip(), file=out, flush=True)
        if process.wait() != 0 or not JAR.is_file():
            raise OpenSearchStartError(f"`{' '.join(command)}` failed (exit {process.returncode}):\n" + "\n".join(tail))
        STAMP.write_text(sources_digest())
        print(f"built {JAR.relative_to(ROOT)} in {time.monotonic() - started:.0f} s", file=out, flush=True)
    return JAR


# ---------------------------------------------------------------------------------------- node


class OpenSearchNode:
    """One OpenSearch node in a child JVM.

    `data_dir` holds the node's home and data; without one a temporary directory is used and removed
    on stop. `owner_pid` is the process whose end ends the node (default: this process); a pytest
    controller passes its own pid so a node started by one xdist worker outlives that worker.
    """

    def __init__(
        self,
        data_dir: Path | None = None,
        *,
        port: int = 0,
        owner_pid: int | None = None,
        startup_timeout: float = 180.0,
        jvm_options: tuple[str, ...] = JVM_OPTIONS,
    ) -> None:
        self._given_dir = data_dir
        self.port = port
        self.owner_pid = os.getpid() if owner_pid is None else owner_pid
        self.startup_timeout = startup_timeout
        self.jvm_options = jvm_options
        self.url = ""
        self.dir: Path | None = None
        self.process: subprocess.Popen[str] | None = None
        self.startup_seconds = 0.0

    @property
    def pid(self) -> int:
        if self.process is None:
            raise RuntimeError("the node is not started")
        return self.process.pid

    @property
    def log_file(self) -> Path:
        if self.dir is None:
            raise RuntimeError("the node is not started")
        return self.dir / "node.log"

    def start(self, *, progress: IO[str] | None = None) -> OpenSearchNode:
        java = find_java()
        build(progress=progress)
        self.dir = self._given_dir or Path(tempfile.mkdtemp(prefix="dovecote-opensearch-"))
        self.dir.mkdir(parents=True, exist_ok=True)
        command = [
            java,
            *self.jvm_options,
            "-cp",
            f"{JAR}{os.pathsep}{LIB}/*",
            MAIN_CLASS,
            "--home",
            str(self.dir / "home"),
            "--data",
            str(self.dir / "data"),
            "--port",
            str(self.port),
            "--owner-pid",
            str(self.owner_pid),
        ]
        started = time.monotonic()
        with open(self.log_file, "w") as log:  # the child keeps its own copy of the descriptor
            self.process = subprocess.Popen(  # noqa: S603 (fixed argv: java, our jar)
                command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, text=True
            )
        try:
            self.url = self._read_url(deadline=started + self.startup_timeout)
            self._wait_healthy(deadline=started + self.startup_timeout)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - started
        return self

    def _read_url(self, *, deadline: float) -> str:
        assert self.process is not None and self.process.stdout is not None
        lines: queue.Queue[str | None] = queue.Queue()
        stdout = self.process.stdout

        def pump() -> None:  # a thread, so the wait has a deadline; it ends when the JVM does
            with stdout:
                for line in stdout:
                    lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, name="opensearch-node-stdout", daemon=True).start()
        while True:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise self._failure(f"printed no URL within {self.startup_timeout:.0f} s") from None
            if line is None:
                raise self._failure(f"exited (status {self.process.wait()}) before it was listening")
            if line.startswith(URL_LINE):
                return line[len(URL_LINE) :].strip()

    def _wait_healthy(self, *, deadline: float) -> None:
        assert self.process is not None
        last = ""
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise self._failure(f"exited (status {self.process.returncode}) while starting")
            try:
                response = httpx.get(
                    f"{self.url}/_cluster/health", params={"wait_for_status": "yellow", "timeout": "5s"}, timeout=10
                )
                if response.status_code == 200 and response.json().get("status") in ("yellow", "green"):
                    return
                last = f"HTTP {response.status_code}: {response.text[:200]}"
            except httpx.TransportError as exc:
                last = repr(exc)
                time.sleep(0.2)
        raise self._failure(f"was not yellow within {self.startup_timeout:.0f} s (last answer: {last})")

    def _failure(self, what: str) -> OpenSearchStartError:
        return OpenSearchStartError(f"the OpenSearch node {what}; the end of its stderr:\n{self.log_tail()}")

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except (OSError, RuntimeError):
            return "(no log)"

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM (the node closes cleanly), wait, SIGKILL. Removes a temporary data dir."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=timeout)
        if self._given_dir is None and self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> OpenSearchNode:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def stop_pid(pid: int, timeout: float = 30.0) -> None:
    """Stop a node this process did not start (the shared test node started by an xdist worker).

    Only a process running our launcher is signalled, so a recycled pid is left alone.
    """
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return  # already gone
    if MAIN_CLASS.encode() not in cmdline:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _running(pid):
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"  # a zombie has exited; its parent just has not reaped it yet


# ---------------------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.local.opensearch", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("build", help="build infra/opensearch-node unless it is current")
    start = commands.add_parser("start", help="run a node in the foreground until interrupted")
    start.add_argument("--data", type=Path, help="keep the node's home and data here (default: a temporary dir)")
    start.add_argument("--port", type=int, default=0, help="HTTP port (default: a free one)")
    start.add_argument("--heap", help="a fixed heap for a measurement, e.g. 1g (default: 256m growing to 512m)")
    start.add_argument("--full-jit", action="store_true", help="the C2 compiler too (benchmarks; slower start)")
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            print(build())
            return 0
        options = (
            sized_options(args.heap or "512m", full_jit=args.full_jit) if args.heap or args.full_jit else JVM_OPTIONS
        )
        node = OpenSearchNode(args.data, port=args.port, jvm_options=options)
        node.start()
    except (OpenSearchUnavailable, OpenSearchStartError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"{URL_LINE}{node.url}", flush=True)
    print(f"OpenSearch 2.19.6 is up in {node.startup_seconds:.1f} s (pid {node.pid}); Ctrl-C stops it", file=sys.stderr)
    stopping = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopping.set())
    while not stopping.is_set() and node.process is not None and node.process.poll() is None:
        stopping.wait(1.0)
    # Ctrl-C in a terminal reaches the JVM too, so an exit after the signal is the expected one.
    exited = not stopping.is_set()
    node.stop()
    if exited:
        print(f"the node exited by itself; its log:\n{node.log_tail()}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
