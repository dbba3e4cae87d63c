"""The Embedder port (issue 20): one conformance suite for every adapter, the Bedrock adapter against a
local stub of `bedrock-runtime` InvokeModel (moto has none) that checks each request's shape, and the
faults a real service gives (throttling, too many tokens, access denied, a malformed answer).

The stub answers a deterministic unit vector per text, so the suite can tell order and identity."""

from __future__ import annotations

import hashlib
import json
import math
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

import boto3
import pytest
from botocore.config import Config

from dovecote.embedding.bedrock import TITAN_V2, BedrockEmbedder
from dovecote.embedding.fakes import HashingEmbedder
from dovecote.embedding.ports import MAX_BATCH, MAX_CHARS, Embedder
from dovecote.platform.errors import InvalidArgument, Unavailable
from tests.conftest import CI

TOKEN_LIMIT_CHARS = 3_000


def approx(vector: list[float]) -> Any:
    """The adapter normalizes again what the service normalized: equal up to rounding."""
    return pytest.approx(vector, rel=1e-12, abs=1e-15)  # the stub's stand-in for Titan's 8,192 tokens


def stub_vector(text: str, dimension: int) -> list[float]:
    seed = hashlib.sha256(text.encode("utf-8")).digest()
    raw = [((seed[i % 32] + i * 7) % 251) - 125.0 for i in range(dimension)]
    norm = math.sqrt(sum(x * x for x in raw))
    return [x / norm for x in raw]


class Stub(BaseHTTPRequestHandler):
    """POST /model/{modelId}/invoke as Titan Text Embeddings V2 answers it."""

    protocol_version = "HTTP/1.1"
    seen: list[dict[str, Any]] = []
    throttled: set[str] = set()

    def _send(self, status: int, document: dict[str, Any], error: str = "") -> None:
        body = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        if error:
            self.send_header("x-amzn-ErrorType", error)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers["Content-Length"]))
        parts = self.path.split("/")
        model = unquote(parts[2]) if len(parts) == 4 and parts[1] == "model" and parts[3] == "invoke" else ""
        body = json.loads(raw)
        Stub.seen.append({"model": model, "headers": dict(self.headers), "body": body})
        if model != TITAN_V2 or set(body) != {"inputText", "dimensions", "normalize"}:
            self._send(400, {"message": f"bad request shape: {model} {sorted(body)}"}, "ValidationException")
            return
        if not self.headers.get("Authorization", "").startswith("AWS4-HMAC-SHA256"):
            self._send(403, {"message": "unsigned"}, "AccessDeniedException")
            return
        text = body["inputText"]
        if "THROTTLE-ONCE" in text and text not in Stub.throttled:
            Stub.throttled.add(text)
            self._send(429, {"message": "slow down"}, "ThrottlingException")
            return
        if "DENY" in text:
            self._send(403, {"message": "no access to the model"}, "AccessDeniedException")
            return
        if len(text) > TOKEN_LIMIT_CHARS:
            self._send(400, {"message": "Too many input tokens."}, "ValidationException")
            return
        dimension = body["dimensions"] - (1 if "WRONG-DIM" in text else 0)
        self._send(200, {"embedding": stub_vector(text, dimension), "inputTextTokenCount": len(text.split())})

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def stub() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def bedrock_client(endpoint: str) -> Any:
    return boto3.client(
        "bedrock-runtime",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="secret",
        config=Config(retries={"mode": "standard", "max_attempts": 3}),
    )


@pytest.fixture(scope="module")
def local() -> Embedder:
    """The packaged all-MiniLM-L6-v2 (`make install` installs it); outside CI a missing model skips."""
    from dovecote.embedding.local import LocalEmbedder

    try:
        return LocalEmbedder()
    except Unavailable as exc:
        if CI:
            raise
        pytest.skip(reason=f"the local embedder is not installed: {exc.message}")


@pytest.fixture(params=["hashing", "bedrock", "local"])
def embedder(request: pytest.FixtureRequest, stub: str) -> Embedder:
    if request.param == "hashing":
        return HashingEmbedder(dimension=256)
    if request.param == "local":
        return request.getfixturevalue("local")  # type: ignore[no-any-return]
    return BedrockEmbedder(bedrock_client(stub), dimension=256)


