"""Build the Lambda assets without Docker.

- `.build/layer/python/`: the pinned runtime dependencies for arm64 / Python 3.12, installed with
  `pip install --platform manylinux2014_aarch64 --only-binary=:all:`, plus the `dovecote` package.
  boto3/botocore are not bundled: the Lambda runtime's own copy is used. Every dependency is named
  with its exact pin and installed `--no-deps`, so nothing unpinned (botocore, via aws-xray-sdk)
  slips in.
- `.build/functions/`: the `functions` package, shared by every function (each has its own handler
  path and its own IAM role).

A stamp (a hash of the pins and the sources) makes a second build instant.

Both are shipped compiled for the runtime's Python (`compileall`, unchecked-hash .pyc files: a zip
keeps no source mtimes to check them against): Lambda's code directories are read-only, so a module
without its bytecode is compiled from source on every cold start. That needs a Python 3.12
interpreter (`python3.12` on PATH, or DOVECOTE_RUNTIME_PYTHON); without one the assets ship as
source, and the build says so.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / ".build"
LAYER = BUILD / "layer"
FUNCTIONS = BUILD / "functions"

# Exact pins of the layer (the runtime closure of powertools[tracer], pydantic, PynamoDB and
# opensearch-py, minus boto3/botocore and their dependencies, which the Lambda runtime provides).
LAYER_REQUIREMENTS = (
    "aws-lambda-powertools==3.37.0",
    "pynamodb==6.1.0",
    "aws-xray-sdk==2.15.0",
    "wrapt==2.5.2",
    "jmespath==1.1.0",
    "pydantic==2.14.3",
    "pydantic-core==2.50.4",
    "annotated-types==0.8.0",
    "typing-inspection==0.4.5",
    "typing-extensions==4.16.0",
    # The OpenSearch engine (recall's cloud index): opensearch-py and what it imports that the
    # runtime's botocore does not bring (urllib3, python-dateutil and six come with it).
    "opensearch-py==3.2.0",
    "requests==2.34.2",
    "certifi==2026.10.19.post1",
    "charset-normalizer==3.5.3",
    "idna==3.20",
    "events==0.5",
    # RE2 for recall's caller-supplied path patterns (dovecote.recall.patterns); no dependencies.
    "google-re2==1.1",
    # A2A (dovecote.a2a, imported by a2a_api alone): `a2a.types` needs only protobuf and the Google
    # API protos (google.api annotations, google.rpc); the SDK's server and client extras are not shipped.
    "a2a-sdk==1.3.0",
    "protobuf==7.36.2",
    "googleapis-common-protos==1.76.0",
)
RUNTIME_PYTHON = (3, 12)
# The SDK and the CLI are client-side; the layer ships only what handlers import.
LAYER_EXCLUDES = ("cli", "client", "mcp")


def _sources_digest(*roots: Path) -> str:
    digest = hashlib.sha256("\n".join(LAYER_REQUIREMENTS).encode())
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            digest.update(str(path.relative_to(ROOT)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    """One build at a time across processes: parallel test workers synthesize at once, and a
    half-copied package under another's rmtree fails both."""
    BUILD.mkdir(parents=True, exist_ok=True)
    with (BUILD / ".lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _copy_package(src: Path, dest: Path, exclude: tuple[str, ...] = ()) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", *exclude))


def _runtime_python() -> str | None:
    """An interpreter of the Lambda runtime's version, or None."""
    major, minor = RUNTIME_PYTHON
    for candidate in (os.environ.get("DOVECOTE_RUNTIME_PYTHON"), shutil.which(f"python{major}.{minor}")):
        if not candidate:
            continue
        probe = subprocess.run(  # noqa: S603 - an interpreter path, a fixed probe
            [candidate, "-c", "import sys; print(*sys.version_info[:2])"], capture_output=True, text=True, check=False
        )
        if probe.returncode == 0 and probe.stdout.split() == [str(major), str(minor)]:
            return candidate
    return None


def _compile(root: Path, *, quiet: bool) -> None:
    """The runtime's bytecode beside every module under `root` (see the module docstring)."""
    python = _runtime_python()
    if python is None:
        if not quiet:
            print(f"no Python {'.'.join(map(str, RUNTIME_PYTHON))}: {root.name} ships without bytecode", flush=True)
        return
    subprocess.run(  # noqa: S603 - the runtime's interpreter, the standard library's compileall
        [python, "-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash", str(root)],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def build_layer(*, quiet: bool = False) -> Path:
    with _locked():
        return _build_layer(quiet=quiet)


def _build_layer(*, quiet: bool) -> Path:
    stamp = LAYER / ".stamp"
    want = _sources_digest(ROOT / "shared" / "dovecote") + ("+pyc" if _runtime_python() else "")
    if stamp.exists() and stamp.read_text() == want:
        return LAYER
    site = LAYER / "python"
    deps_stamp = LAYER / ".deps"
    deps_want = hashlib.sha256("\n".join(LAYER_REQUIREMENTS).encode()).hexdigest()[:16] + want[16:]
    if not (deps_stamp.exists() and deps_stamp.read_text() == deps_want):
        if LAYER.exists():
            shutil.rmtree(LAYER)
        site.mkdir(parents=True)
        if not quiet:
            print("building the Lambda layer (arm64, Python 3.12) without Docker ...", flush=True)
        subprocess.run(  # noqa: S603 (fixed argv: this interpreter, pinned requirements)
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-deps",
                # pip would compile for this interpreter, not the runtime's: _compile does that.
                "--no-compile",
                "--platform",
                "manylinux2014_aarch64",
                "--implementation",
                "cp",
                "--python-version",
                "3.12",
                "--only-binary=:all:",
                "--target",
                str(site),
                *LAYER_REQUIREMENTS,
            ],
            check=True,
        )
        _compile(site, quiet=quiet)
        deps_stamp.write_text(deps_want)
    _copy_package(ROOT / "shared" / "dovecote", site / "dovecote", LAYER_EXCLUDES)
    _compile(site / "dovecote", quiet=quiet)
    stamp.write_text(want)
    return LAYER


def build_functions() -> Path:
    with _locked():
        return _build_functions()


def _build_functions() -> Path:
    stamp = FUNCTIONS / ".stamp"
    # A build with bytecode is not the same as one without: an interpreter found later rebuilds.
    want = _sources_digest(ROOT / "functions") + ("+pyc" if _runtime_python() else "")
    if stamp.exists() and stamp.read_text() == want:
        return FUNCTIONS
    FUNCTIONS.mkdir(parents=True, exist_ok=True)
    _copy_package(ROOT / "functions", FUNCTIONS / "functions")
    _compile(FUNCTIONS / "functions", quiet=True)
    stamp.write_text(want)
    return FUNCTIONS


def main() -> None:
    layer = build_layer()
    functions = build_functions()
    print(f"layer: {layer}\nfunctions: {functions}")


if __name__ == "__main__":
    main()