# ---- the conformance suite: every adapter ---------------------------------------------------------


def test_one_unit_vector_per_text_in_order(embedder: Embedder) -> None:
    texts = [f"message number {i} about topic {i % 3}" + " and more" * (i % 4) for i in range(40)]
    vectors = embedder.embed(texts)
    assert len(vectors) == len(texts)
    for vector in vectors:
        assert len(vector) == embedder.info.dimension
        assert math.isclose(math.sqrt(sum(x * x for x in vector)), 1.0, rel_tol=1e-6)
    again = embedder.embed(list(reversed(texts)))  # order and identity, whatever the batching
    for mine, theirs in zip(again, reversed(vectors), strict=True):
        assert mine == pytest.approx(theirs, abs=1e-5)
    assert embedder.embed([texts[7]])[0] == pytest.approx(vectors[7], abs=1e-5)  # alone as in a batch


def test_a_blank_text_is_the_zero_vector(embedder: Embedder) -> None:
    blank, word = embedder.embed(["  \n", "word"])
    assert blank == [0.0] * embedder.info.dimension
    assert any(word)


def test_an_empty_batch_is_empty(embedder: Embedder) -> None:
    assert embedder.embed([]) == []


@pytest.mark.parametrize("bad", ["one string", [b"bytes"], [1], ["ok"] * (MAX_BATCH + 1)], ids=str)
def test_the_gate_refuses(embedder: Embedder, bad: Any) -> None:
    with pytest.raises(InvalidArgument):
        embedder.embed(bad)


# ---- Bedrock: the request shape and the faults ----------------------------------------------------


def test_bedrock_sends_titan_v2_requests_signed_with_the_dimension(stub: str) -> None:
    Stub.seen.clear()
    embedder = BedrockEmbedder(bedrock_client(stub), dimension=512)
    vectors = embedder.embed(["alpha beta", "gamma"])
    assert vectors == [approx(stub_vector("alpha beta", 512)), approx(stub_vector("gamma", 512))]
    assert {row["model"] for row in Stub.seen} == {TITAN_V2}
    assert sorted(row["body"]["inputText"] for row in Stub.seen) == ["alpha beta", "gamma"]
    assert all(row["body"]["dimensions"] == 512 and row["body"]["normalize"] is True for row in Stub.seen)
    assert all(row["headers"]["Content-Type"] == "application/json" for row in Stub.seen)
    assert embedder.input_tokens == 3
    assert embedder.info.model_id == TITAN_V2 and embedder.info.dimension == 512


@pytest.mark.parametrize("dimension", [0, 384, 2048])
def test_bedrock_offers_only_titans_dimensions(stub: str, dimension: int) -> None:
    with pytest.raises(InvalidArgument):
        BedrockEmbedder(bedrock_client(stub), dimension=dimension)


def test_a_throttle_is_retried_by_botocore(stub: str) -> None:
    Stub.seen.clear()
    text = "THROTTLE-ONCE please"
    assert BedrockEmbedder(bedrock_client(stub), dimension=256).embed([text]) == [approx(stub_vector(text, 256))]
    assert len(Stub.seen) == 2


def test_too_many_tokens_keeps_the_start(stub: str) -> None:
    long = "start " + "x" * (2 * TOKEN_LIMIT_CHARS)
    [vector] = BedrockEmbedder(bedrock_client(stub), dimension=256).embed([long])
    cut = long[: len(long) // 2][: len(long) // 4]  # halved until under the stub's limit
    assert len(cut) <= TOKEN_LIMIT_CHARS
    assert vector == approx(stub_vector(cut, 256))


def test_a_text_is_cut_to_the_port_limit_and_halved_at_most_three_times(stub: str) -> None:
    Stub.seen.clear()
    with pytest.raises(Unavailable):  # the stub refuses anything over 3,000 characters
        BedrockEmbedder(bedrock_client(stub), dimension=256).embed(["y" * (MAX_CHARS + 10)])
    sent = [len(row["body"]["inputText"]) for row in Stub.seen]
    assert sent == [MAX_CHARS, MAX_CHARS // 2, MAX_CHARS // 4, MAX_CHARS // 8]


@pytest.mark.parametrize("text", ["DENY this", "WRONG-DIM answer"])
def test_a_failing_service_fails_the_whole_batch(stub: str, text: str) -> None:
    embedder = BedrockEmbedder(bedrock_client(stub), dimension=256)
    with pytest.raises(Unavailable):
        embedder.embed(["fine", text, "also fine"])


def test_an_unreachable_service_is_unavailable() -> None:
    client = boto3.client(
        "bedrock-runtime",
        endpoint_url="http://127.0.0.1:9",
        region_name="us-east-1",
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="secret",
        config=Config(retries={"mode": "standard", "max_attempts": 1}, connect_timeout=1),
    )
    with pytest.raises(Unavailable):
        BedrockEmbedder(client, dimension=256).embed(["hello"])


def test_a_batch_is_sent_concurrently_and_answered_in_order(stub: str) -> None:
    texts = [f"text {i}" for i in range(64)]
    embedder = BedrockEmbedder(bedrock_client(stub), dimension=256, threads=8)
    assert embedder.embed(texts) == [approx(stub_vector(t, 256)) for t in texts]


# ---- configuration --------------------------------------------------------------------------------


def test_the_configured_embedder(monkeypatch: pytest.MonkeyPatch, stub: str) -> None:

    from dovecote.embedding.engines import open_embedder
    from dovecote.platform import aws
    from dovecote.platform.settings import Settings, SettingsError

    assert open_embedder(Settings()) is None  # off by default: the search stays lexical
    try:
        packaged = open_embedder(Settings(embedder="local"))
    except Unavailable:
        assert not CI  # `make install` installs the model: under CI it must be there
    else:
        assert packaged is not None and packaged.info.dimension == 384
    fake = open_embedder(Settings(embedder="hashing", embed_dimension=256))
    assert isinstance(fake, HashingEmbedder) and fake.info.dimension == 256
    monkeypatch.setenv("AWS_ENDPOINT_URL", stub)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    aws.reset_clients()
    try:
        bedrock = open_embedder(Settings(embedder="bedrock", embed_dimension=1024))
        assert isinstance(bedrock, BedrockEmbedder)
        assert bedrock.info.dimension == 1024
        assert bedrock.embed(["through the platform client"]) == [
            approx(stub_vector("through the platform client", 1024))
        ]
    finally:
        aws.reset_clients()
    with pytest.raises(SettingsError):
        Settings(embedder="bedrock", embed_dimension=384)  # type: ignore[arg-type]


# ---- the local model: it is semantic ---------------------------------------------------------------

PARAPHRASES = [
    ("how do I reset my password", "I forgot my login credentials"),
    ("the meeting moved to Thursday", "we rescheduled the call"),
    ("the deploy failed because the disk was full", "no space left on the device broke the release"),
]
UNRELATED = [
    ("how do I reset my password", "the cat sat on the mat"),
    ("the meeting moved to Thursday", "stock prices fell sharply"),
    ("the deploy failed because the disk was full", "my favourite fruit is a mango"),
]


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_the_local_model_finds_paraphrases_that_share_no_word(local: Embedder) -> None:
    assert local.info.model_id == "sentence-transformers/all-MiniLM-L6-v2" and local.info.dimension == 384
    close = [cosine(*local.embed(list(pair))) for pair in PARAPHRASES]
    far = [cosine(*local.embed(list(pair))) for pair in UNRELATED]
    assert min(close) > max(far) + 0.1, (close, far)
    fake = HashingEmbedder(dimension=384)  # the fake is not semantic: it cannot tell them apart
    assert cosine(*fake.embed(list(PARAPHRASES[0]))) < 0.5


def test_a_long_text_is_cut_to_the_models_window(local: Embedder) -> None:
    head = "the release was blocked by a failing migration "
    long, longer = head * 100, head * 100 + "unrelated tail " * 200
    a, b = local.embed([long, longer])
    assert cosine(a, b) > 0.999  # both are their first 256 tokens
